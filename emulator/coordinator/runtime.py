"""The emulated cluster under ``mpiexec``: rank 0 coordinates, ranks 1..N are nodes.

Here: the coordinator (:class:`Coordinator`) and the start of every rank (:func:`launch`,
:func:`serve`). A node rank's side is :mod:`.node`, the work it runs :mod:`.tasks`, what
every rank agrees on :mod:`.settings`.

Node ranks serve the coordinator's commands on a control communicator:

``work``   run a registered work function on a group of nodes, over a shaped group
           communicator (:class:`emulator.shaping.ShapedComm`); disjoint groups run at once;
           with ``threaded`` the work runs in a thread of its own, on a communicator of
           its own, so groups that share nodes run at once too (time sharing), their
           compute phases sharing the node's CPU (:mod:`.cpushare`), and the node goes on
           answering the coordinator meanwhile; the reply comes on the job's own tag;
``load``   start the node's local user (``unload`` stops it): a process holding its memory;
           its CPU share and its LAN traffic are flows of the model, or with ``--cpu kernel``
           its CPU is burnt in the node's cgroup; under kernel shaping its traffic is real
           UDP from the node's address across the testbed;
``report`` measure the load with psutil and give each threaded job's CPU time so far;
``stop``   stop the load and leave.

No rank spins while it waits: every wait polls with ``Test``/``Iprobe`` and sleeps. No rank
hangs the job: the coordinator gives every wait a timeout, checks that node processes on
its own host are still alive, and on a failure names the node and aborts the job.
"""

import os
import pickle
import sys
import time
from dataclasses import replace

import numpy as np
from mpi4py import MPI

from ..errors import MachineFailure, NodeFailure, UserError
from ..network import cluster as clusters
from ..network.scenario import pair_bandwidth_function
from ..network.view import ClusterView
from ..shaping import doorbell
from . import stop, supervise
from .launch import report_started
from .node import leave_cpu_group, machine, serve_node
from .receive import Receive
from .settings import (CONTROL_TAG, DEATH_SETTLE_SECONDS, GRACE_SECONDS, IDLE_BELL_MAX_SECONDS,
                       IDLE_POLL_MAX_SECONDS, IDLE_POLL_MIN_SECONDS, JOB_TAG_BASE, JOB_TAGS,
                       SEND_POLL_SECONDS, STOP_GRACE_SECONDS, Settings)
from .tasks import WORK, flows, probe, skeleton, transfer, work

__all__ = ["Coordinator", "Settings", "WORK", "call_off", "flows", "launch", "probe", "serve",
           "serve_node", "skeleton", "transfer", "work"]


class Coordinator:
    """Rank 0's handle on the node ranks.

    A node found dead or silent is marked down (:attr:`down`) and never sent work again;
    the peers it left waiting answer once their own timeout passes, and those late replies
    are drained before the peers get new work, so a failure costs one job, not the run.
    """

    def __init__(self, world, control, settings, model=None):
        self.world, self.control, self.settings = world, control, settings
        self.model = model  # the cluster's shared network model (in-process shaping)
        self.names = clusters.node_names(settings.cluster)
        self.nranks = world.Get_size() - 1
        self.timeout_seconds = settings.timeout_seconds
        self._jobs = 0
        self.machine = machine()
        self.info = {}
        self.down = set()  # node names
        self.shaper = None  # a KernelShaper when the kernel shapes (settings.shaping "tc")
        self._stale = {}  # rank -> replies still owed for a failed job
        # nodes ring this bell after replying (settings.extra["coordinator_bell"], see launch)
        self._bell = doorbell.local() if settings.extra.get("coordinator_bell") else None
        reqs = {r: Receive(control, r, CONTROL_TAG) for r in range(1, self.nranks + 1)}
        self.info = self._collect(reqs, "start-up")
        # the nodes that hear this rank's bell: their control bells, rung after each
        # message to them
        here = doorbell.place()
        self._node_bells = {r: i["control_bell"] for r, i in self.info.items()
                            if self._bell is not None and i.get("control_bell")
                            and i.get("place") == here}
        self._true_pair = pair_bandwidth_function(settings.cluster, settings.timeline)

    def _doorbells(self, members):
        """The members' doorbell addresses if all can hear each other's, else None."""
        infos = [self.info.get(r, {}) for r in members]
        places = {i.get("place") for i in infos}
        if None in places or len(places) != 1:
            return None
        return [i["bell"] for i in infos]

    def _send(self, msg, ranks):
        """A control message to each of ``ranks``, all posted at once, and a ring of each
        bell that can be heard. A large message waits for its receiver to take it: one
        after the other, a job's flows list reached 128 ranks over 4 machines in 52 s. A
        rank that has not taken it within the timeout is named."""
        sends = [(rank, self.control.isend(msg, rank, CONTROL_TAG)) for rank in ranks]
        for rank in ranks:
            if rank in self._node_bells:
                self._bell.ring(self._node_bells[rank])
        deadline = time.monotonic() + self.timeout_seconds
        while sends:
            sends = [(rank, req) for rank, req in sends if not req.Test()]
            if sends and time.monotonic() > deadline:
                late = [self.node(rank) for rank, _ in sends]
                self.down.update(late)
                raise NodeFailure(", ".join(late), f"did not take a {msg['op']} message within "
                                  f"{self.timeout_seconds:g} s", nodes=late)
            if sends:
                time.sleep(SEND_POLL_SECONDS)

    def idle(self, seconds):
        """Sleep up to ``seconds``, less if a node replies meanwhile (with doorbells)."""
        if self._bell is None:
            time.sleep(seconds)
        else:
            self._bell.wait(seconds)

    def node(self, rank):
        return self.names[rank - 1]

    def rank_of(self, node):
        return self.names.index(node) + 1

    @property
    def up(self):
        """Names of the nodes not marked down, in cluster order."""
        return [n for n in self.names if n not in self.down]

    def _alive(self, rank):
        info = self.info.get(rank)
        if not info or info["machine"] != self.machine:
            return True  # cannot tell from here; the timeout decides
        try:
            import psutil

            proc = psutil.Process(info["pid"])
            return proc.status() != psutil.STATUS_ZOMBIE
        except Exception:
            return False

    def _dead(self, ranks):
        """The ranks of ``ranks`` found dead. When one is, all are looked at again a moment
        later: the ranks of a machine that dies (or is killed) go within moments of each
        other, and the failure names them all."""
        dead = [r for r in ranks if not self._alive(r)]
        if dead:
            time.sleep(DEATH_SETTLE_SECONDS)
            dead = [r for r in ranks if not self._alive(r)]
        return dead

    def _collect(self, reqs, what, timeout=None):
        """Wait for one reply per rank in ``reqs``; raise NodeFailure on death or timeout.

        The exception carries ``pending``: the requests of the ranks that had not answered.
        Once this process is stopped (a ``finally`` on the way out) there is no wait: the
        nodes were stopped too, and would not answer.
        """
        if stop.received() is not None:
            raise stop.Stopped(stop.received())
        timeout = self.timeout_seconds if timeout is None else timeout
        # Peers of a silent node give up on it after the same timeout and say so: a short
        # grace lets their replies in, so only the silent node is blamed.
        grace = min(timeout, GRACE_SECONDS)
        replies, start, last_check = {}, time.monotonic(), 0.0
        sleeper = doorbell.Sleeper(self._bell, IDLE_BELL_MAX_SECONDS, (0.0005, 0.01))
        while len(replies) < len(reqs):
            failure = None
            for rank, req in reqs.items():
                if rank not in replies:
                    done, msg = req.test()
                    if done:
                        sleeper.found()
                        replies[rank] = msg
                        if isinstance(msg, dict) and msg.get("ok") is False \
                                and msg.get("failed") is None:
                            # an error on the node itself: its peers would only time out
                            failure = NodeFailure(self.node(rank), msg.get("error", "?"))
            if len(replies) == len(reqs) and failure is None:
                break
            elapsed = time.monotonic() - start
            if elapsed - last_check > 0.25:
                last_check = elapsed
                self._check_model()
                dead = self._dead([r for r in reqs if r not in replies])
                if dead:
                    failure = NodeFailure(", ".join(self.node(r) for r in dead),
                                          f"rank {', '.join(map(str, dead))} died during {what}",
                                          nodes=[self.node(r) for r in dead])
            if failure is None and elapsed > timeout + grace:
                late = [self.node(r) for r in reqs if r not in replies]
                failure = NodeFailure(", ".join(late), f"no answer to {what} within {timeout:g} s",
                                      nodes=late)
            if failure is not None:
                failure.pending = {r: q for r, q in reqs.items() if r not in replies}
                raise failure
            # wake for the next check of dead nodes and for the timeout at the latest
            sleeper.sleep(min(0.25 - (elapsed - last_check), timeout + grace - elapsed))
        return replies

    def _settle(self, ranks):
        """Drain the replies that ``ranks`` still owe for failed jobs; a rank that does not
        answer within the timeout is marked down."""
        for rank in ranks:
            owed = self._stale.pop(rank, [])
            for req in owed:
                try:
                    self._collect({rank: req}, "a failed job", self.timeout_seconds + GRACE_SECONDS)
                except NodeFailure:
                    self.down.add(self.node(rank))
                    break

    def submit(self, nodes, fn, *, epoch=None, dedicated=False, threaded=False, **kwargs):
        """Start ``fn`` on a group of nodes (names); returns a handle for :meth:`wait` or
        :meth:`poll`.

        ``epoch`` runs the job on its own scenario clock (wall time at scenario time 0);
        ``dedicated`` runs it with every link at full capacity; ``threaded`` runs it beside
        whatever else its nodes run (time sharing, see :func:`serve_node`).
        """
        members = [self.rank_of(n) for n in nodes]
        epoch = self.settings.epoch if epoch is None else epoch
        if self.shaper is not None:  # kernel shaping: bring tc to this job's network
            self.shaper.use(epoch, dedicated)
        if self.model is not None:  # in-process: the model's clock and network for this job
            self.model.set_clock(epoch=epoch, time_scale=self.settings.time_scale,
                                 dilation=self.settings.dilation, dedicated=dedicated)
        self._settle(members)
        gone = [n for n in nodes if n in self.down]
        if gone:
            raise NodeFailure(", ".join(gone), "marked down earlier", nodes=gone)
        self._jobs += 1
        msg = {"op": "work", "job": self._jobs, "members": members, "fn": fn, "kwargs": kwargs,
               "epoch": epoch, "dedicated": dedicated, "doorbells": self._doorbells(members),
               "threaded": threaded}
        self._send(msg, members)
        tag = JOB_TAG_BASE + self._jobs % JOB_TAGS if threaded else CONTROL_TAG
        reqs = {r: Receive(self.control, r, tag) for r in members}
        return {"job": self._jobs, "fn": fn, "nodes": list(nodes), "reqs": reqs,
                "submitted": time.monotonic()}

    def _check_model(self):
        """A model served across machines whose owner has failed ends the run (its flows
        would never end): :class:`MachineFailure` for a machine gone silent, else
        :class:`UserError`, says why in one line."""
        failure = getattr(self.model, "failure", None)
        message = failure() if failure is not None else None
        if message:
            error = self.model.owner_loop.error
            raise error if isinstance(error, MachineFailure) else UserError(message)

    def poll(self, handle):
        """The results of a submitted group (as :meth:`wait`) if every node has answered,
        else None, without waiting. A node found dead is marked down and
        :class:`NodeFailure` names it; so does a node's own error."""
        self._check_model()
        reqs = handle["reqs"]
        got = handle.setdefault("replies", {})
        for rank, req in reqs.items():
            if rank not in got:
                done, msg = req.test()
                if done:
                    got[rank] = msg
        if len(got) < len(reqs):
            now = time.monotonic()
            if now - handle.get("checked", 0.0) > 0.5:
                handle["checked"] = now
                dead = self._dead([r for r in reqs if r not in got])
                if dead:
                    names = [self.node(r) for r in dead]
                    self.down.update(names)
                    raise NodeFailure(", ".join(names), f"rank {', '.join(map(str, dead))} "
                                      f"died during {handle['fn']}", nodes=names)
            return None
        return self._judge(got)

    def _judge(self, replies):
        """Results by node name, or NodeFailure naming the culprit of a failed group."""
        for rank, msg in replies.items():
            if msg.get("ok") is False and msg.get("failed") is None:
                self.down.add(self.node(rank))
                raise NodeFailure(self.node(rank), msg.get("error", "?"))
        # errors on a node itself were raised above; what is left are peers that gave up on
        # a node, and the one they name is the culprit
        failed = [r for r in replies.values() if not r.get("ok")]
        if failed:
            named = next((r for r in failed if r["failed"] != "?"), failed[0])
            culprits = [n.strip() for n in named["failed"].split(",") if n.strip() in self.names]
            self.down.update(culprits)
            raise NodeFailure(named["failed"], named.get("error", "?"), nodes=culprits)
        return {self.node(rank): reply for rank, reply in replies.items()}

    def wait_any(self, handles):
        """``[(handle, results)]`` of the handles whose groups have all answered (results as
        :meth:`wait`), waiting until one has. A group silent past the timeout (and the grace
        its peers have to name the culprit) is a :class:`NodeFailure` naming the silent
        nodes, which are marked down."""
        sleeper = doorbell.Sleeper(self._bell, IDLE_BELL_MAX_SECONDS, (0.0005, 0.01))
        while True:
            done = []
            for handle in handles:
                results = self.poll(handle)
                if results is not None:
                    done.append((handle, results))
            if done:
                return done
            now = time.monotonic()
            for handle in handles:
                if now - handle["submitted"] > self.timeout_seconds + GRACE_SECONDS:
                    silent = [self.node(r) for r in handle["reqs"]
                              if r not in handle.get("replies", {})]
                    self.down.update(silent)
                    raise NodeFailure(", ".join(silent), f"no answer to {handle['fn']} within "
                                      f"{self.timeout_seconds:g} s", nodes=silent)
            sleeper.sleep(0.5)

    def wait(self, handle, *, timeout=None):
        """Results of a submitted group, by node name. On a failure the culprit is marked
        down and :class:`NodeFailure` names it."""
        try:
            replies = self._collect(handle["reqs"],
                                    f"{handle['fn']} on {','.join(handle['nodes'])}", timeout)
        except NodeFailure as e:
            self.down.update(e.nodes)
            for rank, req in e.pending.items():
                if self.node(rank) not in self.down:
                    self._stale.setdefault(rank, []).append(req)
            raise
        return self._judge(replies)

    def run(self, nodes, fn, **kwargs):
        return self.wait(self.submit(nodes, fn, **kwargs))

    def broadcast(self, msg, ranks=None):
        ranks = [r for r in (ranks or range(1, self.nranks + 1)) if self.node(r) not in self.down]
        self._settle(ranks)
        ranks = [r for r in ranks if self.node(r) not in self.down]
        self._send(msg, ranks)
        reqs = {r: Receive(self.control, r, CONTROL_TAG) for r in ranks}
        return {self.node(r): m for r, m in self._collect(reqs, msg["op"]).items()}

    def clock(self, scenario_seconds):
        """An epoch that puts scenario time ``scenario_seconds`` at this instant."""
        return time.time() - scenario_seconds * self.settings.dilation / self.settings.time_scale

    def scenario_time(self, epoch=None):
        return (time.time() - (self.settings.epoch if epoch is None else epoch)) \
            * self.settings.time_scale / self.settings.dilation

    def emulated_seconds(self, wall_seconds):
        """Emulated seconds of a span of wall time (the dilation undone)."""
        return wall_seconds / self.settings.dilation

    def scenario_report(self):
        """How much of the scenario the run played: ``{"scenario_seconds_played",
        "scenario_seconds", "past_end"}`` (in-process shaping; None otherwise)."""
        if self.model is None:
            return None
        clock = self.model.clock()
        played, duration = clock["scenario_seconds_played"], clock["scenario_seconds"]
        return {"scenario_seconds_played": played, "scenario_seconds": duration,
                "past_end": played > duration}

    def true_pair_mbps(self, a, b, scenario_seconds=None):
        t = self.scenario_time() if scenario_seconds is None else scenario_seconds
        return self._true_pair(a, b, t)

    def stop(self):
        if self.shaper is not None:
            self.shaper.close()
            for error in self.shaper.errors:
                print(f"nodesel: warning: a scenario change did not reach tc: {error}",
                      file=sys.stderr, flush=True)
        self.broadcast({"op": "stop"})


# when this process started: segments made since then that no live process maps are the
# run's own (MPICH's, of ranks that were killed)
_STARTED_SECONDS = time.time()


def _abort(world, status):
    """End the whole job with ``status`` once what this rank printed has left its pipes:
    MPI_Abort kills the launcher's proxies, and whatever they had not read yet is lost.
    Under the user's own mpiexec (no launcher of ours to clean up after it), the MPICH
    segments of this machine go first: this rank's own, and those its dead peers left."""
    import fcntl
    import termios

    if stop.says_it_here():
        stop.unlink_own_segments()
        stop.remove_orphan_segments(_STARTED_SECONDS)
    supervise.ending_reported()
    sys.stdout.flush()
    sys.stderr.flush()
    deadline = time.monotonic() + 2.0
    for fd in (1, 2):
        while time.monotonic() < deadline:
            try:
                unread = int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0" * 4),
                                        sys.byteorder)
            except OSError:
                break  # not a pipe: nothing to wait for
            if unread == 0:
                break
            time.sleep(0.001)
    os.dup2(os.open(os.devnull, os.O_WRONLY), 2)  # MPICH's "Abort(3) on node ..." repeats us
    world.Abort(status)


_sent = False  # rank 0 has sent the node ranks their settings (or called the run off)


def launch(program, settings, *, world=None):
    """Run on every rank: rank 0 runs ``program(coordinator)``, the others serve.

    The node ranks take rank 0's ``settings`` (theirs may be None): the cluster as a
    :class:`~emulator.network.view.ClusterView`, no timeline (rank 0 makes the model's
    description and sends it with the model). Returns the program's result on rank 0 and
    None elsewhere, or on a node rank the exit status of a run rank 0 called off before it
    began (:func:`call_off`). A node failure seen by the coordinator is printed, naming the
    node, and aborts the whole job (exit status 3).
    """
    global _sent
    world = world or MPI.COMM_WORLD
    groups = None  # the nodes' cgroups, when this rank makes them (--cpu kernel)
    if world.Get_rank() == 0:
        if settings.shaping == "inproc" and doorbell.local() is not None:
            settings.extra["coordinator_bell"] = (doorbell.local().address, doorbell.place())
        if settings.cpu == "kernel":
            groups = _kernel_cpu(settings)
    # no graph (nor networkx) in the node ranks' processes, nor the scenario they never read
    sent = _bcast_napping(world, replace(settings, cluster=ClusterView.of(settings.cluster),
                                         timeline=None) if world.Get_rank() == 0 else None)
    _sent = True
    if isinstance(sent, int):
        return sent
    settings = settings if world.Get_rank() == 0 else sent
    try:
        return _launch(program, settings, world)
    finally:
        if world.Get_rank() == 0:
            leave_cpu_group(settings)
        if groups is not None:
            groups.down()


def _bcast_napping(world, obj):
    """``obj`` from rank 0 to every rank. The others may wait seconds while rank 0 reads
    the run's files: they nap (a blocking broadcast would spin a core each), then take the
    pickled bytes at once."""
    size = np.zeros(1, dtype=np.int64)
    data = pickle.dumps(obj) if world.Get_rank() == 0 else None
    if data is not None:
        size[0] = len(data)
    request, nap = world.Ibcast(size, root=0), IDLE_POLL_MIN_SECONDS
    while not request.Test():
        time.sleep(nap)
        nap = min(2 * nap, IDLE_POLL_MAX_SECONDS)
    buf = bytearray(data) if data is not None else bytearray(int(size[0]))
    world.Bcast(buf, root=0)
    return obj if data is not None else pickle.loads(buf)


def serve(*, world=None):
    """A node rank of a command that runs the cluster: everything it needs comes from rank
    0, which alone reads the files. Returns the exit status (0, or what rank 0 ended with
    if it called the run off)."""
    return launch(None, None, world=world) or 0


def call_off(status, *, world=None):
    """On rank 0 of a run that ends before :func:`launch` (bad input, a stop): the node
    ranks waiting in :func:`serve` end with ``status``. Nothing once the run began."""
    global _sent
    if not _sent:
        _sent = True
        _bcast_napping(world or MPI.COMM_WORLD, int(status) or 0)


def _kernel_cpu(settings):
    """On rank 0 before the ranks start: the work units of a CPU-second, and the nodes'
    cgroups (made by the launcher, whose run this is, or else here: returned to be taken
    down at the end); rank 0 joins the coordinator's group."""
    from ..kernel import cgroups
    from .work import calibrate

    settings.extra["work_units_per_second"] = calibrate()
    run = os.environ.get(cgroups.ENV)
    groups = None
    if not run:
        groups = cgroups.CpuGroups(clusters.node_names(settings.cluster), settings.dilation)
        run = groups.up()
    settings.extra["cpu_groups"] = run
    cgroups.join(run, cgroups.COORDINATOR)
    return groups


def _unlink_attached_segments(world):
    """Every rank of each machine has attached MPICH's segment (MPI_Init) once all are here:
    the machine's first rank unlinks the name, so that a job killed whole (Hydra dead of a
    SIGHUP, every rank SIGKILLed) leaves nothing in /dev/shm. Only MPICH's: UCX attaches
    its segments later, by name, as peers connect."""
    local = world.Split_type(MPI.COMM_TYPE_SHARED)
    try:
        local.Barrier()
        if local.Get_rank() == 0:
            stop.unlink_own_segments((stop.MPICH_PREFIX,))
    finally:
        local.Free()


def _launch(program, settings, world):
    """:func:`launch` once every rank has the settings."""
    control = world.Dup()
    data = world.Dup()
    _unlink_attached_segments(world)
    model = None
    if settings.shaping == "inproc":
        from ..shaping.window import SpansMachines, shared_model

        def machine_failed(message):  # in an agent's thread: the run cannot go on
            print(f"nodesel: error: {message}", file=sys.stderr, flush=True)
            _abort(world, 3)

        try:
            model = shared_model(world, settings.cluster, settings.timeline,
                                 on_failure=machine_failed)
        except SpansMachines as e:
            if world.Get_rank() == 0:
                print(f"nodesel: error: {e}", file=sys.stderr, flush=True)
            raise SystemExit(2) from None
    supervise.joined()  # past the collectives: from here a failure is timed out, not hung
    if world.Get_rank() != 0:
        serve_node(world, control, data, settings, model)
        if model is not None:
            model.close()
        return None
    report_started()  # every rank is past the Dup collectives
    coordinator = None
    try:
        coordinator = Coordinator(world, control, settings, model)
        if settings.shaping == "tc":
            from ..kernel.kernelshaper import KernelShaper

            coordinator.shaper = KernelShaper.from_settings(settings)
        result = program(coordinator)
        report = coordinator.scenario_report()
        if report and report["past_end"]:
            print(f"nodesel: warning: the run played {report['scenario_seconds_played']:.0f} "
                  f"scenario seconds, past the end of its scenario "
                  f"({report['scenario_seconds']:.0f} s); the last bandwidths held after it",
                  file=sys.stderr, flush=True)
        coordinator.stop()
        if coordinator.down:  # dead ranks cannot take part in MPI's finalize
            print(f"nodesel: nodes down at the end: {', '.join(sorted(coordinator.down))}",
                  file=sys.stderr, flush=True)
            _abort(world, 0)
        if model is not None:
            model.close()
        return result
    except NodeFailure as e:
        # a stop reaches the node ranks and this one at about the same time: nodes that
        # left because of it are not a failure (a stop arriving here ends this wait)
        stop.await_stop(STOP_GRACE_SECONDS)
        print(f"nodesel: error: {e}", file=sys.stderr, flush=True)
        _abort(world, 3)
    except UserError as e:
        print(f"nodesel: error: {e}", file=sys.stderr, flush=True)
        _abort(world, 2)
    except MachineFailure as e:
        print(f"nodesel: error: {e}", file=sys.stderr, flush=True)
        _abort(world, 3)
    except KeyboardInterrupt:
        raise  # stopped: every rank was told, and each ends on its own, quietly
    except BaseException:
        import traceback

        traceback.print_exc()
        _abort(world, 1)
