"""Queue orders: which waiting job the scheduler considers first.

An order gives each waiting job a sort key; the smallest goes first, ties broken by submit
time and then trace order (and site priorities, from a policy file, come before any key).
The backfilling rule (none, EASY, conservative) is separate: the same order runs under each.

Built in:

``fcfs``       first come, first served: the submit time.
``sjf``        shortest job first: the estimate.
``lwf``        least work first: processors x estimate.
``fairshare``  Maui's and Slurm's fair share: users and groups that used less than their
               target share of the machine lately go first (:class:`FairShare`).

Your own, from a Python file (``--order FILE.py:NAME``):

- a function ``NAME(job, now)`` returning the key;
- or a class ``NAME`` with ``key(self, job, now)``, and optionally ``started(self, job,
  now)`` and ``finished(self, job, now)``, called as jobs start and end (for orders that
  keep state). A function or class with ``static = True`` promises that a job's key never
  changes while it waits: the queue is then kept sorted as jobs arrive instead of sorted
  again at every pass.

``job`` has ``id``, ``submit``, ``procs``, ``estimate`` (what the scheduler believes the run
time is), ``requested`` (the user's requested time, or None), ``user``, ``group``,
``queue`` and ``executable`` (the trace's numbers, -1 where unknown). Keys may be numbers or
tuples of numbers. For example, shortest job first among the small jobs, then the rest by
arrival::

    def small_first(job, now):
        return (0, job.estimate) if job.procs <= 8 else (1, job.submit)
"""

import importlib.util
import inspect
import math
import os

from ..errors import UserError

BUILT_IN = ("fcfs", "sjf", "lwf", "fairshare")


class Order:
    """The interface of an order (and the base of the built-in ones)."""

    name = "order"
    static = True

    def key(self, job, now):
        raise NotImplementedError

    def started(self, job, now):
        """``job`` starts at ``now``."""

    def finished(self, job, now):
        """``job`` ended at ``now``."""


class FCFS(Order):
    name = "fcfs"

    def key(self, job, now):
        return job.submit


class SJF(Order):
    name = "sjf"

    def key(self, job, now):
        return job.estimate


class LWF(Order):
    name = "lwf"

    def key(self, job, now):
        return job.procs * job.estimate


class FairShare(Order):
    """Fair share as Maui computes it, on dedicated processor-seconds.

    Time is cut into windows of ``interval`` seconds (FSINTERVAL) from time 0; a user's (or
    group's) usage is the processor-seconds its jobs ran in each of the last ``depth``
    windows (FSDEPTH, the current one included, running jobs counted up to now), each
    window weighted ``decay`` (FSDECAY) times the next newer one's, as a percentage of all
    usage so weighted. A job's fair-share priority is ``weight * (user_weight * (user
    target - user usage) + group_weight * (group target - group usage))`` (FSWEIGHT,
    FSUSERWEIGHT, FSGROUPWEIGHT; targets FSTARGET in percent of the machine, 0 where none
    is set, so that usage alone then counts against a user); the highest goes first.

    >>> from emulator.scheduling.job import Job
    >>> fs = FairShare(interval=100, depth=2, decay=0.5)
    >>> a, b = Job(1, 0, 4, 50, user=1), Job(2, 0, 4, 50, user=2)
    >>> fs.started(a, 0.0); fs.finished(a, 50.0)
    >>> fs.key(Job(3, 60, 1, 10, user=1), 60.0) > fs.key(Job(4, 60, 1, 10, user=2), 60.0)
    True
    """

    name = "fairshare"
    static = False

    def __init__(self, *, interval=86400.0, depth=8, decay=1.0, weight=1.0, user_weight=1.0,
                 group_weight=0.0, user_targets=None, group_targets=None):
        if not (interval > 0 and depth >= 1 and 0 < decay <= 1):
            raise ValueError("fair share needs FSINTERVAL > 0, FSDEPTH >= 1 and FSDECAY in "
                             "(0, 1]")
        self.interval, self.depth, self.decay = float(interval), int(depth), float(decay)
        self.weight, self.user_weight, self.group_weight = weight, user_weight, group_weight
        self.user_targets = dict(user_targets or {})
        self.group_targets = dict(group_targets or {})
        self.used = {}  # (kind, id) -> {window: processor-seconds}; kind "user" or "group"
        self.total = {}  # window -> processor-seconds of everyone
        self.running = {}  # job -> start
        self._cache = (None, None)  # (now, {(kind, id): usage %})

    @classmethod
    def from_site(cls, site):
        """The fair share a policy file sets (:class:`~.policyfile.SitePolicy`)."""
        fs = getattr(site, "fairshare", None) or {}
        return cls(interval=fs.get("FSINTERVAL", 86400.0), depth=fs.get("FSDEPTH", 8),
                   decay=fs.get("FSDECAY", 1.0), weight=fs.get("FSWEIGHT", 1.0),
                   user_weight=fs.get("FSUSERWEIGHT", 1.0),
                   group_weight=fs.get("FSGROUPWEIGHT", 0.0),
                   user_targets={k: c.fstarget for k, c in site.users.items()
                                 if getattr(c, "fstarget", None) is not None} if site else {},
                   group_targets={k: c.fstarget for k, c in site.groups.items()
                                  if getattr(c, "fstarget", None) is not None} if site else {})

    def _charge(self, job, start, end, table=None):
        """Add ``job``'s processor-seconds over [start, end) to its user's and group's
        windows (and everyone's), or to ``table``."""
        if end <= start:
            return
        window = int(start // self.interval)
        while start < end:
            stop = min(end, (window + 1) * self.interval)
            amount = job.procs * (stop - start)
            for owner in (("user", job.user), ("group", job.group)):
                spent = (self.used if table is None else table).setdefault(owner, {})
                spent[window] = spent.get(window, 0.0) + amount
            totals = self.total if table is None else table.setdefault(("total",), {})
            totals[window] = totals.get(window, 0.0) + amount
            start, window = stop, window + 1

    def started(self, job, now):
        self.running[job] = now
        self._cache = (None, None)

    def finished(self, job, now):
        start = self.running.pop(job, None)
        if start is not None:
            self._charge(job, start, now)
        self._cache = (None, None)

    def usage(self, now):
        """Each user's and group's decayed usage, % of everyone's: {("user", id): %}."""
        if self._cache[0] == now:
            return self._cache[1]
        extra = {}
        for job, start in self.running.items():  # running jobs count up to now
            self._charge(job, start, now, extra)
        current = int(now // self.interval)
        weights = {current - k: self.decay ** k for k in range(self.depth)}

        def decayed(windows_a, windows_b):
            return sum(w * (windows_a.get(i, 0.0) + windows_b.get(i, 0.0))
                       for i, w in weights.items())

        everyone = decayed(self.total, extra.get(("total",), {}))
        owners = set(self.used) | {k for k in extra if k != ("total",)}
        shares = {o: (100.0 * decayed(self.used.get(o, {}), extra.get(o, {})) / everyone
                      if everyone > 0 else 0.0) for o in owners}
        self._cache = (now, shares)
        return shares

    def key(self, job, now):
        shares = self.usage(now)
        user = self.user_targets.get(str(job.user), 0.0) - shares.get(("user", job.user), 0.0)
        group = self.group_targets.get(str(job.group), 0.0) - \
            shares.get(("group", job.group), 0.0)
        return -self.weight * (self.user_weight * user + self.group_weight * group)


class _Function(Order):
    """A user's function ``f(job, now)`` as an order."""

    def __init__(self, fn, name):
        self.fn, self.name = fn, name
        self.static = bool(getattr(fn, "static", False))

    def key(self, job, now):
        return self.fn(job, now)


class _Object(Order):
    """A user's object with ``key``, and maybe ``started`` and ``finished``."""

    def __init__(self, obj, name):
        self.obj, self.name = obj, name
        self.static = bool(getattr(obj, "static", False))
        self.started = getattr(obj, "started", Order.started.__get__(self))
        self.finished = getattr(obj, "finished", Order.finished.__get__(self))

    def key(self, job, now):
        return self.obj.key(job, now)


def make_order(spec, *, site=None):
    """The order named by ``spec``: a built-in name, an :class:`Order`, or
    ``FILE.py:NAME`` (a function or a class, see the module docstring). Raises
    :class:`~emulator.errors.UserError` for an unknown name, a missing file or name, or a
    file that fails to load."""
    if isinstance(spec, Order):
        return spec
    if spec in ("fcfs", "sjf", "lwf"):
        return {"fcfs": FCFS, "sjf": SJF, "lwf": LWF}[spec]()
    if spec == "fairshare":
        return FairShare.from_site(site)
    path, sep, name = str(spec).rpartition(":")
    if not sep or not path.endswith(".py"):
        raise UserError(f"unknown order {spec!r}; choose from {', '.join(BUILT_IN)} or give "
                        "FILE.py:FUNCTION")
    if not os.path.isfile(path):
        raise UserError(f"{path}: no such file (the order {spec!r})")
    module_name = "nodesel_order_" + "".join(c if c.isalnum() else "_" for c in path)
    loader_spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(loader_spec)
    try:
        loader_spec.loader.exec_module(module)
    except Exception as e:  # the user's file: say what failed, in one line
        raise UserError(f"{path}: the order file failed to load: {type(e).__name__}: {e}") \
            from None
    if not hasattr(module, name):
        raise UserError(f"{path}: no function or class named {name!r}")
    thing = getattr(module, name)
    if inspect.isclass(thing):
        try:
            obj = thing()
        except Exception as e:
            raise UserError(f"{path}: {name}() failed: {type(e).__name__}: {e}") from None
        if not callable(getattr(obj, "key", None)):
            raise UserError(f"{path}: class {name} has no key(job, now) method")
        return _Object(obj, name)
    if not callable(thing):
        raise UserError(f"{path}: {name} is neither a function nor a class")
    return _Function(thing, name)


def check_key(order, job, now):
    """The key of ``job``, refused with one line if the order fails or gives a key that
    cannot be compared."""
    try:
        key = order.key(job, now)
    except UserError:
        raise
    except Exception as e:  # the user's code: one line naming it, not a traceback
        raise UserError(f"the order {order.name} failed on job {job.id}: "
                        f"{type(e).__name__}: {e}") from None
    try:
        key < key  # noqa: B015  (comparable with itself)
    except TypeError:
        raise UserError(f"the order {order.name} gave {key!r} for job {job.id}, which cannot "
                        "be compared") from None
    if isinstance(key, float) and math.isnan(key):
        raise UserError(f"the order {order.name} gave NaN for job {job.id}")
    return key
