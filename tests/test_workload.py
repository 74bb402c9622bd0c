"""Workloads: SWF traces in and out, bad lines, and the workload model of England and
Weissman fitted to the NASA trace."""

import gzip
import json
import math
import os
import subprocess
import sys
import warnings
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from emulator.cli import main
from emulator.errors import InputFileError
from emulator.workload.model import fit_model, hour_of_week, model_from_json, read_model, sample
from emulator.workload.runtimes import fit_runtimes
from emulator.workload.summary import offered_utilization, summarize
from emulator.workload.swf import format_swf, read_swf, write_swf
from emulator.workload.traces import resolve_trace

HEADER = "; Version: 2.2\n; MaxProcs: 8\n; UnixStartTime: 0\n; TimeZone: 0\n"


def swf_line(job, submit, run, procs, *, requested=-1, user=1, group=1, exe=1):
    fields = [job, submit, -1, run, procs, -1, -1, procs, requested, -1, 1, user, group, exe,
              -1, -1, -1, -1]
    return " ".join(str(f) for f in fields) + "\n"


def write(tmp_path, body, name="t.swf", header=HEADER):
    path = tmp_path / name
    path.write_text(header + body)
    return str(path)


@pytest.fixture(scope="module")
def nasa():
    return read_swf(resolve_trace("nasa"))


def test_reads_fields_and_header(tmp_path):
    path = write(tmp_path, swf_line(1, 0, 10, 4) + swf_line(2, 5, 0, 8, requested=60))
    trace = read_swf(path)
    assert len(trace) == 2 and trace.max_procs == 8
    assert trace.column("run").tolist() == [10, 0]
    assert trace.procs.tolist() == [4, 8]
    assert trace.column("requested_time").tolist() == [-1, 60]
    assert trace.fields["Version"] == "2.2"
    assert trace.lines.tolist() == [5, 6]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(*[st.sampled_from([-1.0, 0.0, 3.0, 8.0, math.nan, math.inf])] * 2),
                min_size=1, max_size=8), st.sampled_from(["requested", "allocated"]))
def test_procs_without_numpy_are_the_numpy_ones(sizes, size_field):
    """Trace.procs_values, as the schedule's path reads a job's size, against Trace.procs."""
    from emulator.workload.swf import Trace

    rows = np.full((len(sizes), 18), -1.0)
    rows[:, 7], rows[:, 4] = zip(*sizes)  # requested, allocated
    trace = Trace(rows, size_field=size_field)
    assert np.array_equal(trace.procs_values(), trace.procs, equal_nan=True)


def test_prepare_leaves_the_trace_it_is_given_as_it_was(tmp_path):
    """A trace prepared with nothing to change holds the same numbers (no copy); one whose
    requested times are filled is a copy, the given trace's numbers as they were."""
    from emulator.workload.swf import prepare

    clean = read_swf(write(tmp_path, swf_line(1, 0, 10, 4, requested=60)))
    same, notes = prepare(clean)
    assert notes == [] and same.column("requested_time").tolist() == [60]
    gaps = read_swf(write(tmp_path, swf_line(1, 0, 10, 4, requested=60) + swf_line(2, 5, 7, 2),
                          name="gaps.swf"))
    filled, notes = prepare(gaps, fill_requested="run")
    assert filled.column("requested_time").tolist() == [60, 7] and filled.filled == 1
    assert gaps.column("requested_time").tolist() == [60, -1] and gaps.filled == 0


def test_lines_end_at_crlf_and_keep_no_spaces_around_them(tmp_path):
    """Windows line ends, a comment and job lines indented by spaces and tabs, blank lines of
    spaces: the same jobs, header and file lines as the plain file."""
    body = ("\t ; MaxProcs: 8  \r\n   \r\n" + "  \t" + swf_line(1, 0, 10, 4).rstrip()
            + " \t\r\n\r\n" + swf_line(2, 5, 0, 8, requested=60).replace("\n", "\r\n"))
    path = tmp_path / "crlf.swf"
    path.write_bytes(body.encode())
    trace = read_swf(str(path))
    assert trace.header == [" MaxProcs: 8"] and trace.max_procs == 8
    assert trace.lines.tolist() == [3, 5]
    assert trace.column("run").tolist() == [10, 0]
    assert trace.column("requested_time").tolist() == [-1, 60]


@pytest.mark.parametrize("value", ["1e999", "inf", "nan", "-8", "0", "many"])
def test_a_header_size_that_is_no_finite_positive_number_gives_way_to_the_jobs(tmp_path, value):
    """MaxProcs as the header gives it only if it is a finite positive number; else the
    largest job's size (the header is a comment: a garbled one is not fatal)."""
    path = write(tmp_path, swf_line(1, 0, 10, 4) + swf_line(2, 5, 0, 6),
                 header=f"; MaxProcs: {value}\n")
    assert read_swf(path).max_procs == 6


def test_round_trip_plain_gz_and_zip(tmp_path):
    path = write(tmp_path, swf_line(1, 0, 10, 4) + swf_line(2, 5, 7, 2, requested=60))
    trace = read_swf(path)
    write_swf(tmp_path / "out.swf.gz", trace)
    again = read_swf(tmp_path / "out.swf.gz")
    assert np.array_equal(again.data, trace.data) and again.header == trace.header
    with zipfile.ZipFile(tmp_path / "t.zip", "w") as z:
        z.writestr("inner.swf", format_swf(trace))
    assert np.array_equal(read_swf(tmp_path / "t.zip").data, trace.data)
    # the same trace gives the same bytes (gzip without a time stamp)
    write_swf(tmp_path / "again.swf.gz", trace)
    assert (tmp_path / "out.swf.gz").read_bytes() == (tmp_path / "again.swf.gz").read_bytes()


def test_swf_lines_align_each_field_and_write_integers_where_a_field_is_integral():
    from emulator.workload.swf import Trace

    rows = np.full((2, 18), -1.0)
    rows[:, :5] = [[1, 0, 3, 1200, 64], [2, 86400, 0, 7, 1]]
    rows[:, 5] = [12.5, 3.0]  # field 6 (average CPU time) not integral: %.6g, both rows
    rows[0, 9] = 1234567.0
    text = format_swf(Trace(rows, header=[" MaxProcs: 64"]))
    assert text.splitlines() == [
        "; MaxProcs: 64",
        "     1          0        3    1200    64    12.5     -1    -1      -1 1234567  -1   -1"
        "  -1   -1  -1  -1     -1     -1",
        "     2      86400        0       7     1       3     -1    -1      -1     -1  -1   -1"
        "  -1   -1  -1  -1     -1     -1"]


def test_a_whole_number_too_large_for_an_integer_is_written_as_it_is(tmp_path):
    """Found by fuzzing Batsim files: a submit time of 1e20 was cast to int64 and written
    as -9223372036854775808."""
    from emulator.workload.swf import Trace

    rows = np.full((2, 18), -1.0)
    rows[:, :5] = [[1, 0, 3, 1200, 64], [2, 1e20, 0, 7, 1]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        text = format_swf(Trace(rows, header=[" MaxProcs: 64"]))
    assert text.splitlines()[2].split()[:3] == ["2", "1e+20", "0"]
    path = tmp_path / "big.swf"
    path.write_text(text)
    assert list(read_swf(str(path)).column("submit")) == [0.0, 1e20]


def test_the_nasa_trace_is_read_whole(nasa):
    assert len(nasa) == 18239 and nasa.max_procs == 128 and nasa.dropped == 0
    assert not nasa.has("requested_time") and nasa.has("user")


@pytest.mark.parametrize("body, where, problem", [
    (swf_line(1, 0, 10, 4) + "2 5 -1 10 4\n", "line 6", "5 fields, expected 18"),
    (swf_line(1, 0, 10, 4).replace(" 10 ", " ten ", 1), "line 5, field 4 (run)",
     "is not a number"),
    (swf_line(1, 0, -1, 4), "line 5, field 4 (run)", "no run time"),
    (swf_line(1, 0, 10, -1), "line 5, field 8 (requested_procs)", "no processor count"),
    (swf_line(1, 0, 10, 16), "line 5, field 8 (requested_procs)", "more than the machine's 8"),
    (swf_line(1, -3, 10, 4), "line 5, field 2 (submit)", "negative submit time"),
    # found by fuzzing: numbers to numpy's loadtxt, which then warned on a cast
    (swf_line(1, 0, 10, 4).replace(" 10 ", " 1e999 ", 1), "line 5, field 4 (run)",
     "'1e999' is not a finite number"),
    (swf_line(1, 0, 10, 4).replace(" 10 ", " nan ", 1), "line 5, field 4 (run)",
     "'nan' is not a finite number"),
    (swf_line(1, 0, 10, 4).replace("1 0 ", "1 inf ", 1), "line 5, field 2 (submit)",
     "'inf' is not a finite number"),
])
def test_bad_lines_name_file_line_and_field(tmp_path, body, where, problem):
    path = write(tmp_path, body)
    with pytest.raises(InputFileError) as e:
        read_swf(path)
    assert str(e.value).startswith(f"{path}: {where}: ") and problem in str(e.value)


def test_skip_bad_drops_and_counts(tmp_path):
    body = (swf_line(1, 0, 10, 4) + "2 5 -1\n" + swf_line(3, 6, -1, 4) + swf_line(4, 7, 5, 99)
            + swf_line(5, 8, 5, 2).replace(" 5 ", " x ", 1) + swf_line(6, 9, 5, 2))
    trace = read_swf(write(tmp_path, body), skip_bad=True)
    assert trace.column("job").tolist() == [1, 6]
    assert trace.dropped == 4
    assert "line 6" in trace.drop_reasons[0]


@pytest.mark.parametrize("make", ["missing", "folder", "binary", "badzip"])
def test_unreadable_traces_are_one_clear_error(tmp_path, make, capsys):
    path = tmp_path / "t.swf"
    if make == "folder":
        path.mkdir()
    elif make == "binary":
        path.write_bytes(b"\x00\xff\xfe" * 10)
    elif make == "badzip":
        path = tmp_path / "t.zip"
        path.write_bytes(b"not a zip")
    assert main(["workload", "show", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"nodesel: error: {path}")


def test_cli_reports_a_bad_line_and_exits_2(tmp_path, capsys):
    path = write(tmp_path, swf_line(1, 0, 10, 4) + "2 5\n")
    assert main(["schedule", path, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "line 6" in err and "Traceback" not in err
    assert main(["schedule", path, "--skip-bad", "--out", str(tmp_path / "out"),
                 "--no-progress"]) == 0
    assert "dropped 1 malformed lines" in capsys.readouterr().out


def test_local_hour_of_week_from_the_header(tmp_path):
    # 1993-10-04 was a Monday; 09:30 Pacific daylight time is 16:30 UTC
    monday_utc = 749692800  # 1993-10-04 00:00 UTC
    header = f"; MaxProcs: 8\n; UnixStartTime: {monday_utc}\n; TimeZoneString: US/Pacific\n"
    trace = read_swf(write(tmp_path, swf_line(1, 16 * 3600 + 1800, 5, 1), header=header))
    assert hour_of_week(trace).tolist() == [9]
    header = f"; MaxProcs: 8\n; UnixStartTime: {monday_utc}\n; TimeZone: -25200\n"
    trace = read_swf(write(tmp_path, swf_line(1, 16 * 3600 + 1800, 5, 1), header=header))
    assert hour_of_week(trace).tolist() == [9]


def test_single_weibull_is_scipys_fit_and_quantiles_invert_the_cdf():
    rng = np.random.default_rng(3)
    data = stats.weibull_min.rvs(0.6, scale=500, size=4000, random_state=rng)
    single = fit_runtimes(data, components=1)
    shape, _, scale = stats.weibull_min.fit(data[data > 0], floc=0)
    assert single.shapes[0] == pytest.approx(shape) and single.scales[0] == pytest.approx(scale)
    mixture = fit_runtimes(np.r_[data, np.zeros(40)], components=2)
    assert mixture.zero_fraction == pytest.approx(40 / 4040)
    p = np.array([0.05, 0.3, 0.5, 0.9, 0.99])
    assert mixture.cdf(mixture.quantile(p)) == pytest.approx(p, rel=1e-6)


@pytest.fixture(scope="module")
def nasa_model(nasa):
    return fit_model(nasa)


@pytest.fixture(scope="module")
def nasa_sample(nasa_model):
    return sample(nasa_model, 200_000, seed=11)


def _per_hour_of_day(trace):
    submit = trace.column("submit")
    days = (submit.max() - submit.min()) / 86400
    return np.bincount(hour_of_week(trace) % 24, minlength=24) / days


def test_model_arrivals_per_hour_within_10_percent(nasa, nasa_model, nasa_sample):
    assert nasa_model.period_hours == 168  # 13 weeks: a rate per hour of the week
    ratio = _per_hour_of_day(nasa_sample) / _per_hour_of_day(nasa)
    assert np.all(np.abs(ratio - 1) <= 0.10), ratio


def test_model_sizes_within_10_percent(nasa, nasa_sample):
    sizes, counts = np.unique(nasa.procs, return_counts=True)
    model_sizes, model_counts = np.unique(nasa_sample.procs, return_counts=True)
    assert model_sizes.tolist() == sizes.tolist()  # only sizes the trace uses
    ratio = (model_counts / len(nasa_sample)) / (counts / len(nasa))
    assert np.all(np.abs(ratio - 1) <= 0.10), dict(zip(sizes, ratio))


def test_model_runtime_quantiles_within_10_percent(nasa, nasa_sample):
    q = [10, 25, 50, 75, 90]
    ratio = np.percentile(nasa_sample.column("run"), q) / np.percentile(nasa.column("run"), q)
    assert np.all(np.abs(ratio - 1) <= 0.10), dict(zip(q, ratio))


def test_model_runs_are_similar_jobs_of_one_user(nasa_sample):
    user, procs = nasa_sample.column("user"), nasa_sample.procs
    order = np.lexsort((nasa_sample.column("submit"), user))
    u, p = user[order], procs[order]
    same_user = u[1:] == u[:-1]
    # a user's next job has the same size far more often than sizes drawn independently
    repeat = np.mean(p[1:][same_user] == p[:-1][same_user])
    _, counts = np.unique(procs, return_counts=True)
    assert repeat > 2 * np.sum((counts / counts.sum()) ** 2)


def test_size_runtime_independent_by_default_and_kept_on_request(nasa, nasa_sample):
    from emulator.workload.model import size_runtime_correlation

    assert size_runtime_correlation(nasa) > 0.4
    assert abs(size_runtime_correlation(nasa_sample)) < 0.05
    correlated = sample(fit_model(nasa, size_runtime="correlated"), 30_000, seed=2)
    assert abs(size_runtime_correlation(correlated) - size_runtime_correlation(nasa)) < 0.1
    load = offered_utilization(correlated) / offered_utilization(nasa)
    assert 0.8 < load < 1.25


def test_generation_is_reproducible_byte_for_byte(tmp_path, nasa_model):
    model_path = tmp_path / "model.json"
    nasa_model.write(model_path)
    outs = []
    for name, seed in (("a.swf", 5), ("b.swf", 5), ("c.swf", 6)):
        assert main(["workload", "generate", "--model", str(model_path), "--jobs", "3000",
                     "--seed", str(seed), "--out", str(tmp_path / name)]) == 0
        outs.append((tmp_path / name).read_bytes())
    assert outs[0] == outs[1] and outs[0] != outs[2]
    generated = read_swf(tmp_path / "a.swf")
    assert len(generated) == 3000 and generated.max_procs == 128


def test_requested_times_follow_the_traces_ratio(tmp_path):
    # the trace asks for twice or four times the run time, about half its jobs each
    rng = np.random.default_rng(0)
    factors = rng.choice([2, 4], 400)
    body = "".join(swf_line(i + 1, i * 100, int(r), 2, requested=int(r * f), user=1 + i % 3)
                   for i, (r, f) in enumerate(zip(rng.integers(10, 5000, 400), factors)))
    model = fit_model(read_swf(write(tmp_path, body)), components=2)
    generated = sample(model, 5000, seed=1)
    ratio = generated.column("requested_time") / np.maximum(generated.column("run"), 1)
    assert ratio.min() >= 1.99 and ratio.max() <= 4.01  # ceil() may add a second
    for f in (2, 4):
        share = np.mean(np.abs(ratio - f) < 0.05)
        assert share == pytest.approx(np.mean(factors == f), abs=0.06), f


@pytest.mark.parametrize("change, field", [
    ({"machine_procs": 0}, "machine_procs"),
    ({"rates_per_hour": [1.0] * 10}, "rates_per_hour"),
    ({"sizes": [1, 512]}, "sizes"),
    ({"run_correlation": 1.5}, "run_correlation"),
    ({"runtime": {"weights": [1.0], "shapes": [-1.0], "scales": [5.0]}}, "runtime"),
])
def test_bad_model_files_name_the_field(tmp_path, nasa_model, change, field, capsys):
    data = dict(nasa_model.to_json(), **change)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data))
    with pytest.raises(InputFileError, match=field):
        read_model(path)
    assert main(["workload", "generate", "--model", str(path), "--jobs", "5", "--seed", "1",
                 "--out", str(tmp_path / "w.swf")]) == 2
    path.write_text("{not json")
    with pytest.raises(InputFileError, match="not JSON"):
        read_model(path)
    assert model_from_json(nasa_model.to_json()).sizes == nasa_model.sizes


def test_show_prints_the_figures_and_plots(tmp_path, capsys):
    path = write(tmp_path, "".join(swf_line(i + 1, i * 3600, 10 + 7 * i, 2 ** (i % 4))
                                   for i in range(60)))
    plot = tmp_path / "w.png"
    assert main(["workload", "show", path, "--plot", str(plot), "--components", "2"]) == 0
    out = capsys.readouterr().out
    assert "60 jobs" in out and "offered utilisation" in out and plot.stat().st_size > 10_000
    summary = summarize(read_swf(path), components=2)
    assert summary["sizes"] == {1: 15, 2: 15, 4: 15, 8: 15}
    assert summary["power_of_two_fraction"] == 1.0


def test_gzip_trace_read_like_plain(tmp_path):
    text = HEADER + swf_line(1, 0, 10, 4)
    (tmp_path / "t.swf.gz").write_bytes(gzip.compress(text.encode()))
    assert read_swf(tmp_path / "t.swf.gz").column("run").tolist() == [10]


def test_day_periods_find_the_cuts_of_a_step_function():
    from emulator.workload.model import day_periods

    rates = np.array([1.0] * 6 + [5.0] * 4 + [9.0] * 5 + [4.0] * 5 + [2.0] * 4)
    rates = np.roll(rates, 3)  # a period wraps past midnight
    periods = day_periods(rates * 10, np.full(24, 10.0), 5)
    assert sorted(periods) == sorted([[3, 6, 1.0], [9, 4, 5.0], [13, 5, 9.0], [18, 5, 4.0],
                                      [23, 4, 2.0]])
    assert sum(p[1] for p in periods) == 24
    one = day_periods(rates, np.ones(24), 1)
    assert one[0][1] == 24 and one[0][2] == pytest.approx(rates.mean())
    with pytest.raises(ValueError):
        day_periods(rates, np.ones(24), 25)


def test_six_arrival_periods_keep_the_days_arrivals_and_round_trip_gzipped(tmp_path, nasa):
    model = fit_model(nasa, arrival_periods=6)
    assert model.period_hours == 24 and len(model.arrival_periods) == 6
    assert len(set(model.rates_per_hour)) == 6  # a step function of the hour of the day
    hourly = fit_model(nasa)
    # the periods keep the arrivals per day: a period's rate is its hours' arrivals / hours
    assert 24 * np.mean(model.rates_per_hour) == pytest.approx(
        168 * np.mean(hourly.rates_per_hour) / 7, rel=0.02)
    path = tmp_path / "m.json.gz"
    model.write(path)
    assert gzip.open(path).read(1) == b"{"
    back = read_model(path)
    assert back.arrival_periods == model.arrival_periods
    assert back.rates_per_hour == pytest.approx(model.rates_per_hour)


def test_workload_fit_arrival_periods_command(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["workload", "fit", "nasa", "--arrival-periods", "6", "--out", str(out)]) == 0
    assert "in 6 periods" in capsys.readouterr().out
    assert len(json.loads(out.read_text())["arrival_periods"]) == 6
    assert main(["workload", "fit", "nasa", "--arrival-periods", "25", "--out",
                 str(out)]) == 2
    assert "a day has 24 hours" in capsys.readouterr().err


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="OpenBLAS adds no thread on one core")
@pytest.mark.parametrize("blas_threads", [None, "2"])
def test_a_nodesel_process_runs_one_blas_thread_unless_told(blas_threads):
    """numpy's OpenBLAS starts a spinning thread per core: the nodesel process keeps to its
    main thread, unless the user sets OPENBLAS_NUM_THREADS (threads counted at exit)."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    if blas_threads:
        env["OPENBLAS_NUM_THREADS"] = blas_threads
    code = ("import atexit, os, sys; atexit.register(lambda: print(len(os.listdir("
            "'/proc/self/task')))); sys.argv = ['nodesel', 'workload', 'show', 'nasa']; "
            "from emulator.cli import entry; entry()")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    threads = int(proc.stdout.strip().splitlines()[-1])
    assert threads == 1 if blas_threads is None else threads > 1, threads
