"""The batch coordinator's pure parts: jobs files and the generator, node selection
policies, CISNE's equations and Algorithm 1 on hand-worked states, the shared CPU."""

import re
import threading
import time

import pytest

from emulator.batch import cisne
from emulator.batch.jobs import (BatchJob, check_fits, generate_jobs, read_jobs,
                                 write_jobs_csv)
from emulator.batch.placement import NodeState, Placement
from emulator.coordinator.cpushare import NodeCPU
from emulator.errors import InputFileError
from emulator.scheduling.job import Job
from emulator.scheduling.scheduler import Scheduler

# -- jobs files ----------------------------------------------------------------------------


def test_csv_jobs_file_is_read_in_arrival_order(tmp_path):
    p = tmp_path / "jobs.csv"
    p.write_text("arrival_seconds,benchmark,class,tasks\n5,bt,A,4\n0,cg,S,8\n# a note\n"
                 "2.5,is,A,2\n")
    jobs = read_jobs(p)
    assert [(j.id, j.arrival_seconds, j.benchmark, j.npb_class, j.tasks) for j in jobs] == [
        (2, 0.0, "cg", "S", 8), (3, 2.5, "is", "A", 2), (1, 5.0, "bt", "A", 4)]


@pytest.mark.parametrize("line, where, says", [
    ("0,xx,A,4", "line 2: benchmark", "unknown benchmark 'xx'"),
    ("0,bt,A,2", "line 2: tasks", "BT does not run on 2 processes"),
    ("0,cg,A,3", "line 2: tasks", "power of two"),
    ("0,cg,A,four", "line 2: tasks", "whole number"),
    ("-1,cg,A,4", "line 2: arrival_seconds", ">= 0"),
    ("0,cg,Q,4", "line 2: class", "unknown class 'Q'"),
    ("0,cg,A", "line 2", "3 fields, the header has 4"),
])
def test_a_bad_jobs_line_is_named(tmp_path, line, where, says):
    p = tmp_path / "jobs.csv"
    p.write_text(f"arrival_seconds,benchmark,class,tasks\n{line}\n")
    with pytest.raises(InputFileError) as e:
        read_jobs(p)
    assert f"{p}: {where}: " in str(e.value) and says in str(e.value)


def test_toml_and_swf_jobs_files(tmp_path):
    t = tmp_path / "jobs.toml"
    t.write_text('[[job]]\narrival_seconds = 1\nbenchmark = "mg"\ntasks = 8\n'
                 '[[job]]\narrival_seconds = 0\nbenchmark = "sp"\nclass = "S"\ntasks = 9\n')
    assert [(j.benchmark, j.npb_class, j.tasks) for j in read_jobs(t)] == [
        ("sp", "S", 9), ("mg", "A", 8)]
    t.write_text('[[job]]\narrival_seconds = 1\nbenchmark = "mg"\ntasks = 8\ncolour = 1\n')
    with pytest.raises(InputFileError, match=r"job\[0\]\.colour: unknown field"):
        read_jobs(t)
    s = tmp_path / "jobs.swf"
    # executable 2 is CG, 5 is IS; tasks from the requested processors
    s.write_text("; MaxProcs: 16\n"
                 "1 100 0 50 4 -1 -1 4 60 -1 1 1 1 2 1 -1 -1 -1\n"
                 "2 130 0 50 2 -1 -1 2 60 -1 1 1 1 5 1 -1 -1 -1\n")
    assert [(j.arrival_seconds, j.benchmark, j.tasks) for j in read_jobs(s)] == [
        (0.0, "cg", 4), (30.0, "is", 2)]


def test_a_job_larger_than_the_cluster_is_refused():
    jobs = [BatchJob(1, 0.0, "cg", "A", 8)]
    check_fits(jobs, 8)
    with pytest.raises(InputFileError, match="job 1: tasks: CG of 8 tasks cannot run on 6"):
        check_fits(jobs, 6)


def test_generated_workload_is_hanzich_et_als(tmp_path):
    jobs = generate_jobs(30, seed=3)
    assert len(jobs) == 30 and jobs[0].arrival_seconds == 0
    assert {j.benchmark for j in jobs} <= {"bt", "cg", "is", "mg"}
    assert all(j.tasks in (2, 4, 8) for j in jobs)
    assert all(j.tasks == 4 for j in jobs if j.benchmark == "bt")  # a square
    kinds = [j.kind for j in jobs]
    assert kinds.count("compute") == 15  # balanced
    gaps = [b.arrival_seconds - a.arrival_seconds for a, b in zip(jobs, jobs[1:])]
    assert 7 < sum(gaps) / len(gaps) < 25  # Poisson, mean 15 s
    assert generate_jobs(30, seed=3) == jobs and generate_jobs(30, seed=4) != jobs
    p = tmp_path / "gen.csv"
    p.write_text(write_jobs_csv(jobs))
    assert [(j.benchmark, j.tasks) for j in read_jobs(p)] == [(j.benchmark, j.tasks)
                                                             for j in jobs]


# -- node selection ------------------------------------------------------------------------


def _job(i, tasks, kind="compute", cpu=0.5, exe=10.0, submit=0.0):
    job = Job(i, submit, tasks, estimate=exe)
    job.info = {"tasks": tasks, "kind": kind, "cpu_fraction": cpu, "benchmark": "cg",
                "npb_class": "A", "exe_seconds": exe, "cpu_seconds": cpu * exe}
    return job


def test_normal_takes_the_least_used_nodes_and_spares_local_users():
    p = Placement("normal", ["a", "b", "c", "d"], mpl=4, local_cpu={"a": 0.15})
    assert p.place(_job(1, 2, cpu=0.5)) == ["b", "c"]  # a has a local user
    assert p.place(_job(2, 2, cpu=0.5)) == ["d", "a"]  # d idle; a's 0.15 < b's 0.5
    # a now has 0.5 of parallel work beside its local user; 0.6 more would pass one CPU
    assert not p.can_place(_job(3, 4, cpu=0.6))
    assert p.can_place(_job(4, 4, cpu=0.5))


def test_tasks_go_only_where_their_memory_fits_beside_the_local_user():
    # 512 MB nodes; a's local user holds 35% (179 MB): 333 MB left there, 512 elsewhere
    p = Placement("normal", ["a", "b"], mpl=4, local_cpu={"a": 0.15},
                  memory_mb={"a": 512, "b": 512})
    p.state["a"].local_memory_mb = 0.35 * 512
    big = _job(1, 1, cpu=0.1)
    big.info["memory_mb"] = 300.0
    assert p.place(big) == ["b"]  # least used would be a, but it must fit
    other = _job(2, 2, cpu=0.1)
    other.info["memory_mb"] = 250.0  # fits on a (333 free), not beside big on b (212 free)
    assert not p.can_place(other)
    small = _job(3, 2, cpu=0.1)
    small.info["memory_mb"] = 200.0
    assert sorted(p.place(small)) == ["a", "b"]
    for policy in ("uniform", "random"):
        q = Placement(policy, ["a", "b"], mpl=4, memory_mb={"a": 512, "b": 512})
        q.place(big)
        assert not q.can_place(other)


def test_a_local_user_that_starts_later_holds_its_memory_at_once():
    # as a live run starts the local load after the placement is made: 350 MB fit on a
    # bare 512 MB node, not beside a local user's 179 MB
    p = Placement("normal", ["a"], mpl=4, memory_mb={"a": 512})
    big = _job(1, 1, cpu=0.1)
    big.info["memory_mb"] = 350.0
    assert p.can_place(big)
    p.state["a"].local_memory_mb = 0.35 * 512
    assert p.state["a"].free_memory_mb == pytest.approx(512 - 179.2)
    assert not p.copy().can_place(big)


def test_a_job_whose_tasks_fit_nowhere_yet_waits_for_the_memory():
    p = Placement("normal", ["a", "b"], mpl=4, memory_mb={"a": 512, "b": 512})
    s = Scheduler(8, "fcfs", nodes=p)
    first, second = _job(1, 2, exe=10.0), _job(2, 2, exe=5.0)
    first.info["memory_mb"] = second.info["memory_mb"] = 300.0
    for j in (first, second):
        s.submit(j, 0.0)
    assert s.schedule(0.0) == [first]  # slots are free, memory is not
    s.finish(first, 10.0)
    assert s.schedule(10.0) == [second]


def test_jobs_carry_their_memory_from_the_class_or_the_file(tmp_path):
    f = tmp_path / "jobs.csv"
    f.write_text("arrival_seconds,benchmark,class,tasks,memory_mb\n0,mg,A,2,\n1,cg,A,4,90\n")
    mg, cg = read_jobs(f)
    assert round(mg.task_memory_mb) == 251 and cg.task_memory_mb == 90.0
    assert read_jobs(f)[0] == mg and "memory_mb" in write_jobs_csv([mg])
    check_fits([mg, cg], 4, path=str(f), memory_mb=[512] * 4)
    with pytest.raises(InputFileError, match="MG needs 251 MB per task on 2 nodes; 1 node"):
        check_fits([mg], 4, path=str(f), memory_mb=[512, 128, 128, 128])
    f.write_text("arrival_seconds,benchmark,class,tasks,memory_mb\n0,mg,A,2,lots\n")
    with pytest.raises(InputFileError, match="line 2: memory_mb"):
        read_jobs(f)


def test_a_command_makes_a_job_a_real_program(tmp_path):
    """A ``command`` in place of a benchmark: the program found (its path kept), its name the
    file's unless the job gives one, any task count, no memory unless given; a CSV written
    from the jobs reads its programs back the same."""
    from emulator.batch.programs import check_shaping
    from emulator.errors import UserError

    program = tmp_path / "my solver"  # a space: the command line quotes it
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    f = tmp_path / "jobs.csv"
    f.write_text("arrival_seconds,benchmark,class,tasks,command\n"
                 "0,cg,A,4,\n"
                 f"1,,,3,\"'{program}' --grid 3,3\"\n"
                 f"2,solver,,5,'{program}'\n")
    cg, first, named = read_jobs(f)
    assert cg.command is None and cg.kind == "communication"
    assert first.command == (str(program), "--grid", "3,3") and first.benchmark == "my solver"
    assert (first.tasks, first.kind, first.task_memory_mb) == (3, "program", 0.0)
    assert first.application == (f"'{program}' --grid 3,3", "", 3)
    assert named.benchmark == "solver" and named.command == (str(program),)
    again = tmp_path / "again.csv"
    again.write_text(write_jobs_csv([cg, first, named]))
    assert read_jobs(again)[1:] == [first, named]
    t = tmp_path / "jobs.toml"
    t.write_text(f'[[job]]\narrival_seconds = 0\ntasks = 2\ncommand = ["{program}", "x"]\n')
    assert read_jobs(t)[0].command == (str(program), "x")
    check_shaping([cg, first], "inproc")
    check_shaping([cg], "tc")
    with pytest.raises(UserError, match="needs --shaping inproc, not tc"):
        check_shaping([cg, first], "tc")


@pytest.mark.parametrize("row, says", [
    ("0,,,2,./nowhere 3", "line 2: command: no executable program './nowhere'"),
    ("0,,,2,'unclosed", "line 2: command: cannot split it"),
    ("0,,,0,true", "line 2: tasks: must be at least 1"),
    ("0,,,2,", "line 2: benchmark: missing (a NAS benchmark, or a command to run)"),
])
def test_a_bad_command_is_named_by_its_line(tmp_path, row, says):
    f = tmp_path / "jobs.csv"
    f.write_text(f"arrival_seconds,benchmark,class,tasks,command\n{row}\n")
    with pytest.raises(InputFileError, match=re.escape(says)):
        read_jobs(f)


def test_a_job_the_file_pins_takes_its_nodes_whatever_the_policy(tmp_path):
    f = tmp_path / "jobs.csv"
    f.write_text("arrival_seconds,benchmark,class,tasks,nodes\n0,cg,A,2,c d\n1,is,A,2,\n")
    pinned, free = read_jobs(f)
    assert pinned.nodes == ("c", "d") and free.nodes is None
    assert read_jobs(f) == [pinned, free] and ",c d" in write_jobs_csv([pinned])
    check_fits([pinned], 4, path=str(f), names=list("abcd"), memory_mb=[512] * 4)
    with pytest.raises(InputFileError, match="job 1: nodes: d not in the cluster"):
        check_fits([pinned], 4, path=str(f), names=list("abce"), memory_mb=[512] * 4)
    for bad, says in (("c", "2 distinct nodes"), ("c c", "2 distinct nodes")):
        f.write_text(f"arrival_seconds,benchmark,class,tasks,nodes\n0,cg,A,2,{bad}\n")
        with pytest.raises(InputFileError, match=f"line 2: nodes: must name {says}"):
            read_jobs(f)
    p = Placement("uniform", list("abcd"), mpl=1)
    job = _job(1, 2)
    job.info["nodes"] = ("d", "c")
    assert p.choose_for(job) == ["d", "c"]  # in its ranks' order
    p.place(job)
    again = _job(2, 2)
    again.info["nodes"] = ("c", "a")
    assert not p.can_place(again)  # c is taken (MPL 1): it waits for it
    assert p.can_place(_job(3, 2))  # a job free to go elsewhere does not


def test_predicted_takes_the_choice_with_the_shorter_predicted_turnaround():
    p = Placement("predicted", list("abcd"), mpl=4)
    first = p.place(_job(1, 2, kind="compute"))  # no predictor yet: as Normal
    assert first == ["a", "b"]
    asked = []

    def predictor(job, nodes):
        asked.append(sorted(nodes))
        return 5.0 if sorted(nodes) == ["a", "b"] else 9.0

    p.predictor = predictor
    # Normal would take the idle c, d; Uniform pairs the job with job 1 on a, b
    assert p.place(_job(2, 2, kind="communication")) == ["a", "b"]
    assert sorted(asked) == [["a", "b"], ["c", "d"]]
    p.predictor = lambda job, nodes: 9.0 if "a" in nodes else 5.0
    assert sorted(p.place(_job(3, 2))) == ["c", "d"]
    assert p.copy().predictor is None  # simulating forward places as Normal


def test_algorithm_1_can_start_a_queued_job_on_given_nodes_first():
    # MPL 1: A runs on n1 until 10; B (1 task) waits for nothing on n2 or n3
    p = Placement("normal", ["n1", "n2", "n3"], mpl=2)
    s = Scheduler(6, "fcfs", nodes=p)
    a, b = _job(1, 1, exe=10.0, cpu=1.0), _job(2, 1, exe=10.0, cpu=1.0)
    s.submit(a, 0.0)
    s.schedule(0.0)
    s.submit(b, 0.0)  # queued, not started
    beside = cisne.estimate_ends(s, p, 0.0, {}, "cpu-cpu", start=(b, ["n1"]))
    alone = cisne.estimate_ends(s, p, 0.0, {}, "cpu-cpu", start=(b, ["n2"]))
    assert alone[2] == pytest.approx(10.0)  # a node of its own
    assert beside[2] > alone[2] and beside[1] > alone[1]  # sharing n1's CPU with A
    assert b.start is None and not p.pinned  # the live run is left as it was


def test_uniform_pairs_jobs_of_a_size_and_mixes_kinds():
    p = Placement("uniform", list("abcdef"), mpl=4)
    first = p.place(_job(1, 2, kind="compute"))
    second = p.place(_job(2, 2, kind="compute"))
    assert second == first  # a job of the same size: the pair shares its nodes
    p2 = Placement("uniform", list("abcdef"), mpl=4)
    a = p2.place(_job(1, 2, kind="compute"))
    b = p2.place(_job(2, 4, kind="communication"))  # no partner of size 4: idle nodes
    assert not set(a) & set(b)
    c = p2.place(_job(3, 2, kind="communication"))  # pairs with job 1 (size 2)
    assert c == a
    d = p2.place(_job(4, 2, kind="compute"))  # job 1's set holds a pair now: other nodes
    assert not set(d) & set(a)


def test_basic_runs_one_job_per_node_and_random_is_seeded():
    p = Placement("basic", list("abcd"), mpl=4)
    p.place(_job(1, 4))
    assert not p.can_place(_job(2, 1))
    r1 = Placement("random", list("abcdefgh"), seed=5).place(_job(1, 3))
    r2 = Placement("random", list("abcdefgh"), seed=5).place(_job(1, 3))
    assert r1 == r2 and len(set(r1)) == 3


def test_simulating_forward_leaves_the_random_placements_as_they_were():
    nodes = [f"n{i}" for i in range(16)]
    alone = Placement("random", nodes, seed=7)
    watched = Placement("random", nodes, seed=7)
    for i in range(6):
        forecast = watched.copy()  # what an estimator does at each arrival
        forecast.place(_job(100 + i, 3))
        assert watched.place(_job(i, 2)) == alone.place(_job(i, 2))


class _Counting(Placement):
    """A placement that counts its looks at the nodes."""

    looks = 0

    def choose(self, *args, **kwargs):
        type(self).looks += 1
        return super().choose(*args, **kwargs)


class _LookingAfresh(_Counting):
    """... and forgets its misses before every look."""

    looks = 0

    def can_place(self, job, avoid=None):
        self._misses.clear()
        return super().can_place(job, avoid)


def _easy_trace(placement_class, policy, seed):
    """EASY over 60 random jobs on 8 nodes (two with a local user holding memory), played
    to the end: every job's start and nodes; the live node states stay true to their tasks."""
    import random

    rng = random.Random(seed)
    names = [f"n{i}" for i in range(8)]
    p = placement_class(policy, names, mpl=2, local_cpu={"n1": 0.15, "n5": 0.15}, seed=seed,
                        memory_mb={n: 512.0 for n in names})
    for n in ("n1", "n5"):
        p.state[n].local_memory_mb = 180.0
        p.state[n]._sum()
    s = Scheduler(16, "easy", nodes=p)
    jobs, running, t = [], [], 0.0
    for i in range(60):
        t += rng.expovariate(1.0)
        while running and min(running)[0] <= t:
            end, _, job = min(running)
            running.remove(min(running))
            s.finish(job, end)
            running += [(end + j.estimate, j.id, j) for j in s.schedule(end)]
        job = _job(i, rng.choice([1, 2, 4, 8]), kind=rng.choice(["compute", "communication"]),
                   cpu=rng.choice([0.3, 0.6, 0.9]), exe=rng.uniform(1, 8), submit=t)
        job.info["memory_mb"] = rng.choice([0.0, 200.0, 300.0])
        jobs.append(job)
        s.submit(job, t)
        running += [(t + j.estimate, j.id, j) for j in s.schedule(t)]
        while i == 59 and running:  # the last arrival: play to the end
            end, _, job = min(running)
            running.remove(min(running))
            s.finish(job, end)
            running += [(end + j.estimate, j.id, j) for j in s.schedule(end)]
        for st in p.state.values():  # the kept sums are the sums
            assert st.parallel_cpu == pytest.approx(sum(st.tasks.values()))
            assert st.free_memory_mb == pytest.approx(
                512.0 - st.local_memory_mb - sum(st.task_memory.values()))
    return [(j.start, tuple(j.nodes or ())) for j in jobs]


@pytest.mark.parametrize("policy", ["normal", "uniform", "random"])
def test_remembered_misses_and_reservations_change_no_placement(policy):
    # a miss is kept until a job starts or ends, and EASY's reservation copies only the
    # nodes it changes: the same starts, on the same nodes, as looking afresh every time
    for seed in (1, 2, 3):
        _Counting.looks = _LookingAfresh.looks = 0
        kept = _easy_trace(_Counting, policy, seed)
        assert kept == _easy_trace(_LookingAfresh, policy, seed)
        assert all(start is not None for start, _ in kept)
        assert _Counting.looks < _LookingAfresh.looks  # misses were remembered


def test_pattern_policy_picks_the_widest_links():
    import networkx as nx

    g = nx.Graph()
    for n in "abcd":
        g.add_node(n, kind="compute", capacity_mbps=100.0)
    for u, v in [("a", "b"), ("a", "c"), ("a", "d"), ("b", "c"), ("b", "d"), ("c", "d")]:
        g.add_edge(u, v, bandwidth_mbps=90.0 if {u, v} == {"b", "d"} else 10.0)
    from emulator.selection.patterns import builtin_pattern

    p = Placement("pattern", list("abcd"), graph=g,
                  pattern_of=lambda info: builtin_pattern("cg", info["tasks"]))
    assert sorted(p.place(_job(1, 2))) == ["b", "d"]


# -- the equations (Hanzich et al. Eq. 1-9) ------------------------------------------------------


def test_equations_on_hand_worked_numbers():
    state = {"n1": NodeState("n1", 0.15, {7: 0.5}), "n2": NodeState("n2", 0.0, {7: 0.5,
                                                                                   8: 0.8})}
    assert cisne.remain_prop(4.0, 2.0, 10.0, 5.0) == 6.0  # 4 x (5 - 2) / 2
    assert cisne.remain_prop(0.0, 0.0, 10.0, 5.0) == 10.0  # 0/0: the isolated time
    assert cisne.remain_isol(10.0, 5.0, 2.0) == 6.0  # 10 x (5 - 2) / 5
    assert cisne.mpl_max(["n1", "n2"], state) == 2  # n1: one task + local; n2: two tasks
    assert cisne.cpu_max(["n1", "n2"], state) == pytest.approx(1.3)  # n2: 0.5 + 0.8
    assert cisne.remain_mpl(10.0, 5.0, 2.0, 2) == 12.0
    # CPU_feas = min(0.5, 0.5 / 1.3); remain = 6 x 0.5 / CPU_feas = 6 x 1.3
    assert cisne.remain_cpu(10.0, 5.0, 2.0, 1.3) == pytest.approx(7.8)
    assert cisne.remain_cpu(10.0, 5.0, 2.0, 0.65) == pytest.approx(6.0)  # no contention
    assert cisne.cputime_mpl(2.0, 4.0, 10.0, 5.0, 2) == 3.0  # 2 + 4 x 5 / (2 x 10)
    assert cisne.cputime_cpu(2.0, 4.0, 0.25) == 3.0
    # net: n2 demands 1.3 CPUs; max-min gives both tasks 0.5 CPU, all that job 7 wants and
    # 0.5/0.8 of job 8's pace; on n1, 0.15 + 0.5 fits
    assert cisne.cpu_factor(7, ["n1", "n2"], state) == pytest.approx(1.0)
    assert cisne.cpu_factor(8, ["n2"], state) == pytest.approx(0.5 / 0.8)
    # with a local user of 0.15 beside them, 0.425 each
    state["n2"].local_cpu = 0.15
    assert cisne.cpu_factor(7, ["n2"], state) == pytest.approx(0.425 / 0.5)


def test_equations_at_their_edges_and_the_net_rate():
    # Eq. 1 for a job that has used less than a CPU-second: 4 x (5 - 0.5) / 0.5 = 36;
    # past its total, nothing remains
    assert cisne.remain_prop(4.0, 0.5, 10.0, 5.0) == 36.0
    assert cisne.remain_prop(4.0, 6.0, 10.0, 5.0) == 0.0
    # Eq. 6: a CPU demand of exactly 1, or of less than 1, leaves CPU(J) as it is; no
    # demand at all (an empty view) too
    assert cisne.cpu_feas(0.5, 1.0) == 0.5 and cisne.cpu_feas(0.5, 0.5) == 0.5
    assert cisne.cpu_feas(0.5, 2.0) == 0.25 and cisne.cpu_feas(0.5, 0.0) == 0.5
    # Eq. 5 with CPU(J) = 5 / 10 = 0.5 and CPU_max 1: no contention, Eq. 2's 6 s
    assert cisne.remain_cpu(10.0, 5.0, 2.0, 1.0) == pytest.approx(6.0)
    # tasks demanding exactly one CPU share nothing
    assert cisne.cpu_paces(0.2, {1: 0.5, 2: 0.3}) == {1: 1.0, 2: 1.0}
    # net-net: 60 CPU-seconds at half pace (120 s) plus 40 s of communication twice as
    # slow (80 s): 60 CPU-seconds in 200 s, 0.3 a second; all compute: the pace itself
    assert cisne.net_rate(100.0, 60.0, 2.0, 0.5) == pytest.approx(0.3)
    assert cisne.net_rate(50.0, 50.0, 3.0, 1.0) == pytest.approx(1.0)
    assert cisne.net_rate(100.0, 60.0, 0.5, 1.0) == pytest.approx(60.0 / 80.0)
    # a node that holds none of the job's tasks leaves its pace whole
    state = {"n1": NodeState("n1", 0.0, {8: 0.9})}
    assert cisne.cpu_factor(7, ["n1"], state) == 1.0 and cisne.cpu_factor(7, [], state) == 1.0


def test_net_net_reads_each_jobs_communication_factor():
    """A: 10 s alone, 5 CPU-seconds (5 s computing, 5 communicating). With its
    communication twice as slow on the nodes it got (comm_factor 2), net-net has it end
    at 5 + 10 = 15 s, and the job queued behind it 10 s after that at factor 1; the
    factor comes from comm_factor_of for a job the estimate starts, and only for net-net."""
    a, b = _job(1, 2, cpu=0.5, exe=10.0), _job(2, 2, cpu=0.5, exe=10.0)
    s, p = _state_with([a], [b], mpl=1)
    a.info["comm_factor"] = 2.0
    asked = []

    def factor(info, nodes):
        asked.append(tuple(nodes))
        return 3.0

    ends = cisne.estimate_ends(s, p, 0.0, {}, "net-net")
    assert ends == pytest.approx({1: 15.0, 2: 25.0})
    ends = cisne.estimate_ends(s, p, 0.0, {}, "net-net", comm_factor_of=factor)
    assert ends == pytest.approx({1: 15.0, 2: 15.0 + 5.0 + 15.0}) and asked == [("n1", "n2")]
    asked.clear()
    assert cisne.estimate_ends(s, p, 0.0, {}, "cpu-cpu", comm_factor_of=factor) == \
        pytest.approx({1: 10.0, 2: 20.0})
    assert asked == []  # the other estimators read no communication factor
    assert "comm_factor" not in b.info  # the live job is left as it was


def _state_with(running, waiting, *, mpl, local=None, nodes=("n1", "n2")):
    """A scheduler and placement with ``running`` jobs started at 0 on all nodes."""
    p = Placement("normal", list(nodes), mpl=mpl, local_cpu=local or {})
    s = Scheduler(len(nodes) * mpl, "fcfs", nodes=p)
    for job in running + waiting:
        s.submit(job, 0.0)
    started = s.schedule(0.0)
    assert started == running
    return s, p


def test_algorithm_1_runs_the_queue_forward():
    a, b = _job(1, 2, cpu=0.5, exe=10.0), _job(2, 2, cpu=0.5, exe=10.0)
    s, p = _state_with([a], [b], mpl=1)
    progress = {1: (4.0, 2.0)}  # 4 s in, 2 of its 5 CPU-seconds used
    # alone on its nodes: every estimator has A end 6 s from now, then B runs 10 s
    for est in ("prop-mpl", "mpl-mpl", "cpu-cpu", "net-net"):
        assert cisne.estimate_ends(s, p, 4.0, progress, est) == pytest.approx(
            {1: 10.0, 2: 20.0}), est
    # the scheduler and placement themselves are untouched
    assert list(s.running) == [a] and s.waiting() == [b] and p.jobs[1][2] == ("n1", "n2")
    # a local user on n1: MPL_max = 2 doubles the MPL estimate of both jobs
    a, b = _job(1, 2, cpu=0.5, exe=10.0), _job(2, 2, cpu=0.5, exe=10.0)
    s, p = _state_with([a], [b], mpl=1, local={"n1": 0.15})
    ends = cisne.estimate_ends(s, p, 4.0, progress, "mpl-mpl")
    assert ends == pytest.approx({1: 16.0, 2: 36.0})
    # the CPU estimate sees 0.5 + 0.15 < 1: no slowdown
    assert cisne.estimate_ends(s, p, 4.0, progress, "cpu-cpu") == pytest.approx(
        {1: 10.0, 2: 20.0})


def test_algorithm_1_advances_cpu_time_of_the_jobs_left():
    a, b = _job(1, 2, cpu=0.8, exe=10.0), _job(2, 2, cpu=0.8, exe=10.0)
    s, p = _state_with([a, b], [], mpl=2)
    # MPL: both at MPL_max 2 run 20 s; when A ends, Eq. 8 has given B 20 x 8 / 20 = 8
    # CPU-seconds, all it needs: B ends then too
    assert cisne.estimate_ends(s, p, 0.0, {}, "mpl-mpl") == pytest.approx({1: 20.0, 2: 20.0})
    # CPU: CPU_max 1.6, CPU_feas 0.5, remain 10 x 0.8 / 0.5 = 16; Eq. 9 gives B 16 x 0.5
    assert cisne.estimate_ends(s, p, 0.0, {}, "cpu-cpu") == pytest.approx({1: 16.0, 2: 16.0})
    # net: 8 CPU-seconds at 1/1.6 of the pace plus 2 s of communication = 14.8 s
    assert cisne.estimate_ends(s, p, 0.0, {}, "net-net") == pytest.approx({1: 14.8, 2: 14.8})


def test_algorithm_1_calls_the_equations_checked_above(monkeypatch):
    calls = []
    for name in ("remain_prop", "remain_mpl", "remain_cpu", "cputime_mpl", "cputime_cpu",
                 "mpl_max", "cpu_max"):
        real = getattr(cisne, name)

        def counted(*a, _real=real, _name=name):
            calls.append(_name)
            return _real(*a)
        monkeypatch.setattr(cisne, name, counted)
    for est in ("prop-mpl", "mpl-cpu", "cpu-mpl", "cpu-cpu"):
        a, b = _job(1, 2, cpu=0.8, exe=10.0), _job(2, 2, cpu=0.8, exe=10.0)
        s, p = _state_with([a, b], [], mpl=2)
        cisne.estimate_ends(s, p, 0.0, {}, est)
    assert set(calls) == {"remain_prop", "remain_mpl", "remain_cpu", "cputime_mpl",
                          "cputime_cpu", "mpl_max", "cpu_max"}


def test_algorithm_1_follows_easy_backfilling():
    # 2 nodes, MPL 1: A runs (ends at 10); head B needs both nodes; C (1 task, 3 s) fits
    # before B's reservation only if a node is free: none is, so C waits behind A too
    p = Placement("normal", ["n1", "n2", "n3"], mpl=1)
    s = Scheduler(3, "easy", nodes=p)
    a, b, c = _job(1, 2, exe=10.0), _job(2, 3, exe=10.0), _job(3, 1, exe=3.0)
    for j in (a, b, c):
        s.submit(j, 0.0)
    assert s.schedule(0.0) == [a, c]  # C backfills on n3: it ends (3) before B's start (10)
    ends = cisne.estimate_ends(s, p, 0.0, {}, "mpl-mpl")
    assert ends == pytest.approx({1: 10.0, 3: 3.0, 2: 20.0})


@pytest.mark.parametrize("node_aware", [True, False])
def test_easy_reserves_the_heads_nodes_not_only_slots(monkeypatch, node_aware):
    # 3 nodes, MPL 2, Uniform. A runs alone on a; B and its partner D fill b and c until 50.
    # The head H needs all three nodes: at 50 it takes a's last slot. C (1 task, long) would
    # pair with A on a (Uniform joins a job of its size), which the slot count allows (2
    # slots to spare at 50) but which leaves H no node a: with the head's nodes reserved, C
    # waits and H starts at 50.
    if not node_aware:  # the slot count alone, to show what the reservation prevents
        monkeypatch.setattr(Placement, "reserve", None)
    p = Placement("uniform", ["a", "b", "c"], mpl=2)
    s = Scheduler(6, "easy", nodes=p)
    a, b, d = _job(1, 1, exe=100.0), _job(2, 2, exe=50.0), _job(3, 2, exe=50.0)
    h, c = _job(4, 3, exe=10.0), _job(5, 1, exe=1000.0)
    for j in (a, b, d, h, c):
        s.submit(j, 0.0)
    started = s.schedule(0.0)
    assert [j.nodes for j in (a, b, d)] == [["a"], ["b", "c"], ["b", "c"]]
    for j in (b, d):
        s.finish(j, 50.0)
    s.schedule(50.0)
    if node_aware:
        assert started == [a, b, d] and h.start == 50.0 and sorted(h.nodes) == ["a", "b", "c"]
    else:
        assert c in started and c.nodes == ["a"] and h.start is None


def test_deviation_keeps_the_sign():
    assert cisne.deviation_pct(12.0, 10.0) == pytest.approx(20.0)
    assert cisne.deviation_pct(8.0, 10.0) == pytest.approx(-20.0)


# -- the shared CPU ------------------------------------------------------------------------


def _model(dilation=1.0):
    from emulator.network.cluster import crossbar
    from emulator.network.sharing import ClusterModel

    model = ClusterModel(crossbar(1), max_flows=64, base=0.0)
    model.set_clock(epoch=0.0, dilation=dilation, wall=0.0)
    return model


def test_phases_share_the_cpu_max_min_by_hand():
    """A phase of 0.4 CPU-s from 0 and one of 0.2 from 0.1: from 0.1 each gets half the
    CPU, so the second ends at 0.5 and the first, alone again for its last 0.1, at 0.6."""
    now = [0.0]
    cpu = NodeCPU(_model(), "n1", clock=lambda: now[0])
    a = cpu.begin(1, 0.4)
    now[0] = 0.1
    b = cpu.begin(2, 0.2)
    assert cpu.progress(a) == (False, pytest.approx(0.7)) and \
        cpu.progress(b) == (False, pytest.approx(0.5))
    now[0] = 0.3
    assert cpu.cpu_seconds(1) == pytest.approx(0.2) and cpu.cpu_seconds(2) == pytest.approx(0.1)
    now[0] = 0.5
    assert cpu.progress(b)[0]
    cpu.end(b)
    assert cpu.progress(a) == (False, pytest.approx(0.6))
    now[0] = 0.6
    assert cpu.progress(a)[0]
    cpu.end(a)
    assert cpu.cpu_seconds(1) == pytest.approx(0.4)  # its finished phase's work
    cpu.forget(1)
    assert cpu.cpu_seconds(1) == 0.0
    # a local user of 0.15 takes its share, the phase the rest; the dilation stretches both
    loaded = NodeCPU(_model(2.0), "n1", local_fraction=0.15, dilation=2.0, clock=lambda: 0.0)
    assert loaded.progress(loaded.begin(1, 0.85)) == (False, pytest.approx(2.0))
    # six phases leave it only its equal share, 1/7
    crowded = NodeCPU(_model(), "n1", local_fraction=0.15, clock=lambda: 0.0)
    phases = [crowded.begin(j, 1.0) for j in range(6)]
    assert crowded.progress(phases[0]) == (False, pytest.approx(7.0))


def test_two_phases_in_threads_share_the_cpu_and_a_local_user_takes_its_share():
    """The same in real time, as jobs' threads on a node compute."""
    def phase(cpu, job, seconds, out):
        start = time.monotonic()
        cpu.compute(job, seconds, lambda end, changed: time.sleep(
            max(0.0, min(end - time.time(), 0.002))))
        out[job] = time.monotonic() - start

    from emulator.network.cluster import crossbar
    from emulator.network.sharing import ClusterModel

    model = ClusterModel(crossbar(1), max_flows=64)  # on the wall clock
    model.set_clock(epoch=time.time())
    cpu = NodeCPU(model, "n1")
    out = {}
    threads = [threading.Thread(target=phase, args=(cpu, j, 0.3, out)) for j in (1, 2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out[1] == pytest.approx(0.6, rel=0.15) and out[2] == pytest.approx(0.6, rel=0.15)
    cpu.set_local(0.15)
    out = {}
    phase(cpu, 1, 0.3, out)
    assert out[1] == pytest.approx(0.3 / 0.85, rel=0.15)
    assert cpu.cpu_seconds(1) == pytest.approx(0.6)


def test_under_the_kernel_a_tasks_cpu_time_is_all_its_threads_not_only_its_phases():
    """A task's work outside its compute phases (its messages) takes the node's CPU under the
    kernel, so its CPUtime counts it; a task that did not begin here counts its phases."""
    from emulator.coordinator.cpushare import KernelCPU
    from emulator.coordinator.work import calibrate

    cpu = KernelCPU(calibrate(0.05, threads=1))
    got = {}

    def task(job, begin):
        if begin:
            cpu.start_task(job)
        cpu.compute(job, 0.1)
        busy_until = time.thread_time() + 0.1  # CPU outside a phase
        while time.thread_time() < busy_until:
            pass
        got[job] = cpu.cpu_seconds(job)

    for job, begin in ((1, True), (2, False)):
        t = threading.Thread(target=task, args=(job, begin))
        t.start()
        t.join()
    assert got[1] == pytest.approx(0.2, rel=0.2), got
    assert got[2] == pytest.approx(0.1, rel=0.2), got
    cpu.forget(1)
    assert cpu.cpu_seconds(1) == 0.0


def test_the_experiment_gives_each_cell_an_interval_over_its_repeats():
    """From 3 repeats on, a cell carries half the 90% t interval of the repeats' own mean
    |deviation|, and the table shows it."""
    from emulator.batch.experiment import summarize
    from emulator.batch.report import table_md
    from emulator.experiments.report import t_interval

    def rec(job, actual, predicted):
        return {"job": job, "submit": 0.0, "start": 0.0, "end": actual, "status": "done",
                "predicted_end": {"net-net": predicted}, "estimation_ms": 0.1}

    rows = [("normal+fcfs", 0.25, r, rec(j, 10.0, 10.0 + d))
            for r, ds in enumerate([(1, -3), (2, 2), (4, 1)]) for j, d in enumerate(ds)]
    summary = summarize(rows, [], [0.1], complete=True, settings_json={},
                        characterization={}, columns=("net-net",))
    means = [(10 + 30) / 2, (20 + 20) / 2, (40 + 10) / 2]  # 10% per second off, per repeat
    mean, low, _ = t_interval(means)
    half = summary["deviation_interval_pct"]["normal+fcfs"]["0.25"]["net-net"]
    assert half == pytest.approx(mean - low) and half > 0
    assert f"± {half:.1f}" in table_md(summary)
    few = summarize(rows[:4], [], [0.1], complete=True, settings_json={},
                    characterization={}, columns=("net-net",))
    assert few["deviation_interval_pct"] == {}  # two repeats: no interval


def test_the_summary_times_one_estimator_per_arrival_over_every_run():
    # arrivals' Algorithm 1 runs (7 estimators) from two runs, one of them resumed (no
    # timings of its own runs in this invocation): each arrival's sum over 7
    from emulator.batch.experiment import summarize

    def rec(job, ms):
        return {"job": job, "submit": 0.0, "start": 0.0, "end": 10.0, "status": "done",
                "predicted_end": {e: 10.0 for e in cisne.ESTIMATORS}, "estimation_ms": ms}

    rows = [("normal+fcfs", 0.25, 0, rec(1, 3.5)), ("normal+fcfs", 0.25, 0, rec(2, 10.5)),
            ("normal+fcfs", 1.0, 0, rec(1, 14.0)), ("normal+fcfs", 1.0, 0, rec(2, None))]
    from emulator.batch.report import columns

    each = summarize(rows, [], [0.5, 1.5], complete=True, settings_json={},
                     characterization={}, columns=columns(cisne.ESTIMATORS))[
        "estimation_ms_per_estimator"]
    assert each["mean"] == pytest.approx((0.5 + 1.5 + 2.0) / 3)
    assert each["median"] == pytest.approx(1.5)
    assert each["within_1ms_share"] == pytest.approx(1 / 3)
    assert each["by_loaded_fraction"] == pytest.approx({"0.25": 1.0, "1": 2.0})


# -- resuming an experiment ----------------------------------------------------------------

def _experiment_outputs(out, jobs, *, policy="normal+fcfs", cpu="model", dilation=1.0):
    """A summary.json and jobs.csv as an experiment writes them after one complete run of
    ``policy`` and one cut short (uniform+fcfs)."""
    import json

    from emulator.batch import report

    def rec(j, end):
        return {"job": j.id, "benchmark": j.benchmark, "class": j.npb_class, "tasks": j.tasks,
                "kind": j.kind, "arrival_seconds": j.arrival_seconds,
                "submit": j.arrival_seconds + 1e-6, "start": j.arrival_seconds + 0.5,
                "end": end, "nodes": "n1 n2", "status": "done" if end else "running",
                "restarts": 0, "isolated_seconds": 2.0, "estimation_ms": 0.25,
                "predicted_start": None, "run_start": None, "run_seconds": None,
                "compute_seconds": 1.25, "cpu_seconds": 1.0,
                "predicted_end": {e: j.arrival_seconds + 3.123456789
                                  for e in report.columns(cisne.ESTIMATORS)}}

    rows = [(policy, 0.25, 0, rec(j, j.arrival_seconds + 4.0)) for j in jobs]
    rows += [("uniform+fcfs", 0.25, 0, rec(j, None)) for j in jobs[:2]]
    (out / "jobs.csv").write_text(report.jobs_csv(rows, report.columns(cisne.ESTIMATORS)))
    settings = _settings()
    (out / "summary.json").write_text(json.dumps({"settings": settings, "runs": [
        {"policy": policy, "loaded_fraction": 0.25, "repeat": 0, "cpu": cpu,
         "dilation": dilation}]}))
    return rows


def _settings(**change):
    s = {"policies": ["normal+fcfs"], "loaded_fractions": [0.25], "repeats": 1, "mpl": 4,
         "class": "A", "iterations": {"bt": 6}, "mean_gap_seconds": 1.0,
         "nodes": ["n1", "n2"], "seed": 1, "estimators": list(cisne.ESTIMATORS)}
    s.update(change)
    return s


def test_a_resumed_experiment_keeps_its_complete_runs_exactly_and_drops_one_cut_short(tmp_path):
    from emulator.batch import report
    from emulator.batch.experiment import completed_runs

    jobs = generate_jobs(5, seed=1, mean_gap_seconds=1.0, max_tasks=2)
    written = _experiment_outputs(tmp_path, jobs)
    rows, runs = completed_runs(
        tmp_path, _settings(policies=["normal+fcfs", "uniform+fcfs"], repeats=3), {0: jobs},
        cpu="model", dilation=1.0, columns=report.columns(cisne.ESTIMATORS))
    assert [r["policy"] for r in runs] == ["normal+fcfs"]
    assert len(rows) == 5 and {r[0] for r in rows} == {"normal+fcfs"}
    for (p, f, k, got), (_, _, _, want) in zip(rows, written):
        assert (p, f, k) == ("normal+fcfs", 0.25, 0)
        for key, value in want.items():
            if isinstance(value, float):
                assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
            elif key == "predicted_end":
                assert got[key] == pytest.approx(value, rel=1e-9)
            else:
                assert got[key] == value, key
    # rewriting what was read gives the same file back
    columns = report.columns(cisne.ESTIMATORS)
    assert report.jobs_csv(rows, columns) == report.jobs_csv(written[:5], columns)


@pytest.mark.parametrize("change, says", [
    ({"mpl": 2}, "mpl is 4 where this run's is 2"),
    ({"seed": 7}, "seed is 1"),
])
def test_resuming_with_other_settings_is_refused_naming_the_setting(tmp_path, change, says):
    from emulator.batch import report
    from emulator.batch.experiment import completed_runs
    from emulator.errors import UserError

    jobs = generate_jobs(5, seed=1, mean_gap_seconds=1.0, max_tasks=2)
    _experiment_outputs(tmp_path, jobs)
    with pytest.raises(UserError, match=says):
        completed_runs(tmp_path, _settings(**change), {0: jobs}, cpu="model", dilation=1.0,
                       columns=report.columns(cisne.ESTIMATORS))


def test_resuming_with_other_jobs_or_another_cpu_model_is_refused(tmp_path):
    from emulator.batch import report
    from emulator.batch.experiment import completed_runs
    from emulator.errors import UserError

    jobs = generate_jobs(5, seed=1, mean_gap_seconds=1.0, max_tasks=2)
    _experiment_outputs(tmp_path, jobs)
    columns = report.columns(cisne.ESTIMATORS)
    other = generate_jobs(5, seed=2, mean_gap_seconds=1.0, max_tasks=2)
    with pytest.raises(InputFileError, match="not the ones this run would play"):
        completed_runs(tmp_path, _settings(), {0: other}, cpu="model", dilation=1.0,
                       columns=columns)
    with pytest.raises(UserError, match="--cpu model and --dilation 1.0, this one has --cpu "
                                        "kernel and --dilation 8"):
        completed_runs(tmp_path, _settings(), {0: jobs}, cpu="kernel", dilation=8.0,
                       columns=columns)
    # nothing there yet: a fresh start
    assert completed_runs(tmp_path / "new", _settings(), {0: jobs}, cpu="model",
                          dilation=1.0, columns=columns) == ([], [])


def test_a_damaged_jobs_csv_is_refused_naming_its_line(tmp_path):
    from emulator.batch import report
    from emulator.batch.experiment import completed_runs

    jobs = generate_jobs(5, seed=1, mean_gap_seconds=1.0, max_tasks=2)
    _experiment_outputs(tmp_path, jobs)
    lines = (tmp_path / "jobs.csv").read_text().splitlines()
    lines[2] = lines[2].replace(",done,", ",done,x", 1)
    (tmp_path / "jobs.csv").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputFileError,
                       match=r"jobs.csv: line 3, field .restarts.: .x0. is not a number"):
        completed_runs(tmp_path, _settings(), {0: jobs}, cpu="model", dilation=1.0,
                       columns=report.columns(cisne.ESTIMATORS))


def test_the_communication_model_builds_each_pattern_once_and_answers_as_built(monkeypatch):
    import networkx as nx

    from emulator.batch import live
    from emulator.network.sharing import pattern_seconds
    from emulator.selection.patterns import builtin_pattern

    graph = nx.complete_graph([f"n{i}" for i in range(1, 9)])
    for u, v in graph.edges:
        graph[u][v]["bandwidth_mbps"] = 40.0 if "n3" in (u, v) else 90.0
    built = []

    def counted(*a, **k):
        built.append(a)
        return builtin_pattern(*a, **k)
    monkeypatch.setattr(live, "builtin_pattern", counted)
    live.job_pattern.cache_clear()
    model = live.comm_model_function(graph, lambda n: 100.0)
    slow, fast = ["n1", "n2", "n3", "n4"], ["n5", "n6", "n7", "n8"]
    answers = [model("mg", "A", slow), model("mg", "A", fast), model("mg", "A", slow)]
    assert built == [("mg", 4)]  # one pattern for both node sets
    expected = [pattern_seconds(builtin_pattern("mg", 4, npb_class="A"), dict(enumerate(nodes)),
                                lambda u, v: graph[u][v]["bandwidth_mbps"],
                                port_mbps=lambda n: 100.0) for nodes in (slow, fast, slow)]
    assert answers == expected and answers[0] > answers[1]  # n3's 40 Mbit/s links cost
    live.job_pattern.cache_clear()  # none of the counting patterns stays


def test_a_batch_run_keeps_what_it_started_with_out_of_the_collectors_sight():
    import gc
    import types

    from emulator.batch.live import BatchRun

    seen = []
    run = types.SimpleNamespace(_run=lambda: seen.append(gc.get_freeze_count()) or ["done"],
                                programs={})
    assert BatchRun.run(run) == ["done"]
    assert seen[0] > 1000  # the modules and whatever the coordinator held, frozen
    assert gc.get_freeze_count() == 0  # and given back after the run
