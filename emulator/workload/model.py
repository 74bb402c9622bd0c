"""The workload model of England and Weissman (§III), fitted to a trace and sampled.

- Arrivals: a nonstationary Poisson process whose rate is constant within each hour of the
  day, or of the week when the trace spans at least four weeks (local time, from the trace's
  ``UnixStartTime`` and ``TimeZoneString``/``TimeZone`` header fields).
- Sizes: the discrete distribution of the processor counts the trace uses (so powers of two
  keep their weight).
- Run times: independent of size, as the seed found; a Weibull mixture
  (:mod:`emulator.workload.runtimes`).
- Users: each job belongs to a user drawn by the user's share of the trace's jobs; a user
  submits *runs* of similar jobs: the same size and executable, run times correlated by a
  Gaussian copula (the correlation fitted to consecutive jobs of the trace's runs), so each
  job's run time still follows the fitted distribution exactly. Run lengths follow the
  trace's.
- Requested times: the trace's ratio of requested to actual time, where it has them.

A model is plain JSON; the same model and seed give the same SWF file, byte for byte.
"""

import datetime
import json
import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats

from ..errors import InputFileError
from ..files import finite_number, write_atomic, write_json_atomic
from .runtimes import RunTimes, fit_runtimes, runtimes_from_json
from .swf import COLUMN, FIELDS, Trace

HOUR = 3600.0
WEEK_HOURS = 168
MIN_WEEKS_FOR_WEEKLY = 4
MAX_RUN_LENGTH = 1000


def local_offsets(trace):
    """UTC offset in seconds at each job's submit time, from the trace header (0 if none)."""
    fields = trace.fields
    start = trace.header_number("UnixStartTime") or 0.0
    submit = trace.column("submit")
    name = fields.get("TimeZoneString", "").split()
    if name:
        try:
            from zoneinfo import ZoneInfo

            zone = ZoneInfo(name[0])
        except Exception:  # unknown zone or no tz database: the numeric offset below
            zone = None
        if zone is not None:
            hours = np.floor((start + submit) / HOUR).astype(np.int64)
            unique, inverse = np.unique(hours, return_inverse=True)
            offsets = np.array([datetime.datetime.fromtimestamp(h * HOUR, zone).utcoffset()
                                .total_seconds() for h in unique])
            return offsets[inverse]
    try:
        offset = float(fields.get("TimeZone", "0").split()[0])
    except (ValueError, IndexError):
        offset = 0.0
    return np.full(len(submit), offset)


def hour_of_week(trace):
    """Local hour of the week (0 = Monday 00:00-01:00) of each job's submit time."""
    start = trace.header_number("UnixStartTime") or 0.0
    local = start + trace.column("submit") + local_offsets(trace)
    # 1970-01-01 was a Thursday: shift so that Monday is hour 0
    return (np.floor(local / HOUR).astype(np.int64) + 3 * 24) % WEEK_HOURS


def _exposure_hours(first_local, last_local, period_hours):
    """Hours of observation of each hour-of-period cell between two local instants."""
    exposure = np.zeros(period_hours)
    t = first_local
    while t < last_local:
        cell_end = (math.floor(t / HOUR) + 1) * HOUR
        end = min(cell_end, last_local)
        cell = (math.floor(t / HOUR) + 3 * 24) % WEEK_HOURS % period_hours
        exposure[cell] += (end - t) / HOUR
        t = end
    return exposure


@dataclass
class WorkloadModel:
    """A fitted workload model; see the module docstring."""

    source: str
    machine_procs: int
    trace_jobs: int
    span_seconds: float
    period_hours: int  # 24 (per hour of day) or 168 (per hour of week)
    rates_per_hour: list  # arrivals per hour in each hour of the period
    origin_unix: float  # UnixStartTime of the trace
    origin_offset_seconds: float  # its UTC offset there
    sizes: list
    size_probabilities: list
    runtime: dict  # RunTimes.to_json()
    run_lengths: list
    run_length_probabilities: list
    run_correlation: float
    size_runtime_correlation: float  # 0: independent of size, as England and Weissman found
    users: list  # [user id, share of jobs, group id, [executable ids], [their weights]]
    requested_log_ratio_quantiles: list  # log(requested/actual) at 0, 1, ..., 100 %; [] if none
    arrival_periods: list = field(default_factory=list)  # [[first hour, hours, rate]] or []

    def to_json(self):
        return asdict(self)

    def write(self, path):
        """As JSON, gzip-compressed if ``path`` ends in ``.gz``."""
        if not str(path).endswith(".gz"):
            write_json_atomic(path, self.to_json())
            return
        import gzip

        data = gzip.compress(json.dumps(self.to_json(), separators=(",", ":")).encode(),
                             mtime=0)
        write_atomic(path, lambda f: f.write(data), mode="wb")

    @property
    def runtimes(self):
        return runtimes_from_json(self.runtime)


def normal_scores(values):
    """Each value's normal score: the standard normal quantile of its mid-rank."""
    return stats.norm.ppf((stats.rankdata(values) - 0.5) / len(values))


def size_runtime_correlation(trace):
    """Correlation of the normal scores of size and run time (the Gaussian copula's)."""
    if len(trace) < 3:
        return 0.0
    a, b = normal_scores(trace.procs), normal_scores(trace.column("run"))
    if np.std(a) == 0 or np.std(b) == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def day_periods(counts, exposure, periods):
    """The hours of the day cut into ``periods`` runs of consecutive hours (wrapping past
    midnight), each with one arrival rate, as England and Weissman's six exponential
    inter-arrival distributions: the cut whose constant rates fit the hourly rates best
    (least squared error weighted by the hours observed), found exactly by dynamic
    programming over every rotation. ``counts``, ``exposure``: arrivals and hours observed
    per hour of the day. Returns [[first hour, hours, arrivals per hour], ...]."""
    counts, exposure = np.asarray(counts, float), np.asarray(exposure, float)
    n = len(counts)
    if not 1 <= periods <= n:
        raise ValueError(f"arrival periods must be between 1 and {n}, got {periods}")
    best = (math.inf, None)
    for shift in range(n if periods > 1 else 1):
        c, e = np.roll(counts, -shift), np.roll(exposure, -shift)
        cc, ce = np.r_[0.0, np.cumsum(c)], np.r_[0.0, np.cumsum(e)]
        rate = np.divide(c, e, out=np.zeros(n), where=e > 0)
        c2 = np.r_[0.0, np.cumsum(e * rate ** 2)]

        def cost(i, j):  # hours i..j-1 at one rate: sum e (r - mean)^2
            if ce[j] - ce[i] <= 0:
                return 0.0
            return c2[j] - c2[i] - (cc[j] - cc[i]) ** 2 / (ce[j] - ce[i])

        table = np.full((periods + 1, n + 1), math.inf)
        cut = np.zeros((periods + 1, n + 1), dtype=int)
        table[0, 0] = 0.0
        for k in range(1, periods + 1):
            for j in range(k, n + 1):
                for i in range(k - 1, j):
                    v = table[k - 1, i] + cost(i, j)
                    if v < table[k, j] - 1e-12:
                        table[k, j], cut[k, j] = v, i
        if table[periods, n] < best[0] - 1e-12:
            edges, j = [n], n
            for k in range(periods, 0, -1):
                j = cut[k, j]
                edges.append(j)
            edges = edges[::-1]
            out = []
            for a, b in zip(edges[:-1], edges[1:]):
                hours = ce[b] - ce[a]
                out.append([int((a + shift) % n), int(b - a),
                            float((cc[b] - cc[a]) / hours) if hours > 0 else 0.0])
            best = (table[periods, n], out)
    return best[1]


def fit_model(trace, *, components=4, size_runtime="independent", arrival_periods=None):
    """Fit the workload model to a trace (a :class:`~emulator.workload.swf.Trace`).

    ``arrival_periods``: None for a rate per hour (of the week, on a trace of several weeks,
    else of the day); a number k for k periods of the day, each with one rate (England and
    Weissman used six; :func:`day_periods` places them).

    ``size_runtime="correlated"`` keeps the trace's correlation of size and run time (England
    and Weissman found none; NASA's iPSC log has one), through the same copula, so the
    marginals stay as fitted.
    """
    if size_runtime not in ("independent", "correlated"):
        raise ValueError(f"size_runtime must be independent or correlated, got {size_runtime!r}")
    if len(trace) < 10:
        raise InputFileError(trace.path, None, f"{len(trace)} jobs are too few to fit a model "
                                               "(at least 10)")
    submit, run = trace.column("submit"), trace.column("run")
    start = trace.header_number("UnixStartTime") or 0.0
    offsets = local_offsets(trace)
    span = float(submit.max() - submit.min())
    period, rates, periods = _arrival_rates(trace, start, offsets, span, arrival_periods)
    sizes, size_counts = np.unique(trace.procs, return_counts=True)
    runtime = fit_runtimes(run, components=components)
    values, length_counts, correlation = _runs(trace)
    coupling = 0.0
    if size_runtime == "correlated":  # run scores carry it: job-level corr = coupling*sqrt(rho)
        scaled = size_runtime_correlation(trace) / math.sqrt(max(correlation, 1e-6))
        coupling = float(np.clip(scaled, -0.99, 0.99))
    return WorkloadModel(
        source=trace.path, machine_procs=trace.max_procs, trace_jobs=len(trace),
        span_seconds=span, period_hours=period, rates_per_hour=[float(r) for r in rates],
        origin_unix=float(start), origin_offset_seconds=float(offsets[np.argmin(submit)]),
        sizes=[int(s) for s in sizes],
        size_probabilities=[float(c / len(trace)) for c in size_counts],
        runtime=runtime.to_json(), run_lengths=[int(v) for v in values],
        run_length_probabilities=[float(c / length_counts.sum()) for c in length_counts],
        run_correlation=correlation, size_runtime_correlation=coupling,
        users=_users(trace), requested_log_ratio_quantiles=_requested_quantiles(trace),
        arrival_periods=periods)


def _arrival_rates(trace, start, offsets, span, arrival_periods):
    """(period in hours, arrivals per hour of each hour of the period, the day's periods
    where ``arrival_periods`` asks for them): a rate per hour of the week on a trace of
    several weeks, else of the day."""
    submit = trace.column("submit")
    period = WEEK_HOURS if span >= MIN_WEEKS_FOR_WEEKLY * WEEK_HOURS * HOUR else 24
    if arrival_periods is not None:
        period = 24
    cells = hour_of_week(trace) % period
    counts = np.bincount(cells, minlength=period).astype(float)
    first = start + submit.min() + offsets[np.argmin(submit)]
    last = start + submit.max() + offsets[np.argmax(submit)]
    exposure = _exposure_hours(first, max(last, first + HOUR), period)
    rates = np.divide(counts, exposure, out=np.zeros(period), where=exposure > 0)
    if rates.sum() == 0:
        rates[:] = len(trace) / max(span / HOUR, 1.0)
    periods = []
    if arrival_periods is not None:
        periods = day_periods(counts, exposure, arrival_periods)
        for first, hours, rate in periods:
            rates[(first + np.arange(hours)) % 24] = rate
    return period, rates, periods


def _runs(trace):
    """Runs, a user's consecutive jobs (in submit order) of one size and executable: the
    run lengths seen, how often each, and the correlation of consecutive run times'
    normal scores within a run."""
    submit, run, procs = trace.column("submit"), trace.column("run"), trace.procs
    user, exe = trace.column("user"), trace.column("executable")
    order = np.lexsort((np.arange(len(trace)), submit, user))
    u, p, e = user[order], procs[order], exe[order]
    same = (u[1:] == u[:-1]) & (p[1:] == p[:-1]) & (e[1:] == e[:-1])
    run_ids = np.cumsum(np.r_[True, ~same]) - 1
    lengths = np.minimum(np.bincount(run_ids), MAX_RUN_LENGTH)
    values, length_counts = np.unique(lengths, return_counts=True)
    scores = normal_scores(run)[order]
    if same.sum() >= 3 and np.std(scores[1:][same]) > 0 and np.std(scores[:-1][same]) > 0:
        correlation = float(np.clip(np.corrcoef(scores[1:][same], scores[:-1][same])[0, 1],
                                    0.0, 0.99))
    else:
        correlation = 0.0
    return values, length_counts, correlation


def _users(trace):
    """Each user: [id, share of the jobs, main group, executables, their shares]."""
    user, exe, group = trace.column("user"), trace.column("executable"), trace.column("group")
    users = []
    ids, user_counts = np.unique(user, return_counts=True)
    for uid, n in zip(ids, user_counts):
        mine = user == uid
        groups, gcounts = np.unique(group[mine], return_counts=True)
        exes, ecounts = np.unique(exe[mine], return_counts=True)
        users.append([int(uid), float(n / len(trace)), int(groups[np.argmax(gcounts)]),
                      [int(x) for x in exes], [float(c / n) for c in ecounts]])
    return users


def _requested_quantiles(trace):
    """The percentiles 0..100 of log(requested / run), where 10 jobs or more have both."""
    requested, run = trace.column("requested_time"), trace.column("run")
    both = (requested > 0) & (run > 0)
    if both.sum() < 10:
        return []
    return [float(v) for v in np.percentile(np.log(requested[both] / run[both]),
                                            np.arange(101))]


def _arrivals(model, jobs, rng):
    """``jobs`` submit times (seconds from the origin) of the nonstationary Poisson process."""
    rates = np.asarray(model.rates_per_hour, dtype=float)
    period = len(rates)
    # the origin's local hour of the period, so hour-of-day rates line up with local time
    local0 = model.origin_unix + model.origin_offset_seconds
    phase_hours = (local0 / HOUR + 3 * 24) % WEEK_HOURS % period
    # cumulative expected arrivals over two periods starting at the origin
    edges_hours = np.r_[0.0, np.arange(1, 2 * period + 1) - (phase_hours % 1.0)]
    edges_hours = np.unique(np.clip(edges_hours, 0.0, 2 * period))
    cells = (np.floor(phase_hours + edges_hours[:-1] + 1e-9).astype(int)) % period
    hazard = np.r_[0.0, np.cumsum(rates[cells] * np.diff(edges_hours))]
    per_period = hazard[np.searchsorted(edges_hours, period)]
    if per_period <= 0:
        raise ValueError("the model's arrival rates are all zero")
    total = np.cumsum(rng.exponential(1.0, size=jobs))
    whole, rest = np.divmod(total, per_period)
    hours = whole * period + np.interp(rest, hazard, edges_hours)
    return hours * HOUR


MODAL_REQUESTS_SECONDS = np.array([300, 600, 900, 1800, 3600, 7200, 14400, 28800, 43200,
                                   86400, 172800], dtype=float)


def sample(model, jobs, *, seed, modal_requests=False):
    """A synthetic trace of ``jobs`` jobs from ``model``; the same seed gives the same trace.

    ``modal_requests``: where the model has no requested-time ratios, each run of a user's
    jobs asks for one round value (5 min to 2 days) above its typical run time times a
    log-normal overestimate (median 3x), and a job never asks for less than it runs; users'
    requests are modal in this way (Tsafrir, Etsion and Feitelson, 2005).
    """
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, got {jobs}")
    rng = np.random.default_rng(seed)
    submit = np.floor(_arrivals(model, jobs, rng))
    user_rows = model.users
    shares = np.array([u[1] for u in user_rows])
    who = rng.choice(len(user_rows), size=jobs, p=shares / shares.sum())
    lengths = rng.choice(model.run_lengths, size=jobs,
                         p=np.asarray(model.run_length_probabilities) /
                         np.sum(model.run_length_probabilities))
    sizes = rng.choice(model.sizes, size=jobs, p=np.asarray(model.size_probabilities) /
                       np.sum(model.size_probabilities))
    run_scores = _leaned(model, sizes, rng.standard_normal(jobs))
    noise = rng.standard_normal(jobs)
    exe_draws = rng.random(jobs)
    overestimate = np.exp(math.log(3.0) + rng.standard_normal(jobs))
    run_of_run = np.empty(jobs)
    rho = model.run_correlation
    size_of = np.empty(jobs)
    exe_of = np.empty(jobs)
    score = np.empty(jobs)
    current = {}  # user row -> [jobs left in the run, size, executable, run score]
    next_run = 0
    for i in range(jobs):
        u = who[i]
        state = current.get(u)
        if state is None or state[0] == 0:
            row = user_rows[u]
            exe = row[3][min(np.searchsorted(np.cumsum(row[4]), exe_draws[next_run]),
                             len(row[3]) - 1)]
            state = [lengths[next_run], sizes[next_run], exe, run_scores[next_run], next_run]
            current[u] = state
            next_run += 1
        state[0] -= 1
        size_of[i], exe_of[i] = state[1], state[2]
        run_of_run[i] = state[4]
        score[i] = math.sqrt(rho) * state[3] + math.sqrt(1 - rho) * noise[i]
    run = np.round(model.runtimes.quantile(stats.norm.cdf(score)))
    requested = np.full(jobs, -1.0)
    if model.requested_log_ratio_quantiles:
        ratio = np.exp(np.interp(rng.random(jobs) * 100, np.arange(101),
                                 model.requested_log_ratio_quantiles))
        requested = np.where(run > 0, np.ceil(run * ratio), 60.0)
    elif modal_requests:
        first = run_of_run.astype(int)  # each job's run's first job
        typical = model.runtimes.quantile(stats.norm.cdf(math.sqrt(rho) * run_scores[first]))
        wanted = np.maximum(typical * overestimate[first], run)
        ladder = MODAL_REQUESTS_SECONDS
        pick = np.minimum(np.searchsorted(ladder, wanted), len(ladder) - 1)
        requested = np.maximum(ladder[pick], run)
    return _synthetic_trace(model, seed, {
        "submit": submit, "run": run, "allocated_procs": size_of, "requested_procs": size_of,
        "requested_time": requested, "status": 1, "user": [user_rows[u][0] for u in who],
        "group": [user_rows[u][2] for u in who], "executable": exe_of})


def _leaned(model, sizes, run_scores):
    """Runs' normal scores, each leaning on its size's normal score as far as the model's
    size-run-time correlation says (unchanged where it is 0)."""
    coupling = model.size_runtime_correlation
    if not coupling:
        return run_scores
    values = np.asarray(model.sizes, dtype=float)
    p = np.asarray(model.size_probabilities) / np.sum(model.size_probabilities)
    size_score = stats.norm.ppf(np.clip(np.cumsum(model.size_probabilities) /
                                        np.sum(model.size_probabilities) - p / 2,
                                        1e-9, 1 - 1e-9))
    lean = size_score[np.searchsorted(values, sizes)]
    return coupling * lean + math.sqrt(1 - coupling ** 2) * run_scores


def _synthetic_trace(model, seed, columns):
    """A trace of the sampled ``columns`` (SWF field -> values; the others -1), with an SWF
    header saying where it comes from."""
    jobs = len(columns["submit"])
    data = np.full((jobs, len(FIELDS)), -1.0)
    data[:, COLUMN["job"]] = np.arange(1, jobs + 1)
    for name, values in columns.items():
        data[:, COLUMN[name]] = values
    header = [" Version: 2.2",
              f" Computer: synthetic, from the workload model of {model.source}",
              f" Note: nodesel workload generate, {jobs} jobs, seed {seed}",
              f" MaxJobs: {jobs}", f" MaxRecords: {jobs}",
              f" MaxProcs: {model.machine_procs}", f" MaxNodes: {model.machine_procs}",
              f" UnixStartTime: {int(model.origin_unix)}",
              f" TimeZone: {int(model.origin_offset_seconds)}"]
    return Trace(data, header, f"<model of {model.source}>")


def model_from_json(data, path="<model>"):
    """A :class:`WorkloadModel` from parsed JSON, with every field checked."""
    if not isinstance(data, dict):
        raise InputFileError(path, None, "a workload model is a JSON object")
    try:
        model = WorkloadModel(**data)
    except TypeError as e:
        raise InputFileError(path, None, f"not a workload model: {e}") from None

    def check(ok, where, problem):
        if not ok:
            raise InputFileError(path, where, problem)

    def numbers(name, *, positive=False):
        values = getattr(model, name)
        check(isinstance(values, list) and values and all(finite_number(v) for v in values),
              name, "must be a non-empty list of numbers")
        check(not positive or all(v > 0 for v in values), name, "must be positive")
        return values

    check(isinstance(model.machine_procs, int) and model.machine_procs > 0, "machine_procs",
          "must be a positive integer")
    check(model.period_hours in (24, WEEK_HOURS), "period_hours", "must be 24 or 168")
    rates = numbers("rates_per_hour")
    check(len(rates) == model.period_hours, "rates_per_hour",
          f"needs {model.period_hours} values, has {len(rates)}")
    check(min(rates) >= 0 and sum(rates) > 0, "rates_per_hour",
          "must be >= 0 and not all zero")
    sizes = numbers("sizes", positive=True)
    check(max(sizes) <= model.machine_procs, "sizes", "a size exceeds machine_procs")
    probs = numbers("size_probabilities")
    check(len(probs) == len(sizes) and min(probs) >= 0 and sum(probs) > 0,
          "size_probabilities", "needs one value >= 0 per size, not all zero")
    numbers("run_lengths", positive=True)
    check(len(model.run_length_probabilities) == len(model.run_lengths),
          "run_length_probabilities", "needs one value per run length")
    check(isinstance(model.run_correlation, (int, float)) and 0 <= model.run_correlation < 1,
          "run_correlation", "must lie in [0, 1)")
    check(isinstance(model.size_runtime_correlation, (int, float))
          and -1 < model.size_runtime_correlation < 1, "size_runtime_correlation",
          "must lie in (-1, 1)")
    check(isinstance(model.users, list) and model.users, "users", "must be a non-empty list")
    for i, row in enumerate(model.users):
        check(isinstance(row, list) and len(row) == 5 and isinstance(row[3], list) and row[3]
              and len(row[3]) == len(row[4]) and row[1] >= 0, f"users[{i}]",
              "must be [user, share, group, [executables], [weights]]")
    try:
        runtimes = runtimes_from_json(model.runtime)
        check(len(runtimes.weights) == len(runtimes.shapes) == len(runtimes.scales) > 0
              and all(v > 0 for v in runtimes.shapes + runtimes.scales)
              and 0 <= runtimes.zero_fraction < 1, "runtime", "needs matching positive "
                                                               "weights, shapes and scales")
    except (KeyError, TypeError):
        raise InputFileError(path, "runtime", "needs weights, shapes and scales") from None
    periods = model.arrival_periods
    check(isinstance(periods, list) and all(
        isinstance(p, list) and len(p) == 3 and isinstance(p[0], int) and isinstance(p[1], int)
        and 0 <= p[0] < 24 and p[1] > 0 for p in periods), "arrival_periods",
        "must be a list of [first hour, hours, rate]")
    q = model.requested_log_ratio_quantiles
    check(isinstance(q, list) and (not q or len(q) == 101), "requested_log_ratio_quantiles",
          "must be empty or 101 values")
    return model


def read_model(path):
    try:
        if str(path).endswith(".gz"):
            import gzip

            with gzip.open(path, "rt") as f:
                data = json.load(f)
        else:
            with open(path) as f:
                data = json.load(f)
    except FileNotFoundError:
        raise InputFileError(path, None, "no such file") from None
    except IsADirectoryError:
        raise InputFileError(path, None, "is a folder, not a model file") from None
    except (UnicodeDecodeError, json.JSONDecodeError, EOFError) as e:
        raise InputFileError(path, None, f"not JSON: {e}") from None
    except OSError as e:
        raise InputFileError(path, None, f"cannot be read: {e.strerror}") from None
    return model_from_json(data, path)


__all__ = ["RunTimes", "WorkloadModel", "fit_model", "sample", "read_model", "hour_of_week"]
