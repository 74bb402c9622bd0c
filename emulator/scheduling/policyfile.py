"""Site policy, as a Maui configuration states it (Li et al. §4.1): per group and per user a
priority and a maximum of processors in use (MAXPROC), with ``default`` entries for everyone
else; and advance reservation requests (Smith §5).

A job's priority is its group's plus its user's (Maui's credential priority with unit weights);
the queue is ordered by priority, then by the policy's own order. A job whose user or group
would exceed MAXPROC waits, while others pass it.

Two file forms are read:

- TOML (``.toml``)::

      [groups.default]
      priority = 100
      [groups.atlas]
      priority = 300
      maxproc = 4
      [users.svens]
      priority = 100
      maxproc = 2
      [reservations]
      mode = "nonrestartable"          # or "restartable"
      [[reservations.requests]]
      submit_seconds = 0               # when the request is made
      start_seconds = 3600             # the start time asked for
      procs = 32
      duration_seconds = 7200          # at most this long

      [fairshare]                      # the fairshare order's settings, Maui's words
      FSINTERVAL = 86400               # seconds per usage window (Maui: 24:00:00)
      FSDEPTH = 7                      # windows remembered
      FSDECAY = 0.8                    # each older window weighs this much less
      FSWEIGHT = 1
      FSUSERWEIGHT = 10
      FSGROUPWEIGHT = 1
      RMPOLLINTERVAL = 60              # priorities recomputed every 60 s (default 0: at
                                       # every scheduling pass)
      [users.svens]
      fstarget = 20                    # percent of the machine (FSTARGET)

- Maui's own lines (any other extension): ``GROUPCFG[atlas] PRIORITY=300 MAXPROC=4
  FSTARGET=25`` and ``USERCFG[svens] PRIORITY=100 MAXPROC=2``, and the fair-share parameters
  one a line (``FSINTERVAL 24:00:00``, ``FSDEPTH 7``, ``FSDECAY 0.80``, ``FSWEIGHT 1``,
  ``FSUSERWEIGHT 10``, ``FSGROUPWEIGHT 1``, ``FSPOLICY DEDICATEDPS``, ``RMPOLLINTERVAL
  00:01:00``); other Maui parameters
  are reported as unknown.

Group and user names are matched against the trace's ids as text (``users.7`` is user 7).
"""

import re
from dataclasses import dataclass, field

from ..errors import InputFileError
from ..files import finite_number, read_input_text
from .reservations import ReservationRequest

MODES = ("nonrestartable", "restartable")
# Maui's fair-share parameters (FSPOLICY: only dedicated processor-seconds are modelled)
# and RMPOLLINTERVAL: Maui recomputes priorities once per scheduling iteration; 0 (the
# default here) recomputes them at every scheduling pass
FAIRSHARE = ("FSINTERVAL", "FSDEPTH", "FSDECAY", "FSWEIGHT", "FSUSERWEIGHT", "FSGROUPWEIGHT",
             "RMPOLLINTERVAL")


@dataclass
class Credential:
    priority: float = 0.0
    maxproc: int = None
    fstarget: float = None  # fair-share target, percent of the machine


@dataclass
class SitePolicy:
    """Priorities and limits per group and user, and reservation settings."""

    groups: dict = field(default_factory=dict)  # name -> Credential
    users: dict = field(default_factory=dict)
    reservations: list = field(default_factory=list)  # ReservationRequest
    mode: str = "nonrestartable"
    queued_priority: float = 1.0  # fraction of the queue a new reservation may not delay
    restart_cost: tuple = (1.0, 0.1)  # weights of work done and work left
    fairshare: dict = field(default_factory=dict)  # FS* parameters (Maui's words)

    def _credential(self, table, key):
        return table.get(str(key)) or table.get("default") or Credential()

    def priority(self, job):
        return (self._credential(self.groups, job.group).priority
                + self._credential(self.users, job.user).priority)

    def maxproc(self, job):
        """(user limit, group limit); None where unlimited."""
        return (self._credential(self.users, job.user).maxproc,
                self._credential(self.groups, job.group).maxproc)

    @property
    def has_limits(self):
        return any(c.maxproc is not None for c in (*self.groups.values(), *self.users.values()))

    @property
    def has_priorities(self):
        return any(c.priority for c in (*self.groups.values(), *self.users.values()))


def _number(path, where, value, *, integer=False, minimum=None, positive=False):
    if not finite_number(value):
        raise InputFileError(path, where, f"must be a number, got {value!r}")
    if integer and value != int(value):
        raise InputFileError(path, where, f"must be a whole number, got {value!r}")
    if positive and value <= 0:
        raise InputFileError(path, where, f"must be positive, got {value!r}")
    if minimum is not None and value < minimum:
        raise InputFileError(path, where, f"must be >= {minimum}, got {value!r}")
    return int(value) if integer else float(value)


def _credentials(path, section, table):
    if not isinstance(table, dict):
        raise InputFileError(path, section, "must be a table of names")
    out = {}
    for name, entry in table.items():
        where = f"{section}.{name}"
        if not isinstance(entry, dict):
            raise InputFileError(path, where, "must be a table (priority, maxproc)")
        unknown = set(entry) - {"priority", "maxproc", "fstarget"}
        if unknown:
            raise InputFileError(path, where, f"unknown key {sorted(unknown)[0]!r} "
                                              "(expected priority, maxproc, fstarget)")
        cred = Credential()
        if "priority" in entry:
            cred.priority = _number(path, f"{where}.priority", entry["priority"])
        if "maxproc" in entry:
            cred.maxproc = _number(path, f"{where}.maxproc", entry["maxproc"], integer=True,
                                   positive=True)
        if "fstarget" in entry:
            cred.fstarget = _fstarget(path, f"{where}.fstarget", entry["fstarget"])
        out[str(name)] = cred
    return out


def _fstarget(path, where, value):
    value = _number(path, where, value, minimum=0.0)
    if value > 100:
        raise InputFileError(path, where, "a target is a percent of the machine, at most 100")
    return value


def _fairshare_value(path, where, key, value):
    """One FS* parameter, checked (FSINTERVAL may be Maui's [[HH:]MM:]SS text)."""
    if key in ("FSINTERVAL", "RMPOLLINTERVAL") and isinstance(value, str):
        try:
            parts = [float(p) for p in value.split(":")]
        except ValueError:
            raise InputFileError(path, where, f"{value!r} is not HH:MM:SS or seconds") from None
        value = sum(p * 60 ** k for k, p in enumerate(reversed(parts)))
    if key == "FSDEPTH":
        return _number(path, where, value, integer=True, positive=True)
    if key == "FSDECAY":
        value = _number(path, where, value, positive=True)
        if value > 1:
            raise InputFileError(path, where, "must lie in (0, 1]")
        return value
    if key == "FSINTERVAL":
        return _number(path, where, value, positive=True)
    if key == "RMPOLLINTERVAL":
        value = _number(path, where, value)
        if value < 0:
            raise InputFileError(path, where, "must be >= 0")
        return value
    return _number(path, where, value)


def policy_from_dict(data, path="<policy>"):
    """A :class:`SitePolicy` from a parsed TOML document."""
    unknown = set(data) - {"groups", "users", "reservations", "fairshare"}
    if unknown:
        raise InputFileError(path, sorted(unknown)[0], "unknown section (expected groups, "
                                                       "users, reservations, fairshare)")
    policy = SitePolicy(groups=_credentials(path, "groups", data.get("groups", {})),
                        users=_credentials(path, "users", data.get("users", {})))
    fs = data.get("fairshare", {})
    if not isinstance(fs, dict):
        raise InputFileError(path, "fairshare", "must be a table")
    for key, value in fs.items():
        if key not in FAIRSHARE:
            raise InputFileError(path, f"fairshare.{key}", "unknown key (expected "
                                 f"{', '.join(FAIRSHARE)})")
        policy.fairshare[key] = _fairshare_value(path, f"fairshare.{key}", key, value)
    res = data.get("reservations", {})
    if not isinstance(res, dict):
        raise InputFileError(path, "reservations", "must be a table")
    unknown = set(res) - {"mode", "queued_priority", "restart_cost", "requests"}
    if unknown:
        raise InputFileError(path, f"reservations.{sorted(unknown)[0]}", "unknown key")
    if "mode" in res:
        if res["mode"] not in MODES:
            raise InputFileError(path, "reservations.mode", f"must be one of {', '.join(MODES)}, "
                                                            f"got {res['mode']!r}")
        policy.mode = res["mode"]
    if "queued_priority" in res:
        policy.queued_priority = _number(path, "reservations.queued_priority",
                                         res["queued_priority"], minimum=0.0)
        if policy.queued_priority > 1:
            raise InputFileError(path, "reservations.queued_priority", "must lie in [0, 1]")
    if "restart_cost" in res:
        cost = res["restart_cost"]
        if not isinstance(cost, list) or len(cost) != 2:
            raise InputFileError(path, "reservations.restart_cost",
                                 "must be [weight of work done, weight of work left]")
        policy.restart_cost = tuple(_number(path, "reservations.restart_cost", c, minimum=0.0)
                                    for c in cost)
    requests = res.get("requests", [])
    if not isinstance(requests, list):
        raise InputFileError(path, "reservations.requests", "must be an array of tables")
    for i, r in enumerate(requests):
        where = f"reservations.requests[{i}]"
        if not isinstance(r, dict):
            raise InputFileError(path, where, "must be a table")
        missing = {"submit_seconds", "start_seconds", "procs", "duration_seconds"} - set(r)
        if missing:
            raise InputFileError(path, where, f"missing {sorted(missing)[0]}")
        unknown = set(r) - {"submit_seconds", "start_seconds", "procs", "duration_seconds",
                            "run_seconds"}
        if unknown:
            raise InputFileError(path, f"{where}.{sorted(unknown)[0]}", "unknown key")
        req = ReservationRequest(
            submit_seconds=_number(path, f"{where}.submit_seconds", r["submit_seconds"],
                                   minimum=0.0),
            start_seconds=_number(path, f"{where}.start_seconds", r["start_seconds"],
                                  minimum=0.0),
            procs=_number(path, f"{where}.procs", r["procs"], integer=True, positive=True),
            duration_seconds=_number(path, f"{where}.duration_seconds", r["duration_seconds"],
                                     positive=True), id=i + 1)
        if "run_seconds" in r:
            req.run_seconds = _number(path, f"{where}.run_seconds", r["run_seconds"], minimum=0.0)
            if req.run_seconds > req.duration_seconds:
                raise InputFileError(path, f"{where}.run_seconds", "exceeds duration_seconds")
        if req.start_seconds < req.submit_seconds:
            raise InputFileError(path, f"{where}.start_seconds", "is before submit_seconds")
        policy.reservations.append(req)
    return policy


MAUI_LINE = re.compile(r"^(GROUPCFG|USERCFG)\[([^\]\s]+)\]((?:\s+[A-Z]+=\S+)+)\s*$")
MAUI_PARAMETER = re.compile(r"^(FS[A-Z]+|RMPOLLINTERVAL)\s+(\S+)\s*$")


def policy_from_maui(text, path="<maui.cfg>"):
    """A :class:`SitePolicy` from Maui configuration lines (``GROUPCFG[...]``, ``USERCFG[...]``)."""
    policy = SitePolicy()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        p = MAUI_PARAMETER.match(line)
        if p:
            key, value = p.groups()
            where = f"line {number}, {key}"
            if key == "FSPOLICY":
                if value.upper() not in ("DEDICATEDPS", "DEDICATEDPES"):
                    raise InputFileError(path, where, "only DEDICATEDPS (dedicated "
                                                      "processor-seconds) is modelled")
                continue
            if key not in FAIRSHARE:
                raise InputFileError(path, where, f"unknown fair-share parameter (expected "
                                                  f"{', '.join(FAIRSHARE)}, FSPOLICY)")
            if key not in ("FSINTERVAL", "RMPOLLINTERVAL"):
                try:
                    value = float(value)
                except ValueError:
                    raise InputFileError(path, where, f"{value!r} is not a number") from None
            policy.fairshare[key] = _fairshare_value(path, where, key, value)
            continue
        m = MAUI_LINE.match(line)
        if not m:
            word = line.split()[0]
            raise InputFileError(path, f"line {number}",
                                 f"unknown or malformed Maui line {word!r} (this reader takes "
                                 "GROUPCFG[name] and USERCFG[name] with PRIORITY=, MAXPROC= and "
                                 "FSTARGET=, and the FS* parameters)")
        kind, name, settings = m.groups()
        cred = Credential()
        for item in settings.split():
            key, _, value = item.partition("=")
            where = f"line {number}, {key}"
            try:
                number_value = float(value)
            except ValueError:
                raise InputFileError(path, where, f"{value!r} is not a number") from None
            if key == "PRIORITY":
                cred.priority = _number(path, where, number_value)
            elif key == "MAXPROC":
                cred.maxproc = _number(path, where, number_value, integer=True, positive=True)
            elif key == "FSTARGET":
                cred.fstarget = _fstarget(path, where, number_value)
            else:
                raise InputFileError(path, where, "unknown setting (PRIORITY, MAXPROC, "
                                                  "FSTARGET)")
        (policy.groups if kind == "GROUPCFG" else policy.users)[name] = cred
    return policy


def read_policy_file(path):
    """A :class:`SitePolicy` from a TOML file or Maui configuration lines."""
    text = read_input_text(path, "policy file")
    if str(path).endswith(".toml"):
        try:  # imported here: a run without a policy file has no use for it
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            import tomli as tomllib
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as e:
            raise InputFileError(path, None, f"malformed TOML: {e}") from None
        return policy_from_dict(data, path)
    return policy_from_maui(text, path)
