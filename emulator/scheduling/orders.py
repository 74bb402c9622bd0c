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

import math
import os
from operator import attrgetter
from types import MappingProxyType
from typing import Any, Callable, Iterable, Mapping, NamedTuple

from ..errors import UserError

try:
    from ._fairshare import check as check_ranks, decay as decay_usage
except ImportError:  # not built: the groups' keys checked and usage decayed in Python
    check_ranks = decay_usage = None

BUILT_IN = ("fcfs", "sjf", "lwf", "fairshare")


class Order:
    """The interface of an order (and the base of the built-in ones).

    An order whose keys change as time passes (``static = False``) has the queue sorted
    again at a scheduling pass at most every ``period_seconds`` (0: at every pass), on a grid
    of multiples of it from time 0, as a resource manager recomputes priorities on a timer;
    between, an arriving job is placed by its key at arrival."""

    name = "order"
    static = True
    period_seconds = 0.0
    trusted = False  # built in: its keys need no checking

    def keys(self, jobs: Iterable[Any], now: float) -> list:
        """The keys of ``jobs`` at ``now``, checked (:func:`check_key`) unless trusted."""
        if self.trusted:
            return [self.key(job, now) for job in jobs]
        return [check_key(self, job, now) for job in jobs]

    def key(self, job: Any, now: float) -> Any:
        raise NotImplementedError

    def resort(self, queue: list, now: float) -> Any:
        """An order whose keys change may sort the scheduler's queue itself, faster than
        by :meth:`keys`: ``queue`` is ``[((-priority, key, submit, index), job), ...]``;
        returns ``(the waiting jobs' entries with keys at now, sorted; whether their order
        changed)``, or None to leave it to :meth:`keys`."""
        return None

    def started(self, job: Any, now: float) -> None:
        """``job`` starts at ``now``."""

    def finished(self, job: Any, now: float) -> None:
        """``job`` ended at ``now``."""


class FCFS(Order):
    name = "fcfs"
    trusted = True

    def key(self, job: Any, now: float) -> Any:
        return job.submit


class SJF(Order):
    name = "sjf"
    trusted = True

    def key(self, job: Any, now: float) -> Any:
        return job.estimate


class LWF(Order):
    name = "lwf"
    trusted = True

    def key(self, job: Any, now: float) -> Any:
        return job.procs * job.estimate


class FairShareSettings(NamedTuple):
    """Maui's fair-share parameters, named as :class:`FairShare` describes them: FSINTERVAL
    (``interval``, seconds), FSDEPTH, FSDECAY, FSWEIGHT, FSUSERWEIGHT, FSGROUPWEIGHT,
    FSTARGET per user and group (percent of the machine) and RMPOLLINTERVAL
    (``period_seconds``: the queue sorted at most that often; 0, at every pass)."""

    interval: float = 86400.0
    depth: int = 8
    decay: float = 1.0
    weight: float = 1.0
    user_weight: float = 1.0
    group_weight: float = 0.0
    user_targets: Mapping = MappingProxyType({})  # none
    group_targets: Mapping = MappingProxyType({})
    period_seconds: float = 0.0


MAUI_NAMES = {"FSINTERVAL": "interval", "FSDEPTH": "depth", "FSDECAY": "decay",
              "FSWEIGHT": "weight", "FSUSERWEIGHT": "user_weight",
              "FSGROUPWEIGHT": "group_weight", "RMPOLLINTERVAL": "period_seconds"}


def decayed_usage(used: dict, window: int, weights: list, oldest: int) -> dict:
    """{owner: decayed usage} at ``window`` of ``used``, {owner: {window: processor-seconds}}:
    the usage of ``window - k`` times ``weights[k]``, summed newest first. The windows
    before ``oldest``, which never count again, are deleted from ``used`` (an owner left with
    none too). ``_fairshare.decay`` does the same in C, to the bit.

    >>> used = {"ann": {3: 10.0, 5: 4.0}, "bob": {2: 7.0}}
    >>> decayed_usage(used, 5, [1.0, 0.5, 0.25], 3), used
    ({'ann': 6.5}, {'ann': {3: 10.0, 5: 4.0}})
    """
    out = {}
    for owner in list(used):
        windows = used[owner]
        for i in [i for i in windows if i < oldest]:
            del windows[i]
        if windows:
            out[owner] = sum(w * windows.get(window - k, 0.0) for k, w in enumerate(weights))
        else:
            del used[owner]
    return out


class FairShare(Order):
    """Fair share as Maui computes it, on dedicated processor-seconds (``settings``, a
    :class:`FairShareSettings`).

    Time is cut into windows of ``interval`` seconds (FSINTERVAL) from time 0; a user's (or
    group's) usage is the processor-seconds its jobs ran in each of the last ``depth``
    windows (FSDEPTH, the current one included, running jobs counted up to now), each
    window weighted ``decay`` (FSDECAY) times the next newer one's, as a percentage of all
    usage so weighted. A job's fair-share priority is ``weight * (user_weight * (user
    target - user usage) + group_weight * (group target - group usage))`` (FSWEIGHT,
    FSUSERWEIGHT, FSGROUPWEIGHT; targets FSTARGET in percent of the machine, 0 where none
    is set, so that usage alone then counts against a user); the highest goes first.

    >>> from emulator.scheduling.job import Job, Owner
    >>> fs = FairShare(FairShareSettings(interval=100, depth=2, decay=0.5))
    >>> a, b = Job(1, 0, 4, 50, owner=Owner(user=1)), Job(2, 0, 4, 50, owner=Owner(user=2))
    >>> fs.started(a, 0.0); fs.finished(a, 50.0)
    >>> fs.key(Job(3, 60, 1, 10, owner=Owner(1)), 60.0) > fs.key(Job(4, 60, 1, 10, owner=Owner(2)),
    ...                                                          60.0)
    True
    """

    name = "fairshare"
    static = False
    trusted = True

    def __init__(self, settings: FairShareSettings = FairShareSettings()) -> None:
        s = settings
        if not (s.interval > 0 and s.depth >= 1 and 0 < s.decay <= 1
                and s.period_seconds >= 0):
            raise ValueError("fair share needs FSINTERVAL > 0, FSDEPTH >= 1, FSDECAY in "
                             "(0, 1] and RMPOLLINTERVAL >= 0")
        self.period_seconds = float(s.period_seconds)
        self.interval, self.depth, self.decay = float(s.interval), int(s.depth), float(s.decay)
        self.weight, self.user_weight, self.group_weight = s.weight, s.user_weight, \
            s.group_weight
        self.user_targets = dict(s.user_targets or {})
        self.group_targets = dict(s.group_targets or {})
        # processor-seconds per window: {user: {window: ...}}, {group: {...}}, {window: ...}
        self.used_by_user: dict = {}
        self.used_by_group: dict = {}
        self.total: dict = {}
        self.running: dict = {}  # job -> start
        # kept up to date as jobs start and end, so that a key costs two look-ups: in the
        # current window the decayed usage of a user (group, everyone) at time t is
        # constant + rate * t, rate its running processors
        self._window = 0
        self._user_constant: dict = {}
        self._user_rate: dict = {}
        self._group_constant: dict = {}
        self._group_rate: dict = {}
        self._everyone_constant = self._everyone_rate = 0.0

    @classmethod
    def from_site(cls, site: Any) -> "FairShare":
        """The fair share a policy file sets (:class:`~.policyfile.SitePolicy`)."""
        fs = getattr(site, "fairshare", None) or {}
        return cls(FairShareSettings(  # what the file leaves out keeps the settings' default
            **{MAUI_NAMES[k]: v for k, v in fs.items() if k in MAUI_NAMES},
            user_targets={k: c.fstarget for k, c in site.users.items()
                          if getattr(c, "fstarget", None) is not None} if site else {},
            group_targets={k: c.fstarget for k, c in site.groups.items()
                           if getattr(c, "fstarget", None) is not None} if site else {}))

    def _add(self, job: Any, constant: float, rate: int) -> None:
        """Add constant + rate * t to the usage of ``job``'s user, group and everyone."""
        u, g = job.user, job.group
        self._user_constant[u] = self._user_constant.get(u, 0.0) + constant
        self._user_rate[u] = self._user_rate.get(u, 0) + rate
        self._group_constant[g] = self._group_constant.get(g, 0.0) + constant
        self._group_rate[g] = self._group_rate.get(g, 0) + rate
        self._everyone_constant += constant
        self._everyone_rate += rate

    def _charge(self, job: Any, start: float, end: float) -> None:
        """Add ``job``'s processor-seconds over [start, end) to its owners' windows."""
        interval, user, group = self.interval, job.user, job.group
        window = int(start // interval)
        while start < end:
            stop = (window + 1) * interval
            if end < stop:
                stop = end
            amount = job.procs * (stop - start)
            self._spend(user, group, window, amount)
            if window == self._window:  # its usage now counts as constant
                constants = self._user_constant
                constants[user] = constants.get(user, 0.0) + amount
                constants = self._group_constant
                constants[group] = constants.get(group, 0.0) + amount
                self._everyone_constant += amount
            start, window = stop, window + 1

    def _spend(self, user: Any, group: Any, window: int, amount: float) -> None:
        """Add ``amount`` processor-seconds to ``window`` of ``user``, ``group`` and all."""
        for owners, owner in ((self.used_by_user, user), (self.used_by_group, group)):
            spent = owners.get(owner)
            if spent is None:
                spent = owners[owner] = {}
            spent[window] = spent.get(window, 0.0) + amount
        self.total[window] = self.total.get(window, 0.0) + amount

    def _roll(self, now: float) -> None:
        """Move the current window on to ``now``'s: the running jobs' usage in the windows
        that closed is charged, and every usage's constant part counted again."""
        window = int(now // self.interval)
        if window <= self._window:
            return
        boundary = window * self.interval
        for job, start in self.running.items():
            self._charge(job, max(start, self._window * self.interval), boundary)
        self._window = window
        weights = [self.decay ** k for k in range(self.depth)]
        oldest = window - self.depth + 1  # windows before it never count again
        decay = decay_usage or decayed_usage
        self._user_constant, self._user_rate = decay(self.used_by_user, window, weights,
                                                     oldest), {}
        self._group_constant, self._group_rate = decay(self.used_by_group, window, weights,
                                                       oldest), {}
        # everyone's windows before oldest go from self.total as each owner's do
        everyone = decay({None: self.total}, window, weights, oldest).get(None, 0.0)
        self._everyone_constant, self._everyone_rate = everyone, 0.0
        ws = window * self.interval
        for job, start in self.running.items():
            self._add(job, -job.procs * max(start, ws), job.procs)

    def started(self, job: Any, now: float) -> None:
        if now >= (self._window + 1) * self.interval:
            self._roll(now)
        self.running[job] = now
        self._add(job, -job.procs * now, job.procs)  # in the current window since now

    def finished(self, job: Any, now: float) -> None:
        if now >= (self._window + 1) * self.interval:
            self._roll(now)
        start = self.running.pop(job, None)
        if start is None:
            return
        ws = self._window * self.interval
        if start < ws:  # it ran in windows before this one too
            # its time in this window moves from running to charged: the usage stays
            self._add(job, job.procs * ws, -job.procs)
            self._charge(job, ws, now)
            return
        # started in this window: _add(job, procs * start, -procs) then _charge(job, start,
        # now) inline, the same sums in the same order (this runs at every job's end)
        u, g, procs, window = job.user, job.group, job.procs, self._window
        constant, amount = procs * start, procs * (now - start)
        users, groups = self._user_constant, self._group_constant
        users[u] = users.get(u, 0.0) + constant + amount
        groups[g] = groups.get(g, 0.0) + constant + amount
        self._user_rate[u] = self._user_rate.get(u, 0) - procs
        self._group_rate[g] = self._group_rate.get(g, 0) - procs
        self._everyone_constant += constant
        self._everyone_constant += amount
        self._everyone_rate -= procs
        if now > start:  # as _charge: a job of no length leaves no window behind
            self._spend(u, g, window, amount)

    def usage(self, now: float) -> dict:
        """Each user's and group's decayed usage, % of everyone's: {("user", id): %}."""
        self._roll(now)
        everyone = self._everyone_constant + self._everyone_rate * now
        scale = 100.0 / everyone if everyone > 0 else 0.0
        out = {}
        for kind, constants, rates in (("user", self._user_constant, self._user_rate),
                                       ("group", self._group_constant, self._group_rate)):
            for who in set(constants) | set(rates):
                out[(kind, who)] = scale * (constants.get(who, 0.0) + rates.get(who, 0) * now)
        return out

    group = staticmethod(attrgetter("user", "group"))  # jobs of one group share a key

    def _scale(self, now: float) -> float:
        """100 over everyone's usage at ``now`` (0 if none), the window moved on to now's."""
        if now >= (self._window + 1) * self.interval:
            self._roll(now)
        everyone = self._everyone_constant + self._everyone_rate * now
        return 100.0 / everyone if everyone > 0 else 0.0

    @property
    def _users_alone(self) -> bool:
        """No targets and no group weight: a key is its user's usage times one factor."""
        return not (self.group_weight or self.user_targets or self.group_targets)

    def group_keys(self, groups: Iterable[tuple], now: float) -> dict:
        """{group: key} at ``now`` of the (user, group) pairs ``groups``."""
        scale = self._scale(now)
        users, user_rates = self._user_constant, self._user_rate
        if self._users_alone:
            factor = self.weight * self.user_weight * scale
            return {who: self._user_key(who[0], factor, now) for who in groups}
        groups_, group_rates = self._group_constant, self._group_rate
        keys = {}
        for u, g in groups:
            user = self.user_targets.get(str(u), 0.0) - scale * (
                users.get(u, 0.0) + user_rates.get(u, 0) * now)
            group = self.group_targets.get(str(g), 0.0) - scale * (
                groups_.get(g, 0.0) + group_rates.get(g, 0) * now)
            keys[(u, g)] = -self.weight * (self.user_weight * user + self.group_weight * group)
        return keys

    def rerank(self, ranks: Any, groups: Any, now: float, max_rate: float) -> bool:
        """``ranks.rerank`` (a :class:`~.ranks.GroupRanks`) with the keys of ``groups`` at
        ``now``, and ``ranks.holds_until`` set to when their order may next change on a
        machine of ``max_rate`` processors. In C where users alone count
        (``_fairshare.c``)."""
        if check_ranks is None or not self._users_alone or not isinstance(groups, dict):
            keys = self.group_keys(groups, now)
            moved = ranks.rerank(keys)
            ranks.holds_until = self.order_holds_until(keys, now, max_rate)
            return moved
        factor = self.weight * self.user_weight * self._scale(now)
        keys, same, until, kept = check_ranks(
            groups, ranks.rank, self._user_constant, self._user_rate, now, factor,
            float(max_rate), (self._window + 1) * self.interval)
        if same:
            ranks.keep(keys, kept)
        else:
            ranks.rerank(keys)
        ranks.holds_until = until
        return not same

    def order_holds_until(self, keys: dict, now: float, max_rate: float) -> float:
        """An instant before which the groups' ``keys`` (:meth:`group_keys` at ``now``)
        keep their order (``now`` itself if none is known), on a machine of ``max_rate``
        processors."""
        if not self._users_alone or not keys:
            return now
        ordered = sorted(((key, who[0]) for who, key in keys.items()), key=lambda e: e[0])
        gap = min((b - a for (a, u), (b, v) in zip(ordered, ordered[1:]) if u != v),
                  default=math.inf)
        factor = self.weight * self.user_weight * self._scale(now)
        return self._holds(gap, ordered[-1][0], factor, now, max_rate)

    def _holds(self, gap: float, top: float, factor: float, now: float,
               max_rate: float) -> float:
        """The end of the order of keys whose two nearest users' keys are ``gap`` apart.

        With users alone a key is its user's usage times a factor all share, and within a
        window a usage only grows, by its user's running processors a second: two usages
        ``gap / factor`` apart cannot meet within ``gap / factor / max_rate`` seconds,
        whatever starts and ends meanwhile. The window's end decays them all."""
        window_end = (self._window + 1) * self.interval
        if gap == math.inf:
            return window_end  # one user
        if gap <= 0 or factor <= 0:
            return now  # users of equal usage, which the next start may part
        # less a margin far above the rounding of usages as large as max_rate * now
        usage_gap = gap / factor - 1.0 - 1e-9 * (top / factor + max_rate * now)
        return min(window_end, now + usage_gap / max_rate) if usage_gap > 0 else now

    def _user_key(self, user: Any, factor: float, now: float) -> float:
        """With users alone, the key of ``user``'s jobs (``_fairshare.c`` sums it alike)."""
        return factor * (self._user_constant.get(user, 0.0) + self._user_rate.get(user, 0) * now)

    def key(self, job: Any, now: float) -> Any:
        if self._users_alone:
            return self._user_key(job.user, self.weight * self.user_weight * self._scale(now),
                                  now)
        who = (job.user, job.group)
        return self.group_keys((who,), now)[who]

    def keys(self, jobs: Iterable[Any], now: float) -> list:
        memo = self.group_keys({(job.user, job.group) for job in jobs}, now)
        return [memo[(job.user, job.group)] for job in jobs]


class _Function(Order):
    """A user's function ``f(job, now)`` as an order."""

    def __init__(self, fn: Callable, name: str) -> None:
        self.fn, self.name = fn, name
        self.static = bool(getattr(fn, "static", False))

    def key(self, job: Any, now: float) -> Any:
        return self.fn(job, now)


class _Object(Order):
    """A user's object with ``key``, and maybe ``started`` and ``finished``."""

    def __init__(self, obj: Any, name: str) -> None:
        self.obj, self.name = obj, name
        self.static = bool(getattr(obj, "static", False))
        self._on_start = getattr(obj, "started", None)
        self._on_end = getattr(obj, "finished", None)

    def key(self, job: Any, now: float) -> Any:
        return self.obj.key(job, now)

    def started(self, job: Any, now: float) -> None:
        if self._on_start is not None:
            self._on_start(job, now)

    def finished(self, job: Any, now: float) -> None:
        if self._on_end is not None:
            self._on_end(job, now)


def make_order(spec: Any, *, site: Any = None) -> Order:
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
    import importlib.util  # for a user's order file alone

    module_name = "nodesel_order_" + "".join(c if c.isalnum() else "_" for c in path)
    loader_spec = importlib.util.spec_from_file_location(module_name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise UserError(f"{path}: Python cannot load this file (the order {spec!r})")
    module = importlib.util.module_from_spec(loader_spec)
    try:
        loader_spec.loader.exec_module(module)
    except Exception as e:  # the user's file: say what failed, in one line
        raise UserError(f"{path}: the order file failed to load: {type(e).__name__}: {e}") \
            from None
    if not hasattr(module, name):
        raise UserError(f"{path}: no function or class named {name!r}")
    thing = getattr(module, name)
    if isinstance(thing, type):
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


def check_key(order: Order, job: Any, now: float) -> Any:
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
