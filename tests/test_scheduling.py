"""The batch scheduler: schedules worked out by hand for every policy, priorities and limits,
advance reservations, and properties on random workloads."""

import collections
import json
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emulator.cli import main
from emulator.errors import InputFileError
from emulator.scheduling.estimates import Function, Requested
from emulator.scheduling.job import Job, Owner, compress_arrivals, jobs_from_trace
from emulator.scheduling.policyfile import (Credential, SitePolicy, policy_from_maui,
                                            read_policy_file)
from emulator.scheduling.profile import Profile
from emulator.scheduling.reservations import ReservationRequest
from emulator.scheduling.scheduler import DEPTH, POLICIES, Scheduler
from emulator.scheduling.simulate import Watch, simulate
from emulator.scheduling.slurmbackfill import BackfillParams
from emulator.workload.swf import read_swf
from emulator.workload.traces import resolve_trace


def jobs_of(*rows, **extra):
    """Jobs from (submit, procs, run) rows, ids 1, 2, ... in row order."""
    out = []
    for i, row in enumerate(rows, start=1):
        submit, procs, run = row[:3]
        kw = dict(extra)
        if len(row) > 3:
            kw.update(row[3])
        owner = {k: kw.pop(k) for k in Owner._fields if k in kw}  # user=..., group=...
        out.append(Job(i, submit, procs, run, index=i - 1, owner=Owner(**owner), **kw))
    return out


def schedule(policy, jobs, processors, **kw):
    """The jobs as ``policy`` runs them (copies; ``jobs`` is left as given)."""
    site = kw.pop("site", None)
    return simulate(jobs, Scheduler(processors, policy, site=site), **kw).jobs


def starts(policy, jobs, processors, **kw):
    return [j.start for j in schedule(policy, jobs, processors, **kw)]


# -- hand-worked schedules -----------------------------------------------------------------
#
# 4 processors. J1 (2 procs, 10 s) runs from 0. J2 (all 4, 5 s) arrives at 1 and must wait
# for J1 (until 10). J3 (1 proc, 3 s) arrives at 2, J4 (2 procs, 4 s) at 3, J5 (1 proc, 20 s)
# at 4.
QUEUE = ((0, 2, 10), (1, 4, 5), (2, 1, 3), (3, 2, 4), (4, 1, 20))


def test_a_fresh_copy_is_the_job_as_submitted_in_every_attribute():
    job = Job(3, 5, 4, 10.0, requested=20, estimate=7, owner=Owner(1, 2, 3, 4), index=9)
    job.priority, job.info = 5, {"note": 1}
    submitted = {name: getattr(job, name) for name in Job.__slots__}
    job.start, job.end, job.est_end, job.reserved, job.slot = 1, 2, 3, 4, 5
    job.killed, job.restarts, job.nodes = True, 2, ["n1"]
    copy = job.fresh()
    assert {name: getattr(copy, name) for name in Job.__slots__} == submitted
    assert copy.info is job.info and copy is not job


def test_a_traces_jobs_are_what_the_job_constructor_makes_in_every_attribute():
    """jobs_from_trace makes its jobs in C, slot by slot: each is the Job that Job(...)
    makes from the same fields."""
    trace = read_swf(resolve_trace("nasa")).subset(np.arange(18239) < 300)
    trace.data[::2, 8] = 2 * trace.data[::2, 3]  # every other job with a requested time
    made = jobs_from_trace(trace, 2.0)
    for i, (job, row) in enumerate(zip(made, trace.data.tolist())):
        expected = Job(int(row[0]), math.floor(row[1] / 2.0), int(row[4]), row[3],
                       requested=row[8], owner=Owner(*(int(row[k]) for k in (11, 12, 13, 14))),
                       index=i)
        assert type(job) is Job
        assert {n: getattr(job, n) for n in Job.__slots__} == \
            {n: getattr(expected, n) for n in Job.__slots__}, i
    assert any(j.requested is None for j in made) and any(j.requested for j in made)


def test_objects_made_in_c_take_slots_alone_and_a_value_for_each():
    from emulator.workload._columns import new_objects

    a, b = new_objects(Job, 2, {"id": [1, 2], "submit": 0.0})
    assert (a.id, b.id, a.submit, b.submit) == (1, 2, 0.0, 0.0)
    with pytest.raises(AttributeError):
        a.procs  # noqa: B018  (a slot not given stays unset, as object.__new__ leaves it)
    with pytest.raises(TypeError, match="'owner' is not a slot of Job"):
        new_objects(Job, 1, {"owner": None})
    with pytest.raises(ValueError, match="3 values for 2 objects"):
        new_objects(Job, 2, {"id": [1, 2, 3]})
    with pytest.raises(AttributeError):
        new_objects(Job, 1, {"nonesuch": 1})


def test_a_summary_of_a_schedule_as_worked_by_hand():
    """Two jobs started, one never: the span runs from the first submit to the last end,
    the work is processors times run, a job of no length has no slowdown (its bounded
    slowdown counts its run as 10 s, and is at least 1)."""
    from emulator.scheduling.metrics import summarize
    from emulator.scheduling.simulate import Simulation

    a, b, c = Job(1, 3, 4, 100.0), Job(2, 5, 2, 0.0), Job(3, 0, 1, 30.0)
    a.start, a.end = 5.0, 105.0
    b.start, b.end, b.killed = 8.0, 8.0, True
    s = summarize(Simulation([a, b, c], [], 4, "easy", 2.0))
    assert (s["jobs"], s["unstarted_jobs"], s["killed_jobs"], s["restarted_jobs"]) == (2, 1, 1, 0)
    assert s["makespan_seconds"] == 102.0  # 105 - 3: of the started jobs alone
    assert s["utilization"] == pytest.approx(400 / (4 * 102))
    assert (s["mean_wait_seconds"], s["median_wait_seconds"], s["max_wait_seconds"]) == \
        (2.5, 2.5, 3.0)
    assert s["mean_slowdown"] == pytest.approx(1.02)  # (2 + 100) / 100; b has none
    assert s["mean_bounded_slowdown"] == pytest.approx((1.02 + 1) / 2)
    assert s["simulated_jobs_per_second"] == 1.5 and "reservations" not in s


def test_the_jobs_csv_writes_each_value_as_written_by_hand():
    from emulator.scheduling.metrics import jobs_csv

    a = Job(1, 0, 4, 100.0, requested=120.0, estimate=12.3456789, owner=Owner(user=3, group=2))
    b = Job(2, 5, 2, 0.0, estimate=1.0)
    c = Job(3, 6, 1, 30.0, estimate=30.0)
    a.start, a.end, a.reserved = 2.0, 102.0, 2.0
    b.start, b.end, b.killed = 7.5, 7.5, True
    lines = jobs_csv([a, b, c]).splitlines()
    assert lines[1:] == ["1,0,2,102,2,100,4,12.3457,120,2,1.02,1.02,0,0,3,2",
                         "2,5,7.5,7.5,2.5,0,2,1,,,,1,1,0,-1,-1",
                         "3,6,,,,,1,30,,,,,0,0,-1,-1"]


def test_fcfs_by_hand():
    # nothing passes J2: J3, J4 and J5 start when J2 ends at 15, together (1+2+1 procs)
    assert starts("fcfs", jobs_of(*QUEUE), 4) == [0, 10, 15, 15, 15]


def test_lwf_by_hand():
    # least work first: at 2 the queue is J3 (3 proc-s) then J2 (20); J3 starts at 2 (it
    # fits); at 3, J4 (8) is first but 2 procs are not free (J1 2 + J3 1), and it blocks; at
    # 4 J5 (20) queues behind it. At 5 J3 ends: J4 starts (5-9). At 9: J5 (20) and J2 (20),
    # J2 arrived first and J5's work ties... J2 (4 procs) needs J1's end; J5 is behind it.
    assert starts("lwf", jobs_of(*QUEUE), 4) == [0, 10, 2, 5, 15]


def test_easy_backfills_what_ends_before_the_shadow_time_only():
    # J2's reservation (shadow time) is 10, with no processors to spare then. J3 ends at 5
    # and J4 at 9: both backfill (J4 once J3 frees a processor). J5 would run to 24 and must
    # not backfill (at 4 one processor is free, but J2 needs all four at 10).
    jobs = schedule("easy", jobs_of(*QUEUE), 4)
    assert [j.start for j in jobs] == [0, 10, 2, 5, 15]
    assert jobs[1].reserved == 10  # the head's reservation, kept


# J1 (2 procs, 10 s) from 0; J2 (3 procs, 10 s) at 1 is the head, shadow 10 with 1 processor
# to spare; J3 (all 4, 10 s) at 2 is second; J4 (1 proc, 30 s) at 3; J5 (1 proc, 5 s) at 4.
SECOND = ((0, 2, 10), (1, 3, 10), (2, 4, 10), (3, 1, 30), (4, 1, 5))


def test_easy_delays_the_second_job_where_conservative_does_not():
    # EASY: J4 uses the spare processor (1 <= 1) and runs to 33; J2 is not delayed, but J3,
    # which holds no reservation, must wait for J4: 33.
    assert starts("easy", jobs_of(*SECOND), 4) == [0, 10, 33, 3, 4]
    # conservative: J3 was promised 20 (after J2) when it arrived; J4 would hold a processor
    # through it, so it waits for 30. J5 ends at 9, before anything, and backfills at 4.
    jobs = schedule("conservative", jobs_of(*SECOND), 4)
    assert [j.start for j in jobs] == [0, 10, 20, 30, 4]
    assert [j.reserved for j in jobs] == [0, 10, 20, 30, 4]


def test_compression_moves_no_reservation_later():
    # 6 processors. J1 (1 proc, 12 s) and J2 (2, 10 s) run from 0. J3 (5) and J4 (4) take
    # no time but hold a second's reservation each: 10 and 11; J5 (5 procs, 2 s) is promised
    # 12 and J6 (1 proc, 11 s) 11, beside J4. J3 ends at once, at 10: J4 and then J5 can
    # start at 10, but J5 would hold 5 of the 5 free processors through 11, where J6 was
    # promised one. Compression keeps J6's promise; J5 keeps its own, 12. Rebuilding the
    # reservations in queue order would have let J5 in first and pushed J6 to 12.
    jobs = schedule("conservative", jobs_of((0, 1, 12), (0, 2, 10), (0, 5, 0), (0, 4, 0),
                                            (0, 5, 2), (0, 1, 11)), 6)
    assert [j.start for j in jobs] == [0, 0, 10, 10, 12, 10]
    assert [j.reserved for j in jobs] == [0, 0, 10, 11, 12, 11]


def test_compression_repeats_until_nothing_moves():
    # 6 processors. J4 (4 procs) takes no time but was given a second: it ends at 25, a
    # second early. Queued then, in order: J8 (2 procs, 3 s, promised 26), J6 (all 6, 8 s,
    # promised 29, after J5), J5 (2 procs, 3 s, promised 26), J9 (promised 37). One pass
    # moves J8 up to 25; J6 cannot move while J5 holds 26-29; J5 moves up to 25. A second
    # pass moves J6 up to 28, where J5 and J8 now end (nothing happens at 29 any more).
    rows = [(0, 4, 9), (8, 4, 4), (1, 5, 12), (15, 4, 0), (17, 2, 3), (16, 6, 8), (14, 2, 5),
            (15, 2, 3), (18, 2, 10)]
    jobs = schedule("conservative", jobs_of(*rows), 6)
    assert jobs[5].reserved == 29 and jobs[5].start == 28
    assert [j.start for j in jobs] == [0, 21, 9, 25, 25, 28, 21, 25, 36]


def test_a_limit_holds_a_job_back_while_others_pass():
    site = SitePolicy(users={"7": Credential(maxproc=2)})
    jobs = jobs_of((0, 2, 10, {"user": 7}), (1, 1, 5, {"user": 7}), (2, 4, 5, {"user": 8}))
    # J2 would put user 7 at 3 processors: it waits for J1, and J3 passes it
    for policy in POLICIES:
        assert starts(policy, [j.fresh() for j in jobs], 8, site=site) == [0, 10, 2], policy


def test_priorities_order_the_queue():
    site = policy_from_maui("GROUPCFG[default] PRIORITY=0\nGROUPCFG[2] PRIORITY=100\n")
    jobs = jobs_of((0, 4, 10), (1, 4, 5, {"group": 1}), (2, 4, 5, {"group": 2}))
    for policy in POLICIES:
        assert starts(policy, [j.fresh() for j in jobs], 4, site=site) == [0, 15, 10], policy


def test_a_reservation_is_granted_late_and_held():
    # J1 holds all 4 processors until 100. At 10, 2 processors are asked for at 50 for 20 s:
    # the nearest feasible time is 100 (offset 50). J2 (3 procs) cannot run beside the
    # reservation and starts at 120; a second request for 1 processor at 200 gets 200.
    site = SitePolicy()
    reqs = [ReservationRequest(10, 50, 2, 20, id=1), ReservationRequest(10, 200, 1, 10, id=2)]
    jobs = jobs_of((0, 4, 100), (20, 3, 10))
    for policy in POLICIES:
        fresh = [ReservationRequest(r.submit_seconds, r.start_seconds, r.procs,
                                    r.duration_seconds, id=r.id) for r in reqs]
        assert starts(policy, [j.fresh() for j in jobs], 4, site=site,
                      reservations=fresh) == [0, 120], policy
        assert [r.granted_seconds for r in fresh] == [100, 200]
        assert [r.started_seconds for r in fresh] == [100, 200]
        assert [r.offset_seconds for r in fresh] == [50, 0]


def test_restartable_jobs_make_room_by_least_cost():
    # J1 and J2 (2 procs, 100 s each) fill the machine. At 10, 2 processors are asked for at
    # 20 for 10 s. Queue jobs can be restarted, so the request is granted at 20; there J2 has
    # done less work (2 x 19 against 2 x 20) and is terminated, requeued, and restarts at 30.
    site = SitePolicy(mode="restartable", restart_cost=(1.0, 0.1))
    req = ReservationRequest(10, 20, 2, 10, id=1)
    jobs = schedule("easy", jobs_of((0, 2, 100), (1, 2, 100)), 4, site=site,
                    reservations=[req])
    assert [j.start for j in jobs] == [0, 30]
    assert req.granted_seconds == 20 and req.started_seconds == 20
    assert jobs[1].restarts == 1 and jobs[1].end == 130


@pytest.mark.parametrize("protected, granted, job_starts", [
    (1.0, 250, [0, 100, 150, 200]), (0.5, 200, [0, 100, 150, 220]),
    (0.0, 100, [0, 120, 170, 220]), (None, 100, [0, 120, 170, 220])])
def test_a_reservation_may_not_delay_the_protected_share_of_the_queue(protected, granted,
                                                                      job_starts):
    # J1 holds all 4 processors until 100; J2, J3 and J4 (4 procs, 50 s) wait behind it. At
    # 10, 4 processors are asked for at 60 for 20 s. With the whole queue protected the
    # nearest time that delays none is 250 (J2, J3, J4 from 100, 150, 200); with half of it
    # (ceil(0.5 x 3) = 2 jobs) 200, and J4 follows the reservation; with none (or no site
    # policy) 100.
    site = None if protected is None else SitePolicy(queued_priority=protected)
    for policy in POLICIES:
        req = ReservationRequest(10, 60, 4, 20, id=1)
        got = starts(policy, jobs_of((0, 4, 100), (1, 4, 50), (2, 4, 50), (3, 4, 50)), 4,
                     site=site, reservations=[req])
        assert (got, req.granted_seconds, req.started_seconds) == \
            (job_starts, granted, granted), policy


def test_a_due_reservation_waits_for_a_job_that_overran_its_estimate():
    # J1 asks for 50 s and runs 100: the reservation for 4 processors asked for at 20 is
    # granted at 50, when J1 should have ended, and starts at 100, when it does.
    req = ReservationRequest(10, 20, 4, 10, id=1)
    jobs = schedule("easy", jobs_of((0, 4, 100, {"requested": 50})), 4, site=SitePolicy(),
                    reservations=[req], estimator=Requested())
    assert (jobs[0].end, req.granted_seconds, req.started_seconds) == (100, 50, 100)


@pytest.mark.parametrize("weights, victim, restart", [((1.0, 0.0), 3, (23, 223)),
                                                      ((0.0, 1.0), 1, (23, 48))])
def test_a_reservation_kills_the_one_job_of_least_cost(weights, victim, restart):
    # 4 processors full: J1 (1 proc, 0 to 25), J2 (2 procs, 9 to 23), J3 (1 proc, 8 to
    # 208). 1 processor asked for at 20 for 10 s. At 20, work done 20, 22 and 12
    # processor-seconds, work left 5, 6 and 188: weighing work done kills J3, weighing work
    # left kills J1; with a fifth processor free, one job is enough for the 2 asked for, and
    # it restarts when J2 ends, at 23.
    site = SitePolicy(mode="restartable", restart_cost=weights)
    req = ReservationRequest(10, 20, 2, 10, id=1)
    jobs = schedule("fcfs", jobs_of((0, 1, 25), (9, 2, 14), (8, 1, 200)), 5, site=site,
                    reservations=[req])
    assert [j.restarts for j in jobs] == [int(j.id == victim) for j in jobs]
    assert (jobs[victim - 1].start, jobs[victim - 1].end) == restart
    assert req.started_seconds == 20


def test_a_reservation_that_fits_starts_though_one_due_before_it_waits():
    # J1 (2 of 4 processors) asks for 50 s and runs 100. R1 (4 procs at 50 for 10 s) is
    # granted at 50, R2 (2 procs at 60 for 10 s) at 60, after R1. At 50 R1 waits for J1; at
    # 60 R2 fits beside J1 and starts; R1 starts when J1 ends, at 100.
    r1, r2 = ReservationRequest(10, 50, 4, 10, id=1), ReservationRequest(10, 60, 2, 10, id=2)
    schedule("easy", jobs_of((0, 2, 100, {"requested": 50})), 4, site=SitePolicy(),
             reservations=[r1, r2], estimator=Requested())
    assert [(r.granted_seconds, r.started_seconds) for r in (r1, r2)] == [(50, 100), (60, 60)]


def test_restartable_requests_see_the_reservations_and_their_applications_alone():
    # Restartable: J1 (2 of 4 procs, index 0) runs from 0 for 1,000 s and is no obstacle to a
    # grant. R1 (2 procs at 20 for 10 s), asked at 1, gets 20. R2 (4 procs at 25 for 10 s)
    # may not overlap R1: 30 (5 s off) rather than 10 (15 s off). R3, asked at 22 while R1's
    # application runs, for 2 procs at 22 for 5 s, fits beside it before R2: 22, and J1 is
    # killed for it. R4, asked then for 4 procs at 40, gets 40: R1's processors come back at
    # 30. R5, 4 procs at 22 for 5 s, cannot have R1's before 30: 45, after R4. J1 comes
    # back after R5, at 50 (it would overlap R2 at 27).
    site = SitePolicy(mode="restartable")
    reqs = [ReservationRequest(1, 20, 2, 10, id=1), ReservationRequest(1, 25, 4, 10, id=2),
            ReservationRequest(22, 22, 2, 5, id=3), ReservationRequest(22, 40, 4, 5, id=4),
            ReservationRequest(22, 22, 4, 5, id=5)]
    jobs = schedule("fcfs", jobs_of((0, 2, 1000)), 4, site=site, reservations=reqs)
    assert [(r.granted_seconds, r.started_seconds) for r in reqs] == \
        [(20, 20), (30, 30), (22, 22), (40, 40), (45, 45)]
    assert jobs[0].restarts == 1 and jobs[0].start == 50


def test_a_reservations_application_is_never_killed_for_another():
    # Restartable: R1's application holds 2 of 4 processors over [0, 100); J1 (2 procs)
    # runs from 1. R2, asked at 2 for 2 procs at 20, is granted 20; at 20 the application
    # would cost less to kill (2 x 20 done + 0.1 x 2 x 80 left = 56, J1: 234) but J1 is the
    # one killed, and restarts when R2's application ends, after its 4 s run, at 24.
    site = SitePolicy(mode="restartable")
    r1 = ReservationRequest(0, 0, 2, 100, id=1)
    r2 = ReservationRequest(2, 20, 2, 10, run_seconds=4, id=2)
    jobs = schedule("fcfs", jobs_of((1, 2, 1000)), 4, site=site, reservations=[r1, r2])
    assert (r1.started_seconds, r2.granted_seconds, r2.started_seconds) == (0, 20, 20)
    assert jobs[0].restarts == 1 and jobs[0].start == 24


def test_jobs_killed_for_a_reservation_go_back_in_queue_order():
    # Restartable, FCFS: J1-J4 (1 proc each, 25, 200, 300 and 400 s) fill 4 processors from
    # 0; J5 (2 procs) waits from 1. R1 (2 procs at 10 for 10 s) kills the two cheapest, J1
    # and J2 (work done 10 each, left 15 and 190), which go back ahead of J5 (submitted
    # earlier) and restart when R1 ends, at 20; J5 starts when J2 ends, at 220.
    site = SitePolicy(mode="restartable")
    req = ReservationRequest(5, 10, 2, 10, id=1)
    jobs = schedule("fcfs", jobs_of((0, 1, 25), (0, 1, 200), (0, 1, 300), (0, 1, 400),
                                    (1, 2, 10)), 4, site=site, reservations=[req])
    assert [j.restarts for j in jobs] == [1, 1, 0, 0, 0]
    assert [j.start for j in jobs] == [20, 20, 0, 0, 220]


def test_a_reservation_larger_than_the_machine_is_refused_by_name():
    with pytest.raises(ValueError, match="reservation 7 asks for 5 processors, more than "
                                         "the machine's 4"):
        Scheduler(4, "fcfs").request_reservation(ReservationRequest(0, 10, 5, 10, id=7), 0)


def test_a_reserved_job_held_by_its_users_limit_gives_way_at_once():
    # Conservative, 6 processors, user 1 limited to 2 (MAXPROC). J1 (user 2) holds all 6
    # until 10. J2 and J3 (user 1, 2 procs) and J4 (user 2, 2 procs) are all reserved at 10:
    # the profile knows no user limits. At 10 J2 starts; J3 is then held by the limit, and
    # the reservations are made again at once, so J4 starts at 10 too; J3 waits for J2's end.
    site = policy_from_maui("USERCFG[1] MAXPROC=2\n")
    jobs = schedule("conservative", jobs_of((0, 6, 10, {"user": 2}), (1, 2, 100, {"user": 1}),
                                            (2, 2, 5, {"user": 1}), (3, 2, 5, {"user": 2})),
                    6, site=site)
    assert [j.start for j in jobs] == [0, 10, 110, 10]
    assert [j.reserved for j in jobs] == [0, 10, 10, 10]


def test_kill_at_requested_and_estimates_from_requested_times():
    jobs = schedule("fcfs", jobs_of((0, 4, 50, {"requested": 20}), (1, 4, 5, {"requested": 5})),
                    4, estimator=Requested(), kill_at_requested=True)
    assert [j.start for j in jobs] == [0, 20]
    assert jobs[0].killed and jobs[0].end == 20 and not jobs[1].killed


# -- inputs are never changed --------------------------------------------------------------

def test_owned_jobs_are_scheduled_themselves_as_copies_would_be():
    """simulate_owned schedules the very jobs given (a trace run's, made for it alone),
    with the schedule simulate gives their copies."""
    from emulator.scheduling.simulate import simulate_owned

    nasa = read_swf(resolve_trace("nasa")).subset(np.arange(18239) < 2000)
    jobs = compress_arrivals(jobs_from_trace(nasa), 4)
    copied = simulate(jobs, Scheduler(128, "easy")).jobs
    owned = simulate_owned(jobs, Scheduler(128, "easy"))
    assert owned.jobs is jobs and all(j.start is not None for j in jobs)
    assert [(j.start, j.end) for j in jobs] == [(j.start, j.end) for j in copied]


SCHEDULERS = [(order, backfill) for order in ("fcfs", "sjf", "lwf", "fairshare")
              for backfill in ("none", "easy", "conservative")]


@pytest.mark.parametrize("order, backfill", SCHEDULERS)
def test_a_job_list_simulated_twice_gives_what_fresh_lists_give(order, backfill):
    """A simulation schedules copies: the list it is given stays as submitted, and the same
    list under a second policy gets that policy's schedule, not the first one's again."""
    nasa = read_swf(resolve_trace("nasa")).subset(np.arange(18239) < 2000)
    jobs = compress_arrivals(jobs_from_trace(nasa), 4)  # queues form
    given = [(j.id, j.submit, j.procs, j.run, j.estimate, j.start, j.end) for j in jobs]

    def run(job_list, o, b):
        return [(j.start, j.end) for j in simulate(job_list, Scheduler(
            128, order=o, backfill=b)).jobs]

    other = ("lwf", "conservative") if (order, backfill) != ("lwf", "conservative") else \
        ("fcfs", "none")
    first = run(jobs, *other)
    again = run(jobs, order, backfill)
    assert again == run(compress_arrivals(jobs_from_trace(nasa), 4), order, backfill)
    assert again != first  # the two policies differ on this list: the check can fail
    assert [(j.id, j.submit, j.procs, j.run, j.estimate, j.start, j.end)
            for j in jobs] == given


def test_a_watch_sees_every_instant_counts_the_jobs_done_and_stops_the_run():
    """Four jobs on 4 processors under FCFS, worked by hand: J1 holds the machine to 10, J2
    waits for it and ends at 20 as J3 arrives; J4 comes at 30."""
    jobs = jobs_of((0, 4, 10), (5, 2, 10), (20, 1, 5), (30, 1, 1))

    def run(stop=None):
        seen, done = [], []
        sim = simulate(jobs, Scheduler(4, "fcfs"), watch=Watch(
            stop=stop, progress=done.append,
            on_instant=lambda now, sched, arrived, started: seen.append(
                (now, [j.id for j in arrived], [j.id for j in started]))))
        return seen, done, [j.start for j in sim.jobs]

    seen, done, starts = run()
    assert seen == [(0, [1], [1]), (5, [2], []), (10, [], [2]), (20, [3], [3]), (25, [], []),
                    (30, [4], [4]), (31, [], [])]
    assert done == [4] and starts == [0, 10, 20, 30]
    seen, done, starts = run(stop=lambda now: now >= 20)
    assert [t for t, _, _ in seen] == [0, 5, 10, 20]
    assert done == [2] and starts == [0, 10, 20, None]


def test_the_stale_list_case_gives_easys_own_waits():
    # NASA with submit times halved: FCFS first, then EASY on the same list (75,422 s)
    nasa = read_swf(resolve_trace("nasa"))
    jobs = compress_arrivals(jobs_from_trace(nasa), 2)

    def mean_wait(sim):
        return sum(j.start - j.submit for j in sim.jobs) / len(sim.jobs)

    assert mean_wait(simulate(jobs, Scheduler(128, "fcfs"))) == pytest.approx(440_280, abs=1)
    assert mean_wait(simulate(jobs, Scheduler(128, "easy"))) == pytest.approx(75_422, abs=1)


def test_a_scheduled_job_is_refused_by_a_second_scheduler():
    (ran,) = simulate([Job(1, 0, 1, 5.0)], Scheduler(2, "fcfs")).jobs
    with pytest.raises(ValueError, match="job 1 was already scheduled"):
        Scheduler(2, "easy").submit(ran, 0.0)
    Scheduler(2, "easy").submit(ran.fresh(), 0.0)  # a fresh copy is welcome
    ended = Job(2, 0, 1, 5.0, estimate=5.0)
    ended.end = 5.0  # an end alone marks a schedule too
    for job, says in ((ran, "job 1 was already scheduled (start 0.0); submit a fresh copy "
                            "(Job.fresh) to schedule it again"),
                      (ended, "job 2 was already scheduled (start None); submit a fresh "
                              "copy (Job.fresh) to schedule it again"),
                      (Job(3, 0, 3, 5.0, estimate=5.0), "job 3 asks for 3 processors, more "
                                                        "than the machine's 2"),
                      (Job(4, 0, 1, 5.0), "job 4 has no estimate")):
        with pytest.raises(ValueError, match=f"^{re.escape(says)}$"):
            Scheduler(2, "easy").submit(job, 0.0)
    short = Job(5, 0, 1, 0.0, estimate=0.25)
    Scheduler(2, "easy").submit(short, 0.0)
    assert short.estimate == 1.0  # SWF's resolution: a job holds its processors a second


def test_a_job_past_its_estimate_gets_a_longer_one():
    # J1 is estimated at 10 s but runs 50. J2 (all 4) waits; J3 (1 proc, 30 s) asks to
    # backfill. At 12 EASY has extended J1's estimate (twice what it ran: to 24); J3 would
    # end at 42 > 24, with nothing to spare: it waits, and J2 is not delayed past J1's end.
    est = Function(lambda job, now: 10.0 if job.id == 1 else job.run)
    jobs = jobs_of((0, 2, 50), (1, 4, 5), (12, 1, 30))
    assert starts("easy", jobs, 4, estimator=est) == [0, 50, 55]


# -- the policy file ----------------------------------------------------------------------


def test_policy_files_toml_and_maui(tmp_path):
    toml = tmp_path / "site.toml"
    toml.write_text('[groups.default]\npriority = 100\n[groups.atlas]\npriority = 300\n'
                    'maxproc = 4\n[users.svens]\npriority = 100\nmaxproc = 2\n'
                    '[reservations]\nmode = "restartable"\n[[reservations.requests]]\n'
                    'submit_seconds = 0\nstart_seconds = 3600\nprocs = 32\n'
                    'duration_seconds = 7200\n')
    site = read_policy_file(toml)
    cfg = tmp_path / "maui.cfg"
    cfg.write_text("GROUPCFG[default] PRIORITY=100\nGROUPCFG[atlas] PRIORITY=300 MAXPROC=4\n"
                   "USERCFG[svens] PRIORITY=100 MAXPROC=2   # a comment\n")
    maui = read_policy_file(cfg)
    for s in (site, maui):
        job = Job(1, 0, 1, 1, owner=Owner(user="svens", group="atlas"))
        assert s.priority(job) == 400 and s.maxproc(job) == (2, 4)
        other = Job(2, 0, 1, 1, owner=Owner(user="bob", group="cms"))
        assert s.priority(other) == 100 and s.maxproc(other) == (None, None)
    assert site.mode == "restartable" and site.reservations[0].procs == 32


@pytest.mark.parametrize("text, where", [
    ("[groups.a]\npriority = 'high'\n", "groups.a.priority"),
    ("[groups.a]\nmaxproc = 0\n", "groups.a.maxproc"),
    ("[users.a]\nspeed = 1\n", "users.a"),
    ("[reservations]\nmode = 'sometimes'\n", "reservations.mode"),
    ("[[reservations.requests]]\nsubmit_seconds = 0\nstart_seconds = 10\nprocs = 2\n",
     "reservations.requests[0]"),
    ("[queues]\n", "queues"),
    ("[groups\n", "malformed TOML"),
])
def test_bad_policy_files_name_the_field(tmp_path, text, where):
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(InputFileError, match=re_escape(where)):
        read_policy_file(path)


def re_escape(text):
    import re

    return re.escape(text)


def test_bad_maui_lines_name_the_line(tmp_path):
    path = tmp_path / "maui.cfg"
    path.write_text("GROUPCFG[a] PRIORITY=1\nBACKFILLPOLICY FIRSTFIT\n")
    with pytest.raises(InputFileError, match="line 2"):
        read_policy_file(path)
    path.write_text("USERCFG[a] MAXPROC=two\n")
    with pytest.raises(InputFileError, match="line 1, MAXPROC"):
        read_policy_file(path)


# -- the profile ----------------------------------------------------------------------------


def test_profile_earliest_nearest_and_fits():
    p = Profile(0.0, 1, [(10.0, 1), (20.0, 2)])  # 1 free, 2 from 10, 4 from 20
    assert p.earliest(2, 5, 0) == 10 and p.earliest(3, 5, 0) == 20 and p.earliest(5, 1, 0) is None
    p.reserve(12.0, 3.0, 2)  # 0 free on [12, 15)
    assert p.earliest(1, 5, 10) == 15 and p.earliest(2, 2, 10) == 10 and not p.fits(1, 3, 11)
    assert p.nearest(2, 2, target=14, after=0) == 15  # 1 s late beats 4 s early (10)
    assert p.nearest(2, 2, target=16, after=0) == 16
    full = Profile(0.0, 4)
    full.reserve(10.0, 10.0, 4)  # nothing free on [10, 20)
    assert full.nearest(2, 2, target=11, after=0) == 8  # ends as the block begins
    assert full.nearest(2, 2, target=16, after=0) == 20


# -- properties on random workloads ---------------------------------------------------------

job_rows = st.lists(st.tuples(st.integers(0, 40), st.integers(1, 8), st.integers(0, 25)),
                    min_size=1, max_size=14)


def _check_capacity(jobs, processors):
    events = sorted([(j.start, 1, j.procs) for j in jobs] + [(j.end, 0, -j.procs) for j in jobs])
    used = 0
    for _, _, delta in events:
        used += delta
        assert used <= processors


@settings(max_examples=150, deadline=None)
@given(rows=job_rows, processors=st.integers(1, 8), policy=st.sampled_from(POLICIES))
def test_no_schedule_uses_more_processors_than_exist(rows, processors, policy):
    jobs = schedule(policy, jobs_of(*[(s, min(p, processors), r) for s, p, r in rows]),
                    processors)
    assert all(j.start is not None and j.start >= j.submit for j in jobs)
    _check_capacity(jobs, processors)


@settings(max_examples=150, deadline=None)
@given(rows=job_rows, processors=st.integers(1, 8))
def test_fcfs_starts_jobs_in_arrival_order(rows, processors):
    jobs = schedule("fcfs", jobs_of(*[(s, min(p, processors), r) for s, p, r in rows]),
                    processors)
    order = sorted(jobs, key=lambda j: (j.submit, j.index))
    assert all(a.start <= b.start for a, b in zip(order, order[1:]))


@settings(max_examples=150, deadline=None)
@given(rows=job_rows, processors=st.integers(1, 8))
def test_easy_never_delays_the_queue_heads_reservation(rows, processors):
    # estimates: the actual run times
    jobs = schedule("easy", jobs_of(*[(s, min(p, processors), r) for s, p, r in rows]),
                    processors)
    assert all(j.start <= j.reserved for j in jobs if j.reserved is not None)


@settings(max_examples=300, deadline=None)
@given(rows=job_rows, processors=st.integers(1, 8), scale=st.sampled_from([1.0, 1.5, 3.0]))
def test_conservative_never_starts_a_job_after_its_reservation(rows, processors, scale):
    """Estimates at or above the run times: jobs end on time or early (compression), and
    none starts later than the reservation it was given at arrival."""
    est = Function(lambda job, now: math.ceil(job.run * scale))
    jobs = schedule("conservative", jobs_of(*[(s, min(p, processors), r) for s, p, r in rows]),
                    processors, estimator=est)
    assert all(j.reserved is not None and j.start <= j.reserved for j in jobs)


class GeneralScheduler(Scheduler):
    """Every policy on the general profile path (the one advance reservations use)."""

    def schedule(self, now):
        self._extend_overruns(now)
        started = self._general(now, DEPTH[self.backfill])
        if started:
            self._drop_started(len(started))
        return started


@settings(max_examples=150, deadline=None)
@given(rows=job_rows, processors=st.integers(1, 8), policy=st.sampled_from(POLICIES),
       scale=st.sampled_from([0.5, 1.0, 2.0]))
def test_fast_paths_agree_with_the_profile_path(rows, processors, policy, scale):
    """FCFS, LWF and EASY's own code, and conservative's incremental reservations, give the
    schedule the general profile algorithm gives (estimates off by a factor included). The
    profile path plans conservative afresh at every event, which compression does not (it
    moves no job later): the two agree where no job ends before or after its estimate."""
    rows = [(s, min(p, processors), r) for s, p, r in rows]
    if policy == "conservative":
        rows, scale = [(s, p, max(r, 1)) for s, p, r in rows], 1.0
    est = Function(lambda job, now: math.ceil(job.run * scale))
    a, b = jobs_of(*rows), jobs_of(*rows)
    a = simulate(a, Scheduler(processors, policy), estimator=est).jobs
    b = simulate(b, GeneralScheduler(processors, policy), estimator=est).jobs
    assert [j.start for j in a] == [j.start for j in b]


def test_dropping_stale_reservations_changes_no_schedule():
    """Conservative backfilling with early ends on a long queue (400 jobs on 16 processors,
    every other job's estimate three times its run, the rest exact, so that some
    reservations are reached without moving): the reservations' heap pruned at every
    compression, never, or as it is by default gives the same schedule, and no job starts
    after the reservation it got at arrival."""
    rng = np.random.default_rng(7)
    rows = [(int(t), int(rng.integers(1, 17)), int(rng.integers(1, 400)))
            for t in np.cumsum(rng.integers(0, 20, 400))]
    est = Function(lambda job, now: job.run * (3 if job.id % 2 else 1))
    got = []
    for allowed in (-10 ** 9, 10 ** 9, None):
        scheduler = Scheduler(16, "conservative")
        if allowed is not None:
            scheduler.stale_slots_allowed = allowed
        jobs = simulate(jobs_of(*rows), scheduler, estimator=est).jobs
        assert all(j.start <= j.reserved for j in jobs)
        got.append([j.start for j in jobs])
    assert got[0] == got[1] == got[2]
    assert max(j.start - j.submit for j in jobs) > 5000  # a long queue


def test_a_scheduler_says_what_it_runs_and_refuses_what_it_cannot():
    """No policy given: EASY; an order alone runs without backfilling, a rule alone in
    arrival order; unknown names are refused with the choices listed."""
    assert [Scheduler(4, **kw).policy for kw in ({}, {"order": "sjf"}, {"backfill": "easy"},
                                                  {"order": "lwf"}, {"policy": "fcfs"})] == \
        ["easy", "sjf+none", "easy", "lwf", "fcfs"]
    for kw, says in (({"policy": "nope"}, "unknown policy 'nope'; choose from fcfs, lwf, easy, "
                      "conservative"),
                     ({"backfill": "x"}, "unknown backfilling 'x'; choose from none, easy, "
                      "conservative, slurm")):
        with pytest.raises(ValueError, match=f"^{re.escape(says)}$"):
            Scheduler(4, **kw)
    with pytest.raises(ValueError, match="^processors must be >= 1, got 0$"):
        Scheduler(0)


def _bookkeeping(sched):
    """What a scheduler counts, recounted from its queue and running jobs."""
    waiting = sched.waiting()
    stale = [job for _, job in sched.queue if job.start is not None]
    by_owner = (collections.Counter(), collections.Counter())
    for job in sched.running:
        by_owner[0][job.user] += job.procs
        by_owner[1][job.group] += job.procs
    assert not sched.queue or sched.queue[0][1].start is None  # started heads go at once
    assert len(stale) <= 32 or 4 * len(stale) <= len(sched.queue)  # compacted past that
    assert [k for k, _ in sched.queue] == sorted(k for k, _ in sched.queue)
    assert sched.free == sched.total - sum(job.procs for job in sched.running)
    assert sched.releases == sorted((j.est_end, j.index, j) for j in sched.running)
    if sched._limits:
        assert {u: n for u, n in sched.used_users.items() if n} == dict(by_owner[0])
        assert {g: n for g, n in sched.used_groups.items() if n} == dict(by_owner[1])
    assert sched._sizes == dict(collections.Counter(job.procs for job in waiting))
    if sched._ranks is not None:
        assert sched._groups == dict(collections.Counter(map(sched.order.group, waiting)))
    return len(waiting)


@pytest.mark.parametrize("kw", [dict(policy="fcfs"), dict(policy="easy"),
                                dict(policy="conservative"),
                                dict(order="fairshare", backfill="easy"),
                                dict(order="sjf", backfill="slurm"),
                                dict(policy="easy", site=SitePolicy(
                                    users={"1": Credential(maxproc=8)},
                                    groups={"0": Credential(maxproc=12, priority=3)}))],
                         ids=["fcfs", "easy", "conservative", "fairshare", "slurm", "limits"])
def test_what_the_scheduler_counts_matches_its_queue_at_every_instant(kw):
    """Free processors, the releases, the queued sizes and groups, the users' and groups'
    processors in use, and the started jobs left in the queue (at most 32, or a quarter of
    it) agree at every instant with the queue and the running jobs, in the scheduler and in
    copies of it; 600 jobs on 16 processors, a long queue, estimates up to 3x too long."""
    rng = np.random.default_rng(11)
    rows = [(int(t), int(rng.integers(1, 17)), int(rng.integers(1, 400)),
             {"user": int(rng.integers(0, 4)), "group": int(rng.integers(0, 3))})
            for t in np.cumsum(rng.integers(0, 12, 600))]
    est = Function(lambda job, now: job.run * (1 + job.id % 3))
    longest = []

    def look(now, sched, arrived, started):
        longest.append(_bookkeeping(sched))
        if len(longest) % 50 == 0:
            _bookkeeping(sched.snapshot(now)[0])

    simulate(jobs_of(*rows), Scheduler(16, **kw), estimator=est, watch=Watch(on_instant=look))
    assert max(longest) > 150  # the queue grew long enough to be compacted


def test_the_scheduler_wakes_for_reservations_and_backfill_passes_by_hand():
    """4 processors, conservative. J1 (all 4, estimated 100) runs; J2 (2) is reserved at
    100: the scheduler wakes then. An advance reservation granted at 170 wakes nothing
    earlier; J3 of a user of higher priority enters ahead of J2 and, until the pass makes the
    reservations again, only the advance reservation is known. J1 ends at 40: J2 and J3
    start (their reservations are stale). J5 waits for J3's end at 45, starts, and runs past
    170 on 2 processors: the advance reservation tried at 170 waits and wakes nothing more.
    Slurm's backfill wakes on its 30-s grid when something waits, not after a pass."""
    sched = Scheduler(4, "conservative", site=SitePolicy(users={"9": Credential(priority=5)}))
    assert sched.next_wakeup() is None
    j1, j2 = Job(1, 0, 4, 40, estimate=100), Job(2, 0, 2, 50, estimate=50, index=1000)
    for job in (j1, j2):
        sched.submit(job, 0)
    assert sched.schedule(0) == [j1] and sched.next_wakeup() == 100
    req = ReservationRequest(0, 170, 4, 10, id=1)
    assert sched.request_reservation(req, 0) == 170 and sched.next_wakeup() == 170
    sched.schedule(0)
    assert sched.next_wakeup() == 100
    j3 = Job(3, 1, 1, 5, estimate=5, owner=Owner(user=9))
    sched.submit(j3, 1)
    assert sched.next_wakeup() == 170
    assert sched.schedule(1) == [] and sched.next_wakeup() == 100
    sched.finish(j1, 40)
    assert sched.schedule(40) == [j3, j2] and sched.next_wakeup() == 170
    j5 = Job(5, 41, 2, 500, estimate=10)
    sched.submit(j5, 41)
    assert sched.schedule(41) == [] and sched.next_wakeup() == 45
    sched.finish(j3, 45)
    assert sched.schedule(45) == [j5] and sched.next_wakeup() == 170
    sched.finish(j2, 90)
    assert sched.start_reservations(170) == ([], []) and sched.next_wakeup() is None
    slurm = Scheduler(4, order="fcfs", backfill="slurm",
                      slurm=BackfillParams(86400.0, 60.0, 500, 30.0))
    a, b = Job(1, 0, 4, 100, estimate=100), Job(2, 1, 4, 10, estimate=10)
    slurm.submit(a, 0)
    assert slurm.schedule(0) == [a] and slurm.next_wakeup() is None
    slurm.submit(b, 1)
    assert slurm.schedule(1) == [] and slurm.next_wakeup() == 30
    assert slurm.schedule(30) == [] and slurm.next_wakeup() is None
    slurm.finish(a, 100)
    assert slurm.schedule(100) == [b] and slurm.next_wakeup() is None


@pytest.mark.parametrize("policy", ["easy", "conservative"])
def test_maxproc_holds_a_job_until_its_owners_jobs_end_by_hand(policy):
    """8 processors. User 1 may hold 2 of them, group 7 three. J1 (user 1, 2 processors)
    and J4 (group 7, 3) start at 0, each exactly at its limit; J2 (user 1) and J5 (group 7)
    wait with 3 processors free until J1 ends early, at 50, and J4 at 60."""
    site = SitePolicy(users={"1": Credential(maxproc=2)}, groups={"7": Credential(maxproc=3)})
    sched = Scheduler(8, policy, site=site)
    j1, j2 = (Job(i, 0, 2, run, estimate=est, owner=Owner(user=1))
              for i, run, est in ((1, 50, 100), (2, 10, 10)))
    j4, j5 = (Job(i, 0, procs, run, estimate=run, owner=Owner(user=i, group=7))
              for i, procs, run in ((4, 3, 60), (5, 1, 10)))
    for job in (j1, j2, j4, j5):
        sched.submit(job, 0)
    assert sched.schedule(0) == [j1, j4] and sched.free == 3
    sched.finish(j1, 50)
    assert sched.schedule(50) == [j2]
    sched.finish(j4, 60)
    assert sched.schedule(60) == [j5]


def test_easys_shadow_time_and_the_processors_left_then_by_hand():
    """8 processors, all busy: 3 and 2 until an estimated 100, 3 until 200. A job of 5 can
    start at 100 with none to spare, one of 4 with 1; 6 and 8 wait for 200; 9 never fit;
    none are needed at once. Asked at 150, after the first two ends were due (no pass has
    extended them), the shadow time is now. A head of 5 queued on the full machine is
    given 100; once 2 processors are free (at 50), jobs of 1 and 2 start now with 1 and 0
    to spare."""
    sched = Scheduler(8, "easy")
    jobs = [Job(i, 0, procs, 500, estimate=est)
            for i, (procs, est) in enumerate(((3, 100), (2, 100), (3, 200)), start=1)]
    for job in jobs:
        sched.submit(job, 0)
    assert sched.schedule(0) == jobs and sched.free == 0
    assert [sched.shadow(now, procs) for now, procs in (
        (10, 5), (10, 4), (10, 6), (10, 8), (10, 9), (10, 0), (150, 5))] == \
        [(100, 0), (100, 1), (200, 2), (200, 0), (math.inf, 0), (10, 0), (150, 0)]
    head = Job(4, 10, 5, 10, estimate=10)
    sched.submit(head, 10)
    assert sched.schedule(10) == [] and head.reserved == 100
    sched.finish(jobs[1], 50)
    assert sched.schedule(50) == [] and sched.free == 2
    assert [sched.shadow(50, procs) for procs in (1, 2, 5)] == [(50, 1), (50, 0), (100, 0)]


def test_easy_backfills_past_a_held_job_a_job_that_ends_at_the_shadow_time():
    """6 processors; R (3, estimated to 100) and user 1's U (1) run. The head H (4) waits
    for 100, with 1 to spare then. X (user 1, at its MAXPROC of 1) is passed over; E (1
    processor, 90 s from 10) ends exactly at the shadow time and starts without the spare
    one, which F (1, 200 s) then takes."""
    sched = Scheduler(6, "easy", site=SitePolicy(users={"1": Credential(maxproc=1)}))
    running = [Job(1, 0, 3, 100, estimate=100), Job(5, 0, 1, 500, estimate=500,
                                                    owner=Owner(user=1))]
    for job in running:
        sched.submit(job, 0)
    assert sched.schedule(0) == running
    h, x = Job(2, 10, 4, 10, estimate=10), Job(3, 10, 1, 5, estimate=5, owner=Owner(user=1))
    e, f = (Job(i, 10, 1, run, estimate=run, owner=Owner(user=2)) for i, run in ((4, 90),
                                                                                (6, 200)))
    for job in (h, x, e, f):
        sched.submit(job, 10)
    assert sched.shadow(10, 4) == (100, 1)
    assert sched.schedule(10) == [e, f] and h.reserved == 100


def test_a_running_job_is_extended_when_its_estimate_is_reached():
    """Estimated at 10 s, J1 runs on: at 10 its estimate becomes twice what it has run
    (20), at 15 it is left alone, at 20 it doubles again (40); a job of one processor then
    cannot backfill past it (4 processors, the queue head needs all of them)."""
    sched = Scheduler(4, "easy")
    j1 = Job(1, 0, 3, 50, estimate=10)
    sched.submit(j1, 0)
    sched.schedule(0)
    ends = []
    for now in (10, 15, 20):
        sched.schedule(now)
        ends.append(j1.est_end)
    assert ends == [20, 20, 40]
    head, short = Job(2, 20, 4, 10, estimate=10), Job(3, 20, 1, 25, estimate=25)
    sched.submit(head, 20)
    sched.submit(short, 20)
    assert sched.schedule(20) == [] and head.reserved == 40


def test_the_reservations_heap_stays_within_twice_the_queue():
    """The same long queue: stale entries of the reservations' heap are dropped as it goes,
    so it never holds more than twice the longest queue plus the allowance; never pruned, it
    grows to many times that."""
    rng = np.random.default_rng(7)
    rows = [(int(t), int(rng.integers(1, 17)), int(rng.integers(1, 400)))
            for t in np.cumsum(rng.integers(0, 20, 400))]
    est = Function(lambda job, now: job.run * (3 if job.id % 2 else 1))
    for allowed in (None, 10 ** 9):
        scheduler, heap, queue = Scheduler(16, "conservative"), [], []
        if allowed is not None:
            scheduler.stale_slots_allowed = allowed

        def look(now, sched, arrived, started):
            heap.append(len(sched._slots))
            queue.append(len(sched.queue))

        simulate(jobs_of(*rows), scheduler, estimator=est, watch=Watch(on_instant=look))
        bound = 2 * max(queue) + Scheduler.stale_slots_allowed
        assert (max(heap) <= bound) == (allowed is None), (max(heap), bound)


def test_a_compression_that_finds_a_reservation_past_asks_for_a_rebuild():
    """A scheduler called late (a live cluster's pass after a busy spell): B's reservation
    at 100 has passed by 120, when the compression for A's early end runs. It sets nothing
    and says so; the pass then makes every reservation again and B starts at once."""
    a, b, c = jobs_of((0, 4, 40), (0, 4, 50), (0, 4, 50))
    a.estimate, b.estimate, c.estimate = 100, 50, 50
    scheduler = Scheduler(4, "conservative")
    for job in (a, b, c):
        scheduler.submit(job, 0)
    assert scheduler.schedule(0) == [a] and (b.slot, c.slot) == (100, 150)
    scheduler.finish(a, 40)
    assert scheduler._compress_slots(120) is False and (b.slot, c.slot) == (100, 150)
    scheduler._compress = True
    assert scheduler.schedule(120) == [b] and c.slot == 170
    d = jobs_of((130, 4, 10))[0]
    d.estimate = 10
    scheduler.submit(d, 130)
    scheduler.finish(b, 130)  # early: a compression with nothing past moves c and d up
    assert scheduler._compress_slots(130) is True and (c.slot, d.slot) == (130, 180)


# -- the command -----------------------------------------------------------------------------


def _trace(tmp_path, rows, requested=False):
    lines = ["; MaxProcs: 4\n"]
    for i, (submit, procs, run) in enumerate(rows, start=1):
        req = run * 2 if requested else -1
        lines.append(f"{i} {submit} -1 {run} {procs} -1 -1 {procs} {req} -1 1 1 1 1 -1 -1 -1 -1\n")
    path = tmp_path / "t.swf"
    path.write_text("".join(lines))
    return str(path)


def test_schedule_command_writes_the_schedule(tmp_path, capsys):
    trace = _trace(tmp_path, QUEUE)
    out = tmp_path / "out"
    assert main(["schedule", trace, "--policy", "easy", "--out", str(out), "--no-progress",
                 "--gantt"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    for key in ("policy", "jobs", "dropped_jobs", "utilization", "mean_wait_seconds",
                "mean_bounded_slowdown", "simulated_jobs_per_second"):
        assert key in summary
    assert summary["policy"] == "easy" and summary["jobs"] == 5
    waits = read_swf(out / "schedule.swf").column("wait").tolist()
    assert waits == [0, 9, 0, 2, 11]  # starts 0, 10, 2, 5, 15 minus submits
    assert summary["mean_wait_seconds"] == pytest.approx(22 / 5)
    assert (out / "gantt.png").stat().st_size > 5000 and (out / "jobs.csv").exists()
    assert main(["schedule", trace, "--policy", "all", "--compress-arrivals", "2",
                 "--out", str(tmp_path / "all"), "--no-progress"]) == 0
    assert not (tmp_path / "all" / "easy" / "gantt.png").exists()  # only on request
    both = json.loads((tmp_path / "all" / "summary.json").read_text())["policies"]
    assert [s["policy"] for s in both] == list(POLICIES)
    assert read_swf(tmp_path / "all" / "fcfs" / "schedule.swf").column("submit").tolist() == \
        [0, 0, 1, 1, 2]


def test_the_scheduled_swf_has_waits_and_a_killed_jobs_run_and_status(tmp_path):
    """Field 3 from the schedule (-1: never started), field 2 the submit time the schedule
    saw; a job killed at its requested time ran that long (field 4) and failed (status 0)."""
    from emulator.scheduling.metrics import scheduled_trace, write_scheduled_swf
    from emulator.workload.swf import Trace, format_swf

    rows = [[k, 10 * k, -1, 50, 2, -1, -1, 2, 30, -1, 1, 1, 1, -1, 1, -1, -1, -1]
            for k in (1, 2, 3, 4)]
    jobs = jobs_from_trace(Trace(rows), 2.0)  # submits 5, 10, 15, 20
    jobs[0].start, jobs[0].end = 9.0, 59.0
    jobs[1].start, jobs[1].end, jobs[1].killed = 12.5, 42.5, True
    jobs[3].killed = True  # killed, requeued, and not started again
    trace = Trace(rows)
    data = scheduled_trace(trace, jobs).data
    assert data[:, 1].tolist() == [5, 10, 15, 20]
    assert data[:, 2].tolist() == [4, 2.5, -1, -1]
    assert data[:, 3].tolist() == [50, 30, 50, 50] and data[:, 10].tolist() == [1, 0, 1, 1]
    # the file is written without the copy, and holds what the copy holds
    write_scheduled_swf(tmp_path / "s.swf", trace, jobs)
    assert (tmp_path / "s.swf").read_text() == format_swf(scheduled_trace(trace, jobs))
    assert trace.data[:, 2].tolist() == [-1] * 4  # the trace given, as it was
    _files_are_the_same_from_columns_read_once(tmp_path, trace, jobs)


def _files_are_the_same_from_columns_read_once(tmp_path, trace, jobs):
    """The summary and the files of ``jobs`` (some never started, some killed) given
    job_columns(jobs), as nodesel schedule gives them, are the ones made without."""
    from emulator.scheduling.batsim_out import write_batsim_jobs_csv
    from emulator.scheduling.metrics import (job_columns, summarize, write_jobs_csv,
                                             write_scheduled_swf)
    from emulator.scheduling.simulate import Simulation

    assert any(j.start is None for j in jobs) and any(j.killed and j.start for j in jobs)
    columns = job_columns(jobs)
    sim = Simulation(jobs, [], 4, "easy", 1.0)
    assert summarize(sim, columns=columns) == summarize(sim)
    writers = {"jobs.csv": lambda path, **c: write_jobs_csv(path, jobs, **c),
               "schedule.swf": lambda path, **c: write_scheduled_swf(path, trace, jobs, **c),
               "batsim.csv": lambda path, **c: write_batsim_jobs_csv(path, jobs, 4, **c)}
    for name, write in writers.items():
        write(tmp_path / name)
        write(tmp_path / f"read-once-{name}", columns=columns)
        assert (tmp_path / f"read-once-{name}").read_bytes() == \
            (tmp_path / name).read_bytes(), name


@pytest.mark.parametrize("argv, message", [
    (["--policy", "sjf"], "unknown policy 'sjf'"),
    (["--estimates", "requested"], "no job has a requested time"),
    (["--estimates", "psychic"], "unknown estimates 'psychic'"),
    (["--reservation-fraction", "2"], "must lie in [0, 1]"),
])
def test_schedule_command_rejects_bad_requests(tmp_path, argv, message, capsys):
    trace = _trace(tmp_path, QUEUE)
    assert main(["schedule", trace, "--out", str(tmp_path / "o"), *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_schedule_command_with_reservations_and_requested_times(tmp_path):
    trace = _trace(tmp_path, [(i * 3, 1 + i % 4, 5 + i % 7) for i in range(40)], requested=True)
    out = tmp_path / "r"
    assert main(["schedule", trace, "--policy", "conservative", "--estimates", "requested",
                 "--kill-at-requested", "--reservation-fraction", "0.2", "--seed", "3",
                 "--out", str(out), "--no-progress"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["reservations"]["requested"] == 8 and summary["reservations"]["granted"] == 8
    assert summary["jobs"] == 32 and summary["estimates"] == "maximum"


def test_schedule_command_with_a_run_time_predictor(tmp_path):
    """--estimates last2: a job's estimate is the mean of its user's last two completed
    jobs. User 1's jobs all run 10 s, user 2's 40 s, so once two of a user's jobs have
    ended (the trace is spread out enough for that) every estimate is exact; before, the
    estimate is a fallback."""
    rows = [(i * 50, 1 + i % 4, 10 if i % 2 == 0 else 40) for i in range(30)]
    lines = ["; MaxProcs: 4\n"]
    for i, (submit, procs, run) in enumerate(rows, start=1):
        user = 1 if run == 10 else 2
        lines.append(f"{i} {submit} -1 {run} {procs} -1 -1 {procs} -1 -1 1 {user} 1 1 1 -1 -1 "
                     "-1\n")
    trace = tmp_path / "u.swf"
    trace.write_text("".join(lines))
    out = tmp_path / "p"
    assert main(["schedule", str(trace), "--policy", "easy", "--estimates", "last2",
                 "--out", str(out), "--no-progress"]) == 0
    assert json.loads((out / "summary.json").read_text())["estimates"] == "last2"
    import csv
    with open(out / "jobs.csv") as f:
        jobs = list(csv.DictReader(f))
    # the first job has no history and no requested time: the default fallback, an hour
    assert float(jobs[0]["estimate_seconds"]) == 3600
    late = jobs[8:]
    assert late and all(float(j["estimate_seconds"]) == float(j["run_seconds"])
                        for j in late)


# -- the profile in C against its reference in numpy ---------------------------------------

profile_ops = st.lists(st.tuples(
    st.sampled_from(["reserve", "earliest", "earlier", "fits", "advance", "compact",
                     "release", "nearest"]),
    st.integers(0, 40), st.integers(1, 20), st.integers(1, 8)), max_size=40)


@settings(max_examples=300, deadline=None)
@given(ops=profile_ops, releases=st.lists(st.tuples(st.integers(0, 50), st.integers(1, 4)),
                                          max_size=5))
def test_the_c_profile_answers_as_its_numpy_reference(ops, releases):
    from emulator.scheduling.profile import Profile
    from emulator.scheduling.pyprofile import PyProfile

    if Profile is PyProfile:
        pytest.skip("the C profile is not built")
    c, py = Profile(0.0, 8, releases), PyProfile(0.0, 8, releases)
    now = 0.0
    for op, t, d, procs in ops:
        if op == "reserve":
            got = [p.reserve(float(max(t, now)), float(d), procs) for p in (c, py)]
        elif op == "release":
            got = [p.add_release(float(max(t, now)), procs) for p in (c, py)]
        elif op == "earliest":
            got = [p.earliest(procs, float(d), float(t)) for p in (c, py)]
        elif op == "earlier":
            got = [p.earlier_start(procs, float(d), float(max(t, now))) for p in (c, py)]
        elif op == "fits":
            got = [p.fits(procs, float(d), float(max(t, now))) for p in (c, py)]
        elif op == "nearest":
            got = [p.nearest(procs, float(d), float(t), now) for p in (c, py)]
        elif op == "advance":
            now = max(now, float(t))
            got = [p.advance(now) for p in (c, py)]
        else:
            got = [p.compact() for p in (c, py)]
        assert got[0] == got[1], op
        assert list(c.times) == [float(x) for x in py.times]
        assert list(c.free) == [int(x) for x in py.free]


def _queued(rows, c, py):
    """(procs, estimate, slot) of each (procs, estimate, reserved) row in queue order: the
    reserved ones given their earliest slot on both profiles, the others none (new)."""
    jobs = []
    for procs, estimate, reserved in rows:
        slot = None
        if reserved:
            slot = py.earliest(procs, float(estimate), 0.0)
            for p in (c, py):
                p.reserve(slot, float(estimate), procs)
        jobs.append((procs, float(estimate), slot))
    return jobs


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(1, 8), st.integers(1, 30), st.booleans()),
                     min_size=1, max_size=12),
       ends=st.lists(st.tuples(st.integers(0, 40), st.integers(1, 4)), max_size=4))
def test_the_c_compression_moves_reservations_as_its_reference(rows, ends):
    from emulator.scheduling.profile import Profile
    from emulator.scheduling.pyprofile import PyProfile

    if Profile is PyProfile:
        pytest.skip("the C profile is not built")
    c, py = Profile(0.0, 8, ends), PyProfile(0.0, 8, ends)
    jobs = _queued(rows, c, py)
    for p in (c, py):  # a job ends early: its processors come back
        p.reserve(0.0, 5.0, -2)
    assert c.compress(jobs, 1.0) == py.compress(jobs, 1.0)
    assert list(c.times) == [float(x) for x in py.times]
    assert list(c.free) == [int(x) for x in py.free]


@pytest.mark.parametrize("procs", [2, 1])
def test_compression_moves_a_job_into_a_hole_before_a_full_stretch(procs):
    """4 processors, all running until 10. B (4 procs, 5 s) is promised 10, C (``procs``,
    5 s) 15, after it. A running job of 2 ends at 0, 10 s early: C fits in [0, 5), before
    B's full stretch, with exactly as many processors free as it needs (2) or more (1);
    B cannot move."""
    from emulator.scheduling.profile import Profile
    from emulator.scheduling.pyprofile import PyProfile

    for kind in {Profile, PyProfile}:
        profile = kind(0.0, 0, [(10.0, 4)])  # none free now, 4 at 10
        profile.reserve(10.0, 5.0, 4)
        profile.reserve(15.0, 5.0, procs)
        profile.reserve(0.0, 10.0, -2)
        assert profile.compress([(4, 5.0, 10.0), (procs, 5.0, 15.0)], 0.0) == [False, 0.0], \
            kind
        assert list(profile.times)[:3] == [0.0, 5.0, 10.0], kind
        assert [int(f) for f in profile.free][:3] == [2 - procs, 2, 0], kind


def test_compression_fills_a_hole_exactly_as_long_as_the_job():
    """As above with C 10 s long: the hole [0, 10) before B's full stretch holds it exactly
    (a hole that ends where the job would is a fit)."""
    from emulator.scheduling.profile import Profile
    from emulator.scheduling.pyprofile import PyProfile

    for kind in {Profile, PyProfile}:
        profile = kind(0.0, 0, [(10.0, 4)])  # none free now, 4 at 10
        profile.reserve(10.0, 5.0, 4)
        profile.reserve(15.0, 10.0, 2)
        profile.reserve(0.0, 10.0, -2)
        assert profile.compress([(4, 5.0, 10.0), (2, 10.0, 15.0)], 0.0) == [False, 0.0], kind
        assert list(profile.times)[:2] == [0.0, 15.0], kind  # full until B ends
        assert [int(f) for f in profile.free][:2] == [0, 4], kind


def test_a_move_that_joins_a_short_run_into_a_hole_moves_the_job_ahead():
    """4 processors: X holds all of them over [12, 40), B (4 procs, 2 s) is promised 7, A
    (2 procs, 10 s) 40, A ahead of B in the queue. A fits nowhere earlier: [0, 7) and [9, 12)
    are too short. B moves to 0; what it leaves, [7, 9), joins [2, 7) and [9, 12) into a
    hole exactly as long as A, who moves to 2 on the second pass."""
    from emulator.scheduling.profile import Profile
    from emulator.scheduling.pyprofile import PyProfile

    for kind in {Profile, PyProfile}:
        profile = kind(0.0, 4, [])
        profile.reserve(12.0, 28.0, 4)
        profile.reserve(7.0, 2.0, 4)
        profile.reserve(40.0, 10.0, 2)
        assert profile.compress([(2, 10.0, 40.0), (4, 2.0, 7.0)], 0.0) == [2.0, 0.0], kind


def test_a_release_that_joins_a_short_run_into_a_hole_moves_the_job_there():
    """4 processors, all held over [5, 30). J (2 procs, 10 s) is promised 30: [0, 5) is too
    short. Two of them come back for [5, 10): with [0, 5) they make a hole as long as J.
    A settled compression, which tries only the jobs a release helps, moves J to 0."""
    from emulator.scheduling.profile import Profile
    from emulator.scheduling.pyprofile import PyProfile

    for kind in {Profile, PyProfile}:
        profile = kind(0.0, 4, [])
        profile.reserve(5.0, 25.0, 4)
        job = Job(0, 0, 2, 10, estimate=10.0, index=0)
        job.slot = profile.earliest(2, 10.0, 0.0)
        profile.reserve(job.slot, 10.0, 2)
        profile.release(5.0, 5.0, 2)
        moved = profile.compress_queue([((0,), job)], 0.0, True)
        assert [(t, i) for t, i, _ in moved] == [(0.0, 0)], kind


def _compress_as_the_reference(processors, rows, ends, freed):
    from emulator.scheduling.profile import Profile
    from emulator.scheduling.pyprofile import PyProfile

    if Profile is PyProfile:
        pytest.skip("the C profile is not built")
    c, py = Profile(0.0, processors, ends), PyProfile(0.0, processors, ends)
    jobs = _queued(rows, c, py)
    for start, length, procs in freed:  # jobs end early: their processors come back
        for p in (c, py):
            p.reserve(float(start), float(length), -procs)
    assert c.compress(jobs, 0.0) == py.compress(jobs, 0.0)
    assert list(c.times) == [float(x) for x in py.times]
    assert list(c.free) == [int(x) for x in py.free]


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(1, 16), st.integers(1, 60), st.booleans()),
                     min_size=10, max_size=40),
       ends=st.lists(st.tuples(st.integers(0, 80), st.integers(1, 8)), max_size=8),
       freed=st.lists(st.tuples(st.integers(0, 30), st.integers(1, 40), st.integers(1, 8)),
                      min_size=1, max_size=4))
def test_long_queues_compress_in_c_as_in_the_reference(rows, ends, freed):
    """Queues long enough for several passes, many processor counts, and several early
    ends."""
    _compress_as_the_reference(16, rows, ends, freed)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from([1, 2, 3, 257, 258, 259, 513]),
                               st.integers(1, 60), st.booleans()), min_size=10, max_size=40),
       ends=st.lists(st.tuples(st.integers(0, 80), st.integers(1, 520)), max_size=8),
       freed=st.lists(st.tuples(st.integers(0, 30), st.integers(1, 40),
                                st.integers(1, 520)), min_size=1, max_size=4))
def test_counts_256_apart_compress_as_in_the_reference(rows, ends, freed):
    """The C compression keeps its jobs' processor counts in a table of 256 places: counts
    that share a place are still told apart."""
    _compress_as_the_reference(520, rows, ends, freed)


@settings(max_examples=100, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(1, 8), st.integers(1, 30), st.sampled_from(
    ["reserved", "new", "started"]), st.booleans()), min_size=1, max_size=12),
       ends=st.lists(st.tuples(st.integers(0, 40), st.integers(1, 4)), max_size=4),
       now=st.sampled_from([0.0, 1.0]))
def test_compressing_a_queue_in_c_sets_slots_as_its_reference(rows, ends, now):
    """compress_queue reads the scheduler's (key, job) entries, skips started jobs, sets
    slot and a first reservation on the jobs that move, and returns their heap entries."""
    from emulator.scheduling.profile import Profile
    from emulator.scheduling.pyprofile import PyProfile

    if Profile is PyProfile:
        pytest.skip("the C profile is not built")
    profiles, queues = (Profile(0.0, 8, ends), PyProfile(0.0, 8, ends)), ([], [])
    for k, (procs, estimate, kind, first) in enumerate(rows):
        slot = None
        if kind == "reserved":
            slot = profiles[1].earliest(procs, float(estimate), 0.0)
            for p in profiles:
                p.reserve(slot, float(estimate), procs)
        for queue in queues:
            job = Job(k, 0, procs, estimate, estimate=float(estimate), index=k)
            job.slot, job.reserved = slot, (slot if first else None)
            job.start = 0.0 if kind == "started" else None
            queue.append(((k,), job))
    for p in profiles:  # a job ends early: its processors come back
        p.reserve(0.0, 5.0, -2)
    before = [(j.slot, j.reserved) for _, j in queues[0]]
    got = [p.compress_queue(queue, now) for p, queue in zip(profiles, queues)]
    if got[1] is None:  # a reservation already past: nothing set, rebuild
        assert got[0] is None and [(j.slot, j.reserved) for _, j in queues[0]] == before
        return
    assert [(t, i, j.id) for t, i, j in got[0]] == [(t, i, j.id) for t, i, j in got[1]]
    assert all(j.slot == t and j.index == i for t, i, j in got[0])
    for (_, a), (_, b) in zip(*queues):
        assert (a.slot, a.reserved, a.start) == (b.slot, b.reserved, b.start)
    assert list(profiles[0].times) == [float(x) for x in profiles[1].times]


@settings(max_examples=150, deadline=None)
@given(rows=st.lists(st.tuples(st.integers(1, 16), st.integers(1, 60), st.booleans()),
                     min_size=3, max_size=40),
       ends=st.lists(st.tuples(st.integers(1, 80), st.integers(1, 8)), min_size=1, max_size=8),
       early=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 6)), min_size=1, max_size=5))
def test_a_settled_compression_moves_what_trying_every_job_moves(rows, ends, early):
    """From reservations made in queue order (each as early as it fit; new jobs with none),
    running jobs end early one after another, each given back with release(): a compression
    told the queue is settled, which first tries only the jobs a release freed room for,
    moves every job where one that tries them all moves it, and where the reference does."""
    _settled_as_every_job_tried(rows, ends, early)


@settings(max_examples=60, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from([2, 2, 2, 3, 16]), st.integers(1, 60),
                               st.booleans()), min_size=40, max_size=90),
       ends=st.lists(st.tuples(st.integers(1, 200), st.integers(1, 8)), min_size=1, max_size=8),
       early=st.lists(st.tuples(st.integers(0, 7), st.integers(0, 6)), min_size=1, max_size=5))
def test_a_settled_compression_of_many_jobs_of_a_few_sizes(rows, ends, early):
    """As above with dozens of jobs of one size, their slots out of queue order (short ones
    go before the jobs that fill the machine, long ones after): the C side keeps a size's
    waiting jobs by slot, sorting runs of 16 and merging them, and wakes them by slot."""
    _settled_as_every_job_tried(rows, ends, early)


@settings(max_examples=200, deadline=None)
@given(slots=st.lists(st.integers(0, 40).map(float), max_size=120))
def test_the_c_compression_keeps_sleeping_jobs_by_slot(slots):
    """Its sort (runs of 16 by insertion, then merged): by slot, ties in queue order."""
    _profile = pytest.importorskip("emulator.scheduling._profile",
                                   reason="the C profile is not built")
    _slot_order = _profile._slot_order

    assert _slot_order(slots) == sorted(range(len(slots)), key=slots.__getitem__)


def _settled_as_every_job_tried(rows, ends, early):
    from emulator.scheduling.profile import Profile
    from emulator.scheduling.pyprofile import PyProfile

    if Profile is PyProfile:
        pytest.skip("the C profile is not built")
    c, py = Profile(0.0, 16, ends), PyProfile(0.0, 16, ends)
    queues = ([], [], [])  # settled, trying every job, the reference
    for k, (procs, estimate, slot) in enumerate(_queued(rows, c, py)):
        for queue in queues:
            job = Job(k, 0, procs, estimate, estimate=estimate, index=k)
            job.slot = slot
            queue.append(((k,), job))
    running, now = sorted(ends), 0.0
    for which, after in early:
        now += after
        end, procs = running.pop(which % len(running))
        if end > now:
            for p in (c, py):
                p.release(now, end - now, procs)
        every = c.copy()  # the releases kept too: the flag alone differs
        got = [c.compress_queue(queues[0], now, True), every.compress_queue(queues[1], now),
               py.compress_queue(queues[2], now)]
        if got[2] is None:  # a reservation already past: the scheduler would rebuild
            assert got[0] is None and got[1] is None
            return
        assert [[(t, i) for t, i, _ in moved] for moved in got] == [[(t, i) for t, i, _ in
                                                                     got[2]]] * 3
        assert [j.slot for _, j in queues[0]] == [j.slot for _, j in queues[2]]
        assert list(c.times) == list(every.times) == [float(x) for x in py.times]
        assert list(c.free) == list(every.free) == [int(x) for x in py.free]
        if not running:
            return


def test_a_schedule_run_holds_the_cyclic_collector_off_and_gives_it_back(tmp_path, capsys):
    """A trace run's job records live to its end and make no cycles: no collection walks
    them while the command runs, and the collector is on again afterwards."""
    import gc

    generations = []

    def seen(phase, info):
        if phase == "start":
            generations.append(info["generation"])

    gc.enable()
    gc.callbacks.append(seen)
    try:
        assert main(["schedule", "nasa", "--policy", "easy", "--compress-arrivals", "2",
                     "--out", str(tmp_path), "--no-progress"]) == 0
    finally:
        gc.callbacks.remove(seen)
    # the command's own modules load before its run (a collection or two); with the
    # collector on throughout, this run makes some 170
    assert len(generations) < 10 and 2 not in generations and gc.isenabled()
    assert "easy: 18239 jobs" in capsys.readouterr().out


def _jobs_as_job_makes_them(trace, compress):
    """The jobs of ``trace`` made one by one by ``Job`` and compressed by
    ``compress_arrivals``: what ``jobs_from_trace`` must give."""
    procs = np.asarray(trace.procs).astype(int).tolist()
    col = {name: trace.column(name).tolist() for name in
           ("job", "submit", "run", "requested_time", "user", "group", "executable", "queue")}
    jobs = [Job(int(col["job"][i]), col["submit"][i], procs[i], col["run"][i],
                requested=col["requested_time"][i],
                owner=(int(col["user"][i]), int(col["group"][i]), int(col["executable"][i]),
                       int(col["queue"][i])), index=i) for i in range(len(trace))]
    return compress_arrivals(jobs, compress)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.one_of(st.integers(-3, 10**12).map(float),
                                   st.floats(-1e6, 1e12, allow_nan=False)),
                         min_size=18, max_size=18), min_size=1, max_size=30),
       st.sampled_from([1.0, 0.7, 1 / 0.7, 3.0]))
def test_jobs_from_a_trace_are_those_job_makes(rows, compress):
    """Every attribute of every job, its type too, as Job(...) and compress_arrivals make
    them: ids and owners truncated to ints, a negative requested time None, submit times
    divided and rounded down."""
    from emulator.workload.swf import Trace

    trace = Trace(rows)
    got, want = jobs_from_trace(trace, compress), _jobs_as_job_makes_them(trace, compress)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        for name in Job.__slots__:
            x, y = getattr(a, name), getattr(b, name)
            assert (type(x), x) == (type(y), y), (name, x, y)


def test_jobs_from_a_trace_with_values_int_cannot_take_fail_as_job_does():
    from emulator.workload.swf import Trace

    row = [1.0, 0, 0, 60, 4, -1, -1, 4, 120, -1, 1, 3, 1, -1, 1, -1, -1, -1]
    for bad in (math.nan, math.inf):
        trace = Trace([row[:11] + [bad] + row[12:]])  # the user
        with pytest.raises((ValueError, OverflowError)):
            jobs_from_trace(trace)
    with pytest.raises(ValueError, match="must be positive"):
        jobs_from_trace(Trace([row]), 0.0)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-1e12, 1e12, allow_nan=False), min_size=1, max_size=40))
def test_summary_median_is_numpys(values):
    from emulator.scheduling.metrics import median

    assert median(np.array(values)) == float(np.median(np.array(values)))
