"""Slurm accounting (sacct --parsable2) into SWF: steps folded into jobs, Slurm's time
formats, SWF's status codes, and bad lines named by number and field."""

import pytest

from emulator.cli import main
from emulator.errors import InputFileError
from emulator.workload.sacct import parse_sacct
from emulator.workload.slurmtime import slurm_duration_seconds
from emulator.workload.swf import read_swf

HEADER = "JobIDRaw|JobID|Submit|Start|End|Timelimit|AllocCPUS|ReqCPUS|User|Group|Partition|State"
LINES = [
    "1001|1001|2026-11-20T08:00:00|2026-11-20T08:00:05|2026-11-20T09:00:05|02:00:00|16|16|"
    "ann|phys|batch|COMPLETED",
    "1001.batch|1001.batch|2026-11-20T08:00:05|2026-11-20T08:00:05|2026-11-20T09:00:05||16|"
    "||||COMPLETED",
    "1002|1002|2026-11-20T08:10:00|None|2026-11-20T08:20:00|1-00:00:00|0|4|bob|chem|short|"
    "CANCELLED by 1234",
    "1003|1003_2|2026-11-20T08:30:00|2026-11-20T09:00:05|2026-11-20T11:00:05|UNLIMITED|8|8|"
    "ann|phys|batch|TIMEOUT",
    "1004|1004|2026-11-20T08:40:00|Unknown|Unknown|30:00|0|2|cid|chem|short|PENDING",
]
TEXT = "\n".join([HEADER] + LINES) + "\n"


def test_jobs_become_swf_rows_with_steps_folded_and_pending_jobs_left_out():
    trace, left_out = parse_sacct(TEXT)
    assert left_out == 1 and len(trace) == 3
    col = trace.column
    assert list(col("job")) == [1, 2, 3]
    assert list(col("submit")) == [0, 600, 1800]
    assert list(col("wait")) == [5, -1, 1805]  # the cancelled job never started
    assert list(col("run")) == [3600, -1, 7200]
    assert list(col("allocated_procs")) == [16, -1, 8]
    assert list(col("requested_procs")) == [16, 4, 8]
    assert list(col("requested_time")) == [7200, 86400, -1]  # UNLIMITED
    assert list(col("status")) == [1, 5, 0]  # completed, cancelled, failed (timeout)
    assert list(col("user")) == [1, 2, 1] and list(col("group")) == [1, 2, 1]
    assert list(col("partition")) == [1, 2, 1]
    assert trace.fields["UnixStartTime"] == "1795161600"  # 2026-11-20T08:00:00 UTC


@pytest.mark.parametrize("limit, seconds", [
    ("1-02:03:04", 93784), ("02:00:00", 7200), ("05:00", 300), ("45", 2700),
    ("1-02", 93600), ("1-2:03", 93780),  # days-hours, days-hours:minutes
    ("UNLIMITED", -1), ("Partition_Limit", -1), ("", -1)])
def test_time_limits_in_every_slurm_form(limit, seconds):
    line = LINES[0].replace("|02:00:00|", f"|{limit}|")
    trace, _ = parse_sacct("\n".join([HEADER, line]) + "\n")
    assert list(trace.column("requested_time")) == [seconds]


@pytest.mark.parametrize("text", ["\u00b2", "1-\u00b2:00", "\u00b9-02:00:00", "2h", "-5",
                                  "1.5", "1-2:3:4:5", "1-", "nan"])
def test_a_duration_of_other_digits_is_refused(text):
    with pytest.raises(ValueError, match="not a Slurm duration"):
        slurm_duration_seconds(text)


@pytest.mark.parametrize("bad, where", [
    (LINES[0].replace("|16|16|", "|16|"), "line 2: 11 fields, the header has 12"),
    (LINES[0].replace("2026-11-20T08:00:00", "yesterday"), "line 2, field Submit"),
    (LINES[0].replace("02:00:00", "2h"), "line 2, field Timelimit: not a Slurm duration"),
    (LINES[0].replace("|16|16|", "|sixteen|16|"), "line 2, field AllocCPUS"),
    (LINES[0].replace("COMPLETED", "WHATEVER"), "line 2, field State: unknown state"),
])
def test_a_bad_line_is_named_by_number_and_field(tmp_path, capsys, bad, where):
    path = tmp_path / "sacct.txt"
    path.write_text("\n".join([HEADER, bad]) + "\n")
    with pytest.raises(InputFileError, match=where):
        parse_sacct(path.read_text(), str(path))
    assert main(["workload", "convert", str(path), "--from", "sacct", "--to", "swf",
                 "--out", str(tmp_path / "o.swf")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and where in err and not (tmp_path / "o.swf").exists()


def test_a_file_without_sacct_header_is_refused(tmp_path):
    with pytest.raises(InputFileError, match="line 1: no header"):
        parse_sacct("1001 2026-11-20T08:00:00 COMPLETED\n", "x.txt")
    with pytest.raises(InputFileError, match="line 1: no Submit field"):
        parse_sacct("JobIDRaw|State\n1|COMPLETED\n", "x.txt")


def test_the_command_writes_a_trace_the_scheduler_reads(tmp_path, capsys):
    src, out = tmp_path / "sacct.txt", tmp_path / "site.swf"
    src.write_text(TEXT)
    assert main(["workload", "convert", str(src), "--from", "sacct", "--to", "swf",
                 "--out", str(out)]) == 0
    assert "left out 1 job(s) still pending or running" in capsys.readouterr().out
    trace = read_swf(str(out), check=False)
    assert len(trace) == 3 and list(trace.column("status")) == [1, 5, 0]
    # the jobs that ran can be scheduled; the cancelled one is dropped and counted
    assert main(["schedule", str(out), "--policy", "fcfs", "--out", str(tmp_path / "s")]) == 0
