"""The batch scheduler: one event-driven engine for simulated and wall-clock time.

Open ``scheduler`` first (the queue and the FCFS, LWF, EASY and conservative backfilling
policies), then ``simulate`` (a trace on a simulated clock), ``job``, ``estimates`` (what the
scheduler believes a job's run time is), ``profile`` (free processors over time),
``policyfile`` and ``reservations`` (priorities, limits and advance reservations), ``metrics``
and ``gantt`` (what comes out).
"""
