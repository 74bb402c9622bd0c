"""A communicator's view of the emulated network (:class:`Network`): the cluster's one fluid
model, each path's one-way latency, and the time dilation. The shaped communicators
(:mod:`.comm`, :mod:`.engine`) pace their messages by it."""

import time


class Network:
    """A communicator's view of the cluster's network: the one model every flow shares, the
    one-way latency, and the time dilation.

    Parameters
    ----------
    model : emulator.network.sharing.ClusterModel
        The cluster's fluid model (shared by the ranks of a machine, or private to this
        process for a communicator of one process).
    latency_seconds : float
        Emulated one-way latency added to every message (without ``cluster``).
    dilation : float
        Wall seconds per emulated second (the model's clock must say the same).
    cluster : networkx.Graph or emulator.network.view.ClusterView, optional
        The cluster: each message then waits its path's latency
        (:func:`~emulator.network.cluster.latencies_from`), none within a node.
    """

    def __init__(self, model, *, latency_seconds=0.0, dilation=1.0, cluster=None):
        if not dilation > 0:
            raise ValueError(f"dilation must be positive, got {dilation}")
        self.model = model
        self.latency_seconds = latency_seconds
        self.dilation = dilation
        self.cluster = cluster

    def wall_latencies_to(self, node, nodes):
        """The wall latency of a message from each of ``nodes`` to ``node``."""
        if self.cluster is None:
            return [self.wall_latency_seconds] * len(nodes)
        from ..network.cluster import latencies_from

        return [s * self.dilation for s in latencies_from(self.cluster, node, nodes)]

    @property
    def wall_latency_seconds(self):
        return self.latency_seconds * self.dilation

    @classmethod
    def private(cls, cluster, timeline=None, *, latency_seconds=None, dilation=1.0):
        """A network whose model lives in this process alone (a communicator of one
        process, or a check), its scenario clock starting now."""
        from ..network.sharing import ClusterModel

        model = ClusterModel(cluster, timeline, max_flows=4096)
        model.set_clock(epoch=time.time(), dilation=dilation)
        if latency_seconds is None:  # each path's
            return cls(model, dilation=dilation, cluster=cluster)
        return cls(model, latency_seconds=latency_seconds, dilation=dilation)
