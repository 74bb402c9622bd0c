"""Skeletons run through the cluster's fluid model in one process, on a simulated clock: the
model's own prediction of what the emulator measures.

Each rank of each job runs its skeleton (the same code the emulator runs) in a thread of
this process, one thread at a time, on a :class:`SimComm`. Its messages are flows of the
cluster's one model (:mod:`emulator.network.sharing`) with the message path's rules: a send
starts its flow at once (through its pair's token bucket); a receive is delivered at the
flow's end plus the latency, in MPI's matching order; a send completes at once if the
message fits the sender's socket buffer, else when what is left of it does. Compute phases
are flows on their node's CPU, and a local user is a bounded flow there, so jobs that share
nodes share CPUs and links max-min, as everything else in the model. Whenever every thread
waits, the clock moves to the next event (a flow's end, a delivery, a release, a scenario
change, a job's start).

>>> from emulator.network.cluster import crossbar
>>> sim = Simulator(crossbar(2), latency_seconds=0.0)
>>> job = sim.add_job("ep", "S", ["n1", "n2"])
>>> round(sim.run()[job]["seconds"], 3)  # 2^26 x 30 flops over 2 ranks at 300 Mflop/s
3.355
"""

import math
import threading

import numpy as np

from emulator.network.sharing import BUFFER_BITS, ClusterModel

from . import NODE_MFLOPS

SEND_BUFFER_BYTES = BUFFER_BITS // 8  # as the message path's
MAX_FLOWS = 1 << 16
EPSILON_SECONDS = 1e-9  # events this close are one instant (the model's rounding)


class SimulationError(RuntimeError):
    """A simulated run that cannot go on (every rank waits for a message that never comes)."""


class _Abandoned(BaseException):
    """Unwinds a rank's thread when its run has failed."""


class _Message:
    __slots__ = ("src", "tag", "data", "slot", "gen", "receive")

    def __init__(self, src, tag, data, slot, gen):
        self.src, self.tag, self.data, self.slot, self.gen = src, tag, data, slot, gen
        self.receive = None


class SimRequest:
    """A simulated send, receive or compute phase."""

    __slots__ = ("comm", "kind", "peer", "tag", "buf", "done", "message", "slot", "gen",
                 "posted")

    def __init__(self, comm, kind, peer=None, tag=None, buf=None):
        self.comm, self.kind, self.peer, self.tag, self.buf = comm, kind, peer, tag, buf
        self.done = False
        self.message = None
        self.slot = self.gen = None
        self.posted = comm.sim.now

    def due(self):
        """The simulated time this request completes at the current rates (inf: unknown)."""
        if self.done:
            return self.comm.sim.now
        sim = self.comm.sim
        if self.kind == "recv":
            m = self.message
            if m is None:
                return math.inf
            comm = self.comm
            return max(self.posted, sim.view(m.slot, m.gen)["end"] + sim.message_seconds +
                       sim.latency(comm.nodes[m.src], comm.nodes[comm.rank]))
        view = sim.view(self.slot, self.gen)
        return view["end"] if self.kind == "compute" else view["release"]

    def settle(self):
        """Complete this request if it is due by now."""
        if self.done or self.due() > self.comm.sim.now + EPSILON_SECONDS:
            return self.done
        sim = self.comm.sim
        if self.kind == "recv":
            m = self.message
            if self.buf is not None and m.data.nbytes:
                target = memoryview(self.buf).cast("B")
                target[:m.data.nbytes] = m.data
            sim.model.fluid.drop(m.slot, m.gen, wall=sim.now)
        else:
            sim.model.fluid.drop(self.slot, self.gen, wall=sim.now)
            if self.kind == "compute":
                self.comm.cpu_seconds += sim.work.pop(self)
        self.done = True
        return True

    def Test(self):
        return self.settle()

    def Wait(self):
        self.comm.wait([self])

    @staticmethod
    def Waitall(requests):
        if requests:
            requests[0].comm.wait(list(requests))

    wait, test = Wait, Test


class SimComm:
    """A rank's communicator in the simulation: the surface skeletons use (buffer
    point-to-point calls, collectives, compute) on the simulated clock."""

    dilation = 1.0

    def __init__(self, sim, job, rank, nodes):
        self.sim, self.job, self.rank = sim, job, rank
        self.size = len(nodes)
        self.nodes = nodes
        self.node = nodes[rank]
        self.bytes_sent = self.messages_sent = 0
        self.cpu_seconds = 0.0
        self.blocked = None  # the requests this rank's thread waits for
        self.go = threading.Event()

    def clock(self):
        return self.sim.now

    def Isend(self, buf, dest, tag=0):
        data = np.frombuffer(bytes(memoryview(buf).cast("B")), dtype=np.uint8)
        sim = self.sim
        holds = data.nbytes > SEND_BUFFER_BYTES  # else the send completes at once
        slot, gen, _ = sim.model.fluid.add(sim.now, sim.index[self.node],
                                           sim.index[self.nodes[dest]], data.nbytes * 8.0,
                                           refs=1 + holds)
        req = SimRequest(self, "send", dest, tag)
        req.slot, req.gen, req.done = slot, gen, not holds
        sim.deliver(self.job, dest, _Message(self.rank, tag, data, slot, gen))
        self.bytes_sent += data.nbytes
        self.messages_sent += 1
        return req

    def Irecv(self, buf, source, tag=0):
        req = SimRequest(self, "recv", source, tag, buf)
        self.sim.post(self.job, self.rank, req)
        return req

    def Send(self, buf, dest, tag=0):
        self.wait([self.Isend(buf, dest, tag)])

    def Recv(self, buf, source, tag=0):
        self.wait([self.Irecv(buf, source, tag)])

    def Sendrecv(self, sendbuf, dest, sendtag=0, recvbuf=None, source=None, recvtag=None):
        source = dest if source is None else source
        recvtag = sendtag if recvtag is None else recvtag
        self.wait([self.Irecv(recvbuf, source, recvtag), self.Isend(sendbuf, dest, sendtag)])

    def compute(self, seconds):
        """A compute phase: ``seconds`` of work on a whole CPU of this rank's node."""
        if seconds <= 0:
            return
        sim = self.sim
        req = SimRequest(self, "compute")
        req.slot, req.gen, _ = sim.model.fluid.add(
            sim.now, sim.index[self.node], sim.index[self.node], float(seconds),
            resource=sim.cpu[self.node])
        sim.work[req] = float(seconds)
        self.wait([req])

    def wait(self, requests):
        """Hand the clock back until every request is done."""
        if all([r.settle() for r in requests]):  # settles each
            return
        self.blocked = requests
        self.sim.switch_from(self)
        self.blocked = None


def _collectives():
    from emulator.shaping.collectives import Collectives

    for name in ("Get_rank", "Get_size", "_coll_tag", "Barrier", "Bcast", "Reduce",
                 "Allreduce", "Allgather", "Alltoall", "Alltoallv"):
        setattr(SimComm, name, getattr(Collectives, name))


_collectives()


def _take(queue, matches):
    """Remove and return the first entry of ``queue`` that ``matches`` (MPI's matching is in
    order), or None."""
    for i, x in enumerate(queue):
        if matches(x):
            return queue.pop(i)
    return None


class Simulator:
    """Jobs of skeletons on a cluster's fluid model.

    Parameters
    ----------
    cluster : networkx.Graph
        A cluster of :mod:`emulator.network.cluster`.
    timeline : optional
        Its scenario (default: every link at its capacity); scenario time 0 is time 0.
    time_scale : float
        Scenario seconds per simulated second.
    latency_seconds : float, optional
        One-way latency of every message (default: each path's, as the emulator's:
        :func:`~emulator.network.cluster.latencies_from`).
    local_cpu : dict, optional
        ``{node: fraction}``: a local user taking that share of the node's CPU.
    message_seconds : float
        What the message path adds to every message beyond its latency and its bytes
        (default none; ``scripts/calibrate_messages`` measures it, in wall seconds: divide
        by the dilation).
    """

    def __init__(self, cluster, timeline=None, *, time_scale=1.0, latency_seconds=None,
                 local_cpu=None, message_seconds=0.0):
        self.model = ClusterModel(cluster, timeline, max_flows=MAX_FLOWS, base=0.0)
        self.model.set_clock(epoch=0.0, time_scale=time_scale, wall=0.0)
        self.index = self.model.index
        self.cpu = {n: self.model.resources.cpu(n) for n in self.model.nodes}
        self.cluster = cluster
        self.latency_seconds = latency_seconds
        if not message_seconds >= 0:
            raise ValueError(f"message_seconds must be at least 0, got {message_seconds}")
        self.message_seconds = float(message_seconds)
        self._latency = None
        for node, fraction in (local_cpu or {}).items():
            if fraction > 0:
                self.model.fluid.add(0.0, self.index[node], self.index[node], 0.0,
                                     bound=float(fraction), resource=self.cpu[node],
                                     persistent=True)
        self.now = 0.0
        self.jobs = []
        self.work = {}  # compute request -> its CPU-seconds
        self._back = threading.Event()
        self._error = None
        self._abandoned = False

    def latency(self, a, b):
        """The one-way latency of a message from node ``a`` to node ``b``."""
        if self.latency_seconds is not None:
            return self.latency_seconds
        if self._latency is None:
            from emulator.network.cluster import latency_function

            self._latency = latency_function(self.cluster)
        return self._latency(a, b)

    def add_job(self, name, npb_class, nodes, *, start_seconds=0.0, iterations=None,
                node_mflops=NODE_MFLOPS):
        """A skeleton run with rank i on ``nodes[i]`` from ``start_seconds``, computing at
        ``node_mflops``; its id."""
        from . import check

        check(name, npb_class, len(nodes))
        missing = [n for n in nodes if n not in self.index]
        if missing:
            raise ValueError(f"nodes {missing} are not in the cluster")
        self.jobs.append({"name": name, "class": npb_class, "nodes": list(nodes),
                          "start": float(start_seconds), "iterations": iterations,
                          "node_mflops": node_mflops,
                          "comms": None, "results": {}, "mailbox": {}, "posted": {}})
        return len(self.jobs) - 1

    # -- messages ---------------------------------------------------------------------------

    def view(self, slot, gen):
        return self.model.fluid.view(slot, gen, wall=self.now)

    def deliver(self, job, dest, message):
        """A message to ``dest``: bound to the first posted receive it matches, else queued."""
        req = _take(self.jobs[job]["posted"].setdefault(dest, []),
                    lambda r: (r.peer, r.tag) == (message.src, message.tag))
        if req is None:
            self.jobs[job]["mailbox"].setdefault(dest, []).append(message)
        else:
            req.message, message.receive = message, req

    def post(self, job, rank, req):
        """A receive: bound to the first queued message it matches, else posted."""
        message = _take(self.jobs[job]["mailbox"].setdefault(rank, []),
                        lambda m: (m.src, m.tag) == (req.peer, req.tag))
        if message is None:
            self.jobs[job]["posted"].setdefault(rank, []).append(req)
        else:
            req.message, message.receive = message, req

    # -- the threads --------------------------------------------------------------------------

    def switch_from(self, comm):
        """Called by a rank's thread: give the clock back and sleep until woken."""
        self._back.set()
        comm.go.wait()
        comm.go.clear()
        if self._abandoned:
            raise _Abandoned

    def _body(self, job, comm):
        from . import run

        comm.go.wait()
        comm.go.clear()
        try:
            j = self.jobs[job]
            j["results"][comm.rank] = run(j["name"], comm, j["class"],
                                          iterations=j["iterations"],
                                          node_mflops=j["node_mflops"])
            j["ends"][comm.rank] = self.now
        except _Abandoned:
            return
        except BaseException as e:  # handed to run(), which raises it
            self._error = self._error or e
        finally:
            comm.blocked = "finished"
            if not self._abandoned:
                self._back.set()

    def _step(self, comm):
        comm.go.set()
        self._back.wait()
        self._back.clear()
        if self._error is not None:
            raise self._error

    def run(self):
        """Run every job to its end. Returns, per job id, ``{"start", "end", "seconds",
        "results"}``: simulated seconds (``seconds`` is the skeleton's own time, as it
        reports it) and each rank's :class:`skeletons.Result`."""
        threads, waiting = [], []
        pending = sorted(range(len(self.jobs)), key=lambda k: (self.jobs[k]["start"], k))
        try:
            while True:
                while pending and self.jobs[pending[0]]["start"] <= self.now + EPSILON_SECONDS:
                    k = pending.pop(0)
                    j = self.jobs[k]
                    j["comms"] = [SimComm(self, k, r, j["nodes"]) for r in range(len(j["nodes"]))]
                    j["ends"] = {}
                    for comm in j["comms"]:
                        t = threading.Thread(target=self._body, args=(k, comm), daemon=True)
                        t.start()
                        threads.append(t)
                        self._step(comm)  # runs until it first waits
                        waiting.append(comm)
                progressed = True
                while progressed:  # every rank whose wait is over runs, in job and rank order
                    progressed = False
                    for comm in list(waiting):
                        if comm.blocked == "finished":
                            waiting.remove(comm)
                        elif all([r.settle() for r in comm.blocked]):  # settles each
                            self._step(comm)
                            progressed = True
                if not waiting and not pending:
                    break
                nxt = min((r.due() for c in waiting for r in c.blocked if not r.done),
                          default=math.inf)
                nxt = min(nxt, self.model.fluid.next_event(),
                          self.jobs[pending[0]]["start"] if pending else math.inf)
                if not math.isfinite(nxt):
                    stuck = sorted({(self.jobs[c.job]["name"], c.rank) for c in waiting})
                    raise SimulationError(f"every rank waits for a message that never comes: "
                                          f"{stuck}")
                self.now = max(nxt, self.now + EPSILON_SECONDS)
                self.model.fluid.advance(self.now)
        except BaseException:
            self._abandoned = True  # a failed run: the threads still waiting unwind
            for comm in waiting:
                comm.go.set()
            for t in threads:
                t.join(timeout=1.0)
            raise
        out = {}
        for k, j in enumerate(self.jobs):
            results = [j["results"][r] for r in sorted(j["results"])]
            out[k] = {"start": j["start"], "end": max(j["ends"].values()),
                      "seconds": max(r.seconds for r in results), "results": results,
                      "cpu_seconds": sum(c.cpu_seconds for c in j["comms"]) / len(j["comms"])}
        return out
