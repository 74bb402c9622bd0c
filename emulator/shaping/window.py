"""The cluster's network model in MPI shared memory: one model for all ranks of a machine.

:func:`shared_model` is collective: the ranks of a communicator split by machine
(``COMM_TYPE_SHARED``), the first rank of each machine allocates an MPI shared-memory window
(``Win.Allocate_shared``) large enough for the model's state and builds the model in it, and
every other rank attaches to it. The first rank makes the read-only description (paths,
capacities, timelines) from the cluster's graph and scenario and sends it to the others
(:class:`~emulator.network.sharing.ModelPlan`), which need only a view of the cluster. A
process-shared robust mutex in the window guards the state: a rank that dies holding it
does not hang the others.

Where the ranks span machines (each Hydra proxy counts as one), the model is served
instead (:mod:`emulator.shaping.served`): rank 0 owns and solves it, each machine mirrors the
flows of its ranks, and the message path reads the mirror as it reads the shared model.
"""

from mpi4py import MPI

from ..network.sharing import DEFAULT_MAX_FLOWS, ClusterModel, model_plan, state_bytes


class SpansMachines(RuntimeError):
    """The model cannot be served to ranks that span machines."""


def shared_model(comm, cluster, timeline, *, max_flows=DEFAULT_MAX_FLOWS, rank_nodes=None,
                 on_failure=None):
    """The cluster's model in a shared-memory window (collective over ``comm``).

    Every rank gets a :class:`~emulator.network.sharing.ClusterModel` over the same memory;
    ``model.close()`` (collective too) frees the window. Ranks on several machines get the
    served model (:func:`~emulator.shaping.served.served_model`, which ``rank_nodes`` is
    for, and ``on_failure``: what an agent that fails calls, with why) with the same surface;
    :class:`SpansMachines` is raised on every rank where it cannot be served."""
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    together = comm.allreduce(local.Get_size(), op=MPI.MIN) == comm.Get_size()
    if not together:
        from .served import Served, served_model

        try:
            return served_model(comm, local, cluster, timeline, rank_nodes=rank_nodes,
                                on_failure=on_failure)
        except Served as e:
            local.Free()
            raise SpansMachines(str(e)) from None
    first = local.Get_rank() == 0
    # the description is made once per machine: the others attach to it without the graph
    plan = local.bcast(model_plan(cluster, timeline) if first else None, root=0)
    window = MPI.Win.Allocate_shared(state_bytes(plan, max_flows) if first else 0, 1,
                                     comm=local)
    memory, _ = window.Shared_query(0)
    made = None
    if first:
        made = ClusterModel(cluster, timeline, window=memory, create=True, max_flows=max_flows,
                            plan=plan)
    local.Barrier()  # built before anyone attaches
    model = made or ClusterModel(cluster, timeline, window=memory, create=False,
                                 max_flows=max_flows, plan=plan)

    def close():
        model.fluid.detach()  # communicators that outlive the window find no model
        window.Free()
        local.Free()

    model.close = close
    return model
