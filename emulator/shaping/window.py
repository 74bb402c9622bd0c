"""The cluster's network model in MPI shared memory: one model for all ranks of a machine.

:func:`shared_model` is collective: the ranks of a communicator split by machine
(``COMM_TYPE_SHARED``), the first rank of each machine allocates an MPI shared-memory window
(``Win.Allocate_shared``) large enough for the model's state and builds the model in it, and
every other rank attaches to it. Every rank builds the same read-only description (paths,
capacities, timelines) from the same cluster and scenario. A process-shared robust mutex in
the window guards the state: a rank that dies holding it does not hang the others.

In-process shaping needs every rank of the emulated cluster on one machine, since a flow's
sender and receiver must see one model. Ranks that span machines are refused
(:class:`SpansMachines`); the plan for them is a model owner per cluster (one rank keeps the
flow table; the others read and write it with MPI RMA under passive-target locks, at the
cost of a round trip per look) or the kernel's shaping (``--shaping tc`` or ``external``).
"""

from mpi4py import MPI

from ..network.sharing import DEFAULT_MAX_FLOWS, ClusterModel, state_bytes


class SpansMachines(RuntimeError):
    """The ranks of an in-process shaped cluster are not all on one machine."""


def shared_model(comm, cluster, timeline, *, max_flows=DEFAULT_MAX_FLOWS):
    """The cluster's model in a shared-memory window (collective over ``comm``).

    Every rank gets a :class:`~emulator.network.sharing.ClusterModel` over the same memory;
    ``model.close()`` (collective too) frees the window. Raises :class:`SpansMachines`, on
    every rank, if the ranks of ``comm`` are not all on one machine."""
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    together = comm.allreduce(local.Get_size(), op=MPI.MIN) == comm.Get_size()
    if not together:
        local.Free()
        raise SpansMachines("in-process shaping needs every rank on one machine; on a real "
                            "cluster use --shaping external or tc")
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
