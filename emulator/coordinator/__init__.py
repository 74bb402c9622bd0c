"""The coordinator: the MPI runtime of the emulated cluster, where rank 0 directs ranks 1..N.

Open ``runtime`` first (node ranks serve work on shaped group communicators; the coordinator
submits, waits with timeouts and marks failed nodes down). ``launch`` finds and runs mpiexec,
``supervise`` keeps one dead rank from hanging or killing the job, ``load`` is a node's
synthetic local load, ``measure`` and ``forecast`` are the NWS-style pair measurements, and
``pipeline`` takes one job through selection, skeleton trials and the run.
"""
