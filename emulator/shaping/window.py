"""The cluster's network model in MPI shared memory: one model for all ranks of a machine.

:func:`shared_model` is collective: the ranks of a communicator split by machine
(``COMM_TYPE_SHARED``), the first rank of each machine allocates an MPI shared-memory window
(``Win.Allocate_shared``) large enough for the model's state and builds the model in it, and
every other rank attaches to it. Every rank builds the same read-only description (paths,
capacities, timelines) from the same cluster and scenario. A process-shared robust mutex in
the window guards the state: a rank that dies holding it does not hang the others.

Where the ranks span machines (each Hydra proxy counts as one), the model is served
instead (:mod:`emulator.shaping.served`): rank 0 owns and solves it, each machine mirrors the
flows of its ranks, and the message path reads the mirror as it reads the shared model.
"""

from mpi4py import MPI

from ..network.sharing import DEFAULT_MAX_FLOWS, ClusterModel, state_bytes


class SpansMachines(RuntimeError):
    """The model cannot be served to ranks that span machines."""


def shared_model(comm, cluster, timeline, *, max_flows=DEFAULT_MAX_FLOWS, rank_nodes=None):
    """The cluster's model in a shared-memory window (collective over ``comm``).

    Every rank gets a :class:`~emulator.network.sharing.ClusterModel` over the same memory;
    ``model.close()`` (collective too) frees the window. Ranks on several machines get the
    served model (:func:`~emulator.shaping.served.served_model`, which ``rank_nodes`` is
    for) with the same surface; :class:`SpansMachines` is raised on every rank where it
    cannot be served."""
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    together = comm.allreduce(local.Get_size(), op=MPI.MIN) == comm.Get_size()
    if not together:
        from .served import Served, served_model

        try:
            return served_model(comm, local, cluster, timeline, rank_nodes=rank_nodes)
        except Served as e:
            local.Free()
            raise SpansMachines(str(e)) from None
    size = state_bytes(cluster, max_flows)
    first = local.Get_rank() == 0
    window = MPI.Win.Allocate_shared(size if first else 0, 1, comm=local)
    memory, _ = window.Shared_query(0)
    made = None
    if first:
        made = ClusterModel(cluster, timeline, window=memory, create=True, max_flows=max_flows)
    local.Barrier()  # built before anyone attaches
    model = made or ClusterModel(cluster, timeline, window=memory, create=False,
                                 max_flows=max_flows)

    def close():
        model.fluid.detach()  # communicators that outlive the window find no model
        window.Free()
        local.Free()

    model.close = close
    return model
