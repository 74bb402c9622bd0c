"""The CPU of each emulated node as a cgroup (``--cpu kernel``): one node's share of the
machine's cores, under the kernel's scheduler.

A run makes one group per node under a group of its own, ``nodesel-<pid>`` (the launcher's
process id), in the cgroup v1 ``cpu`` hierarchy (``cpu.cfs_quota_us`` over
``cpu.cfs_period_us``) or, where the unified hierarchy has the ``cpu`` controller, in cgroup
v2 (``cpu.max``). With dilation K an emulated node's CPU is 1/K of a core: its quota is
``QUOTA_US`` per ``K x QUOTA_US`` of period, so that the kernel's CFS bandwidth control lets a
node run for at most 2 ms of every 2K ms (the emulated node's CPU runs in bursts of a core
of 2/K ms of emulated time, 2 - 2/K ms apart; below K = 2 the period is longer, see
:func:`period_us`). The node's rank and its local user join the node's
group; every process in a group shares its quota by the kernel's fair scheduler.

Where a node's quota is one whole core (dilation 1), the node's rank is also bound to a core
of its own (:func:`pin`, :func:`binds`), and its local user and task threads with it: an
emulated node is one CPU. Unbound, a node's two task threads ran on both cores at once,
spent the period's quota in half of it, and beside two busy loops lost up to a fifth of
their share to them (the loops ran while both nodes were throttled). Where nodes share a
core (dilation above 1) they are left unbound: bound, the groups on a core were all
throttled at once now and then, and a job of EP on every node took 10% longer than the
model's (5% unbound).

The coordinator (rank 0) has a group of its own beside the nodes', ``coordinator``, with no
quota and the largest CPU weight (``cpu.shares`` 262144, v2 ``cpu.weight`` 10000, against
the nodes' 1024 and 100): a cluster's front end is a machine of its own, so when it has work
(Algorithm 1 at an arrival) it takes a core at once instead of a fair share beside the nodes
running there. It never spins while it waits, so the nodes lose only the CPU it uses.

The run's group itself has the largest weight too: other processes on the machine (two busy
loops, say) would otherwise take the nodes' CPU from under their quotas, since a quota caps a
group and guarantees it nothing; the quotas still cap the whole at the cores it was given.

Only groups this run made are touched: :meth:`CpuGroups.down` moves whatever is still in them
back to the root group and removes them, and can run again safely; :func:`remove_stale`
removes the groups of runs whose launcher is gone.

This machine kind mounts cgroup v1 (``/sys/fs/cgroup/cpu``); the v2 path follows the kernel's
documentation and is tested on a hierarchy laid out in a folder, not on a v2 kernel.
"""

import errno
import math
import os
import re
import time

from ..errors import UserError

V1_ROOT = "/sys/fs/cgroup/cpu"
V2_ROOT = "/sys/fs/cgroup"
PREFIX = "nodesel-"
QUOTA_US = 2000  # a node runs this long at most per period of K times it
WHOLE_CORE_PERIOD_US = 50000
ENV = "NODESEL_CPU_GROUPS"  # the run's group, from the launcher to the ranks
COORDINATOR = "coordinator"  # rank 0's group
COORDINATOR_WEIGHT = {"v1": ("cpu.shares", "262144"), "v2": ("cpu.weight", "10000")}  # the most
RUN_WEIGHT = COORDINATOR_WEIGHT  # the run's own group, beside the machine's other processes


def hierarchy():
    """``("v1", root)`` or ``("v2", root)`` where a writable ``cpu`` controller is mounted;
    None otherwise."""
    if os.path.exists(os.path.join(V1_ROOT, "cpu.cfs_quota_us")):
        return "v1", V1_ROOT
    controllers = os.path.join(V2_ROOT, "cgroup.controllers")
    if os.path.exists(controllers):
        with open(controllers) as f:
            if "cpu" in f.read().split():
                return "v2", V2_ROOT
    return None


def unavailable():
    """Why ``--cpu kernel`` cannot run here (None if it can)."""
    if os.geteuid() != 0:
        return "--cpu kernel needs root (it puts each node in a cgroup of its own)"
    found = hierarchy()
    if found is None:
        return ("--cpu kernel needs the cgroup cpu controller (v1 at /sys/fs/cgroup/cpu, or "
                "v2 with cpu in /sys/fs/cgroup/cgroup.controllers), and this machine has "
                "neither")
    if not os.access(found[1], os.W_OK):
        return f"--cpu kernel cannot write to {found[1]}"
    return None


def period_us(dilation):
    """The CFS period giving a node 1/``dilation`` of a core: ``QUOTA_US`` of run time in
    each; below dilation 2, ``WHOLE_CORE_PERIOD_US`` (a quota of the whole period or more
    is throttled for its accounting's overshoot when short: at 2 ms of 2 ms, a burning
    process lost a fifth of its core here; at 50 ms, 0.1%).

    >>> period_us(4), period_us(1)
    (8000, 50000)
    """
    if dilation < 2:
        return WHOLE_CORE_PERIOD_US
    return int(round(QUOTA_US * dilation))


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _name(node):
    return re.sub(r"[^A-Za-z0-9_.-]", "_", str(node))


class CpuGroups:
    """The node groups of one run: ``up`` makes them, ``join`` puts a process in one,
    ``down`` takes them away. ``root`` and ``version`` default to :func:`hierarchy`."""

    def __init__(self, nodes, dilation, *, run=None, root=None, version=None):
        if root is None:
            found = hierarchy()
            if found is None:
                raise UserError(unavailable() or "no cgroup cpu controller")
            version, root = found
        self.version, self.root = version, root
        self.run = run or f"{PREFIX}{os.getpid()}"
        self.base = os.path.join(root, self.run)
        self.nodes = list(nodes)
        self.dilation = float(dilation)
        if COORDINATOR in map(_name, self.nodes):
            raise UserError(f"--cpu kernel: a node may not be named {COORDINATOR!r} (the "
                            "coordinator's cgroup has that name)")

    def path(self, node):
        return os.path.join(self.base, _name(node))

    def up(self):
        """Make the run's group, one per node with its quota and the coordinator's; returns
        the run's path (for :data:`ENV`)."""
        remove_stale(self.root)
        period = period_us(self.dilation)
        quota = int(round(period / self.dilation))
        try:
            os.makedirs(self.base, exist_ok=True)
            # the emulated cluster against everything else on the machine: the largest
            # weight (its nodes' quotas still cap it at the cores it was given)
            _write(os.path.join(self.base, RUN_WEIGHT[self.version][0]),
                   RUN_WEIGHT[self.version][1])
            if self.version == "v2":
                _write(os.path.join(self.base, "cgroup.subtree_control"), "+cpu")
            for node in self.nodes:
                group = self.path(node)
                os.makedirs(group, exist_ok=True)
                if self.version == "v1":
                    _write(os.path.join(group, "cpu.cfs_period_us"), str(period))
                    _write(os.path.join(group, "cpu.cfs_quota_us"), str(quota))
                else:
                    _write(os.path.join(group, "cpu.max"), f"{quota} {period}")
            group = self.path(COORDINATOR)
            os.makedirs(group, exist_ok=True)
            _write(os.path.join(group, COORDINATOR_WEIGHT[self.version][0]),
                   COORDINATOR_WEIGHT[self.version][1])
        except OSError as e:
            self.down()
            raise UserError(f"cannot make the nodes' cgroups under {self.base}: {e}") from None
        return self.base

    def down(self):
        """Move what is left in the run's groups to the root group and remove them (again:
        nothing to do)."""
        if not os.path.isdir(self.base):
            return False
        _remove_tree(self.root, self.base)
        return True


def join(run_path, node, pid=None):
    """Put process ``pid`` (default this one) and its threads in ``node``'s group of the run
    at ``run_path`` (:data:`COORDINATOR`: the coordinator's)."""
    _write(os.path.join(run_path, _name(node), "cgroup.procs"), str(pid or os.getpid()))


def core_of(index, cores=None):
    """The core node number ``index`` (from 0, in the cluster's order) runs on: the cores
    this process may run on (default: its affinity), taken in turn.

    >>> core_of(0, {2, 3}), core_of(1, {2, 3}), core_of(2, {2, 3})
    (2, 3, 2)
    """
    allowed = sorted(os.sched_getaffinity(0) if cores is None else cores)
    return allowed[index % len(allowed)]


def binds(dilation):
    """Whether the nodes' ranks are bound to a core each: where a node's quota is a whole
    core, neither more nor shared.

    >>> binds(1.0), binds(4.0), binds(0.5)
    (True, False, False)
    """
    return float(dilation) == 1.0


def pin(core, pid=None):
    """Bind every thread of process ``pid`` (default this one) to ``core``; the threads and
    processes it starts later inherit the binding."""
    pid = pid or os.getpid()
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), {core})
        except ProcessLookupError:
            pass  # a thread that ended meanwhile


def leave(run_path, pid=None):
    """Put process ``pid`` (default this one) back in the root group of the run's hierarchy,
    so the run's groups can go."""
    _write(os.path.join(os.path.dirname(run_path), "cgroup.procs"), str(pid or os.getpid()))


def _pids(group):
    try:
        with open(os.path.join(group, "cgroup.procs")) as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return []


def _remove_tree(root, base, patience_seconds=10.0):
    """Move every process left in the run's groups to ``root`` and remove the groups. A
    process still exiting (a rank ended by a signal, its local user) keeps its group busy
    for a moment: moving and removing are retried for up to ``patience_seconds``."""
    deadline = time.monotonic() + patience_seconds
    groups = sorted((os.path.join(base, d) for d in os.listdir(base)
                     if os.path.isdir(os.path.join(base, d))), reverse=True)
    for group in groups + [base]:
        while True:
            for pid in _pids(group):
                try:
                    _write(os.path.join(root, "cgroup.procs"), str(pid))
                except OSError as e:
                    # a process that ended meanwhile is gone anyway; one exiting cannot move
                    if e.errno not in (errno.ESRCH, errno.EINVAL):
                        raise
            try:
                os.rmdir(group)
                break
            except OSError as e:
                if e.errno != errno.EBUSY or time.monotonic() > deadline:
                    raise OSError(e.errno, f"{os.strerror(e.errno)} (processes "
                                  f"{_pids(group) or 'exiting'} still in it)", group) from None
                time.sleep(0.05)


def remove_stale(root):
    """Remove the groups of earlier runs whose launcher has ended (a run killed outright);
    their names say which runs they were."""
    try:
        names = os.listdir(root)
    except OSError:
        return []
    removed = []
    for name in names:
        m = re.fullmatch(re.escape(PREFIX) + r"(\d+)", name)
        if not m:
            continue
        pid = int(m.group(1))
        try:
            os.kill(pid, 0)
            continue  # its launcher still runs
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        _remove_tree(root, os.path.join(root, name))
        removed.append(name)
    return removed


def default_dilation(nodes, cores=None):
    """The dilation ``--cpu kernel`` needs: every node a whole emulated CPU, nodes over the
    machine's cores (at least 1).

    >>> default_dilation(8, 2), default_dilation(3, 4)
    (4, 1)
    """
    cores = cores or os.cpu_count() or 1
    return max(1, math.ceil(nodes / cores))
