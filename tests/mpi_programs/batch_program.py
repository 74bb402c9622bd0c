"""A real program as a batch job, its flows in the node ranks' shared model: ``paced
fanout 4000000`` (4 MB from n1 to n2) characterized alone, then played as a batch job with a
local user on each node whose LAN traffic (a flow the node ranks put into the model) takes
half of n1's 100 Mbit/s port. Run with ``mpiexec -n 3 python batch_program.py PACED``;
rank 0 prints one JSON line. With ``long`` after PACED: one program job that runs until
the run is stopped (its characterization given, not measured); with ``late``, the same job
characterized as taking 10 ms, which its deadline (20 times that plus a 2 s time-out) ends:
rank 0 prints its record and the run's events."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from emulator.batch.characterize import characterize  # noqa: E402
from emulator.batch.jobs import BatchJob  # noqa: E402
from emulator.batch.live import BatchRun, BatchSettings  # noqa: E402
from emulator.coordinator import stop  # noqa: E402
from emulator.coordinator.runtime import Settings, launch  # noqa: E402
from emulator.network.cluster import crossbar  # noqa: E402
from emulator.network.scenario import full_capacity_timeline  # noqa: E402

LAN = {"cpu_fraction": 0.0, "memory_fraction": 0.0, "lan_bytes_per_second": 6.25e6}


def endless(c, exe_seconds=3600.0):
    job = BatchJob(1, 0.0, "paced", "", 2,
                   command=(sys.argv[1], "alltoall", "1048576", "1000000"))
    chars = {job.application: {"exe_seconds": exe_seconds, "cpu_seconds": exe_seconds / 2}}
    run = BatchRun(c, [job], chars, BatchSettings(loaded_fraction=0.0, estimators=()))
    began = time.monotonic()
    record, = run.run()
    print(json.dumps({"status": record["status"], "events": run.events,
                      "seconds": time.monotonic() - began}), flush=True)


def program(c):
    job = BatchJob(1, 0.0, "paced", "", 2, command=(sys.argv[1], "fanout", "4000000"))
    chars = characterize(c, c.up, [job.application], iterations={}, network="test")
    run = BatchRun(c, [job], chars, BatchSettings(loaded_fraction=1.0, estimators=()))
    run.start_local_load(LAN)
    try:
        record, = run.run()
    finally:
        run.stop_local_load()
    print(json.dumps({"alone_seconds": chars[job.application]["program_seconds"],
                      "loaded_seconds": record["run_seconds"], "status": record["status"],
                      "events": run.events}), flush=True)


cluster = crossbar(2)
settings = Settings(cluster, full_capacity_timeline(cluster), timeout_seconds=30)
settings.epoch = time.time()
if sys.argv[2:] == ["late"]:
    settings.timeout_seconds = 2.0
    launch(lambda c: endless(c, exe_seconds=0.01), settings)
elif sys.argv[2:] == ["long"]:
    stop.install()  # a stop ends each rank as the command line ends it
    try:
        launch(endless, settings)
    except KeyboardInterrupt as e:
        stop.rank_0_has_said_it()
        stop.let_rank_0_say_it()
        os._exit(stop.exit_status(stop.signum_of(e)))
else:
    launch(program, settings)
