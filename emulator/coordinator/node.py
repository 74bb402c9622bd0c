"""A node rank: it serves the coordinator's commands (:func:`serve_node`), running work on
shaped group communicators, emulating its CPU in the model and its local user."""

import os
import socket
import time

from skeletons.comm import MPIComm

from ..errors import NodeFailure
from ..network import cluster as clusters
from ..network.view import ClusterView
from ..shaping import doorbell
from ..shaping.comm import ShapedComm
from ..shaping.network import Network
from .cpushare import KernelCPU, NodeCPU
from .load import LoadSpec, LocalLoad
from .receive import Receive
from .settings import (CONTROL_TAG, GRACE_SECONDS, IDLE_BELL_MAX_SECONDS, IDLE_POLL_MAX_SECONDS,
                       IDLE_POLL_MIN_SECONDS, JOB_TAG_BASE, JOB_TAGS)
from .tasks import WORK


def machine():
    """Which kernel and PID namespace this process runs in (the boot id and the namespace's
    inode; the hostname where Linux gives no boot id): ranks that share both can check each
    other's PIDs, even in network namespaces with hostnames of their own. Fake machines
    (:mod:`emulator.kernel.machines`) share a kernel, not a PID namespace."""
    boot = doorbell.boot_id()
    if boot is None:
        return socket.gethostname()
    try:
        return f"{boot}/{os.stat('/proc/self/ns/pid').st_ino}"
    except OSError:
        return boot


def _network(settings, model):
    """A node's view of the network: the cluster's one model (the coordinator sets its clock:
    the scenario, or every link at its capacity for a dedicated run)."""
    return Network(model, dilation=settings.dilation, cluster=settings.cluster)


def _group_comm(data, settings, network, names, msg, *, own=False):
    """The communicator a work message runs on; with ``own``, one made for this job alone
    (its ranks numbered from 0): a job time-sharing its nodes with others. All of them send
    their flows into the cluster's one model, so jobs that share nodes or links compete.
    Returns (comm, raw MPI communicator to free or None, the job's own bell to close or
    None)."""
    members, raw = msg["members"], None
    if own or settings.shaping in ("tc", "external"):
        group = data.Get_group().Incl(members)
        raw = data.Create_group(group, msg["job"] % 32768)
        group.Free()
    if settings.shaping in ("tc", "external"):
        # real traffic: a plain communicator over the group (a testbed shaped at 1/K of the
        # cluster's bandwidths under dilation K: compute phases last K times as long)
        return MPIComm(raw, dilation=settings.dilation), raw, None
    nodes = [names[r - 1] for r in members]
    if own:
        bell = bells = None
        if msg.get("doorbells"):  # all members on one machine: a bell for this job alone
            bell = doorbell.Doorbell()
            bells = raw.allgather(bell.address)
        comm = ShapedComm(raw, list(range(len(members))), nodes, network, context=0,
                          timeout_seconds=settings.timeout_seconds, doorbells=bells, bell=bell)
        return comm, raw, bell
    return ShapedComm(data, members, nodes, network, context=msg["job"],
                      timeout_seconds=settings.timeout_seconds,
                      doorbells=msg.get("doorbells")), raw, None


def _run_work(data, settings, network, names, msg, cpu=None, *, own=False):
    """Run one work message; returns the reply. ``cpu``: the node's CPU its compute phases
    share (else they are timed waits: one job alone on its nodes); ``own``: on a
    communicator of its own (a threaded job)."""
    try:
        comm, raw, bell = _group_comm(data, settings, network, names, msg, own=own)
        try:
            if cpu is not None:
                comm.shared_cpu = (cpu, msg["job"])
                cpu.start_task(msg["job"])
            result = WORK[msg["fn"]](comm, **msg["kwargs"])
        finally:
            sent = (comm.bytes_sent, comm.messages_sent)
            del comm  # its references to the model go back now, not at a later collection
            if raw is not None:
                raw.Free()
            if bell is not None:
                bell.close()
        reply = {"ok": True, "job": msg["job"], "result": result,
                 "bytes_sent": sent[0], "messages_sent": sent[1]}
        if cpu is not None:
            reply["cpu_seconds"] = cpu.cpu_seconds(msg["job"])
        return reply
    except NodeFailure as e:
        return {"ok": False, "job": msg.get("job"), "error": e.reason, "failed": e.node}
    except Exception as e:  # reported to the coordinator, which decides
        return {"ok": False, "job": msg.get("job"), "error": f"{type(e).__name__}: {e}"}
    finally:
        if cpu is not None:
            cpu.forget(msg["job"])


def _node_cpu(settings, model, node):
    """The node's CPU: in the cluster's model (a model of this rank's own under kernel
    shaping), or burnt in the node's cgroup (``--cpu kernel``)."""
    if settings.cpu == "kernel":
        groups = settings.extra.get("cpu_groups")
        if groups:
            from ..kernel import cgroups

            cgroups.join(groups, node)
            if cgroups.binds(settings.dilation):  # a node with a core of its own runs there
                cgroups.pin(cgroups.core_of(clusters.node_names(settings.cluster).index(node)))
        return KernelCPU(settings.extra["work_units_per_second"])
    if model is None or getattr(model, "served", False):
        from ..network.sharing import ClusterModel, node_plan

        # a node's CPU serves its own jobs alone: a model of this node only
        model = ClusterModel(None, None, max_flows=1024, plan=node_plan(node))
        model.set_clock(epoch=time.time(), dilation=settings.dilation)
    return NodeCPU(model, node, dilation=settings.dilation)


def _local_user(settings, model, node, spec):
    """Start ``node``'s local user (:class:`LocalLoad`) as ``settings`` emulate it: its CPU
    burnt only with ``--cpu kernel``; its LAN traffic a flow of the model (in-process
    shaping), real UDP from the node's address across the testbed (kernel shaping), or not
    emulated (a real cluster's own). Returns (the load, the model's traffic flow or None)."""
    lan_to, traffic = None, None
    if settings.shaping == "tc" and settings.extra.get("testbed"):
        from ..kernel.testbed import lan_sink

        lan_to = lan_sink(settings.extra["testbed"])
    memory_mb = ClusterView.of(settings.cluster).memory_mb[node]
    load = LocalLoad(spec, memory_mb, burn_cpu=settings.cpu == "kernel",
                     dilation=settings.dilation, lan_to=lan_to)
    load.wait_ready()
    if settings.shaping == "inproc" and model is not None and spec.lan_bytes_per_second > 0:
        from ..network.sharing import steady_flow

        traffic = steady_flow(model, node, ("up", node), spec.lan_bytes_per_second * 8.0,
                              dilation=settings.dilation)
    return load, traffic


def serve_node(world, control, data, settings, model=None):
    """Serve the coordinator until it says stop. ``model``: the cluster's shared network
    model (in-process shaping)."""
    _NodeServer(world, control, data, settings, model).run()


class _NodeServer:
    """A node rank: its network view, CPU and local user, the bells it is woken by, and the
    coordinator's commands (work, load, unload, report, stop) served one by one."""

    def __init__(self, world, control, data, settings, model):
        self.control, self.data, self.settings, self.model = control, data, settings, model
        self.names = clusters.node_names(settings.cluster)
        self.node = self.names[world.Get_rank() - 1]
        self.network = None if model is None else _network(settings, model)
        self.load = self.traffic = None
        self.cpu = _node_cpu(settings, model, self.node)
        self.threads = {}  # job -> thread of a threaded work
        self.bell = doorbell.local() if settings.shaping == "inproc" else None
        # the coordinator rings a bell of the serving loop's own: a ring on the jobs' bell
        # can be taken by a job's wait that is ending (its last Barrier), and the loop would
        # then sleep out its longest nap for a control message already there
        self.control_bell = None if self.bell is None else doorbell.Doorbell()
        if settings.shaping == "inproc":
            from ..shaping import engine

            engine.use_compiled()  # binds the compiled message path now, not in a timed job
        # the coordinator's bell, rung after every reply, where this rank can reach it
        bell = settings.extra.get("coordinator_bell")
        if self.bell is None or bell is None or bell[1] != doorbell.place():
            bell = None
        self.coordinator_bell = bell

    def reply(self, reply, tag):
        self.control.send(reply, 0, tag)
        if self.coordinator_bell is not None:
            self.bell.ring(self.coordinator_bell[0])

    def _hello(self):
        hello = {"pid": os.getpid(), "machine": machine()}
        if self.bell is not None:
            hello.update(bell=self.bell.address, control_bell=self.control_bell.address,
                         place=doorbell.place())
        self.reply(hello, CONTROL_TAG)

    def run(self):
        self._hello()
        # the coordinator rings this rank's control bell after each message to it
        sleeper = doorbell.Sleeper(self.control_bell if self.coordinator_bell is not None
                                   else None, IDLE_BELL_MAX_SECONDS,
                                   (IDLE_POLL_MIN_SECONDS, IDLE_POLL_MAX_SECONDS))
        try:
            while True:
                req = Receive(self.control, 0, CONTROL_TAG)
                while True:
                    done, msg = req.test()
                    if done:
                        sleeper.found()
                        break
                    sleeper.sleep()
                if msg["op"] == "stop":
                    self._stop()
                    return
                if msg["op"] == "work" and msg.get("threaded"):
                    self._start_thread(msg)
                    continue
                try:
                    reply = self._serve(msg)
                except Exception as e:  # reported to the coordinator, which decides
                    reply = {"ok": False, "job": msg.get("job"),
                             "error": f"{type(e).__name__}: {e}"}
                self.reply(reply, CONTROL_TAG)
        finally:
            if self.load is not None:
                self.load.stop()
            if self.control_bell is not None:
                self.control_bell.close()

    def _stop(self):
        # the coordinator stops once it has every reply it waits for: a job thread still
        # running is one whose peer died, and it would wait out the timeout
        for t in self.threads.values():
            t.join(timeout=min(self.settings.timeout_seconds, GRACE_SECONDS))
        self._stop_load()
        leave_cpu_group(self.settings)
        self.reply({"ok": True}, CONTROL_TAG)

    def _start_thread(self, msg):
        import threading

        def threaded():
            reply = _run_work(self.data, self.settings, self.network, self.names, msg,
                              self.cpu, own=True)
            self.reply(reply, JOB_TAG_BASE + msg["job"] % JOB_TAGS)

        self.threads = {j: t for j, t in self.threads.items() if t.is_alive()}
        t = threading.Thread(target=threaded, daemon=True)
        self.threads[msg["job"]] = t
        t.start()

    def _serve(self, msg):
        """The reply to one command other than stop and threaded work."""
        op, settings = msg["op"], self.settings
        if op == "work":  # alone on its nodes: its CPU is shared only by a kernel
            return _run_work(self.data, settings, self.network, self.names, msg,
                             self.cpu if settings.cpu == "kernel" else None)
        if op == "load":
            self._stop_load()
            spec = LoadSpec(**msg["spec"])
            self.cpu.set_local(spec.cpu_fraction)
            self.load, self.traffic = _local_user(settings, self.model, self.node, spec)
            return {"ok": True, "pid": self.load.pid}
        if op == "unload":
            self._stop_load()
            return {"ok": True}
        if op == "report":
            return {"ok": True, "load": None if self.load is None else self.load.measure(),
                    "jobs": {j: self.cpu.cpu_seconds(j) for j, t in self.threads.items()
                             if t.is_alive()}}
        return {"ok": False, "error": f"unknown command {op!r}"}

    def _stop_load(self):
        if self.load is not None:
            self.load.stop()
        if self.traffic is not None:
            self.model.fluid.drop(*self.traffic)
        self.load = self.traffic = None
        self.cpu.set_local(0.0)


def leave_cpu_group(settings):
    """Back to the root cgroup, so the run's groups can be removed once the ranks end."""
    groups = settings.extra.get("cpu_groups") if settings.cpu == "kernel" else None
    if groups:
        from ..kernel import cgroups

        try:
            cgroups.leave(groups)
        except OSError:
            pass  # the launcher moves what is left when it removes the groups
