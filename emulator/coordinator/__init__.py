"""The coordinator: the MPI runtime of the emulated cluster, where rank 0 directs ranks 1..N.

Open ``runtime`` first (every rank starts there; the coordinator submits, waits with
timeouts and marks failed nodes down), then ``node`` (a node rank serves work on shaped
group communicators), ``tasks`` (the work it runs, by name) and ``settings`` (what every
rank agrees on). The module ``launch`` finds and runs mpiexec, ``supervise`` keeps one
dead rank from hanging or killing the job, ``load`` is a node's synthetic local load,
``measure`` and ``forecast`` are the NWS-style pair measurements, and ``pipeline`` takes
one job through selection, skeleton trials and the run.
"""
