"""A coordinator program whose node dies or stalls; run with mpiexec -n 4.

usage: failures.py crash|stall|stall-any TIMEOUT_SECONDS

stall-any waits for the stalled group with ``wait_any`` (as a measurement does), the others
with ``run``.
"""

import os
import sys
import time

from mpi4py import MPI

from emulator.coordinator.runtime import Settings, launch, work
from emulator.network import cluster as clusters
from emulator.network.scenario import default_timeline


@work
def crash(comm, *, after_seconds):
    """The group's rank 0 dies abruptly, as a killed node would."""
    if comm.rank == 0:
        time.sleep(after_seconds)
        os._exit(17)
    comm.compute(3600)


@work
def stall(comm):
    """The group's rank 0 stops answering (alive, but silent); rank 1 waits for it."""
    if comm.rank == 0:
        time.sleep(3600)
    comm.Recv(bytearray(8), 0, tag=1)


mode, timeout = sys.argv[1], float(sys.argv[2])
cluster = clusters.crossbar(3)
settings = Settings(cluster, default_timeline(cluster), timeout_seconds=timeout)
if MPI.COMM_WORLD.Get_rank() == 0:
    settings.epoch = time.time()


def program(coordinator):
    coordinator.run(["n1", "n2"], "probe", size_bytes=1000)  # the cluster works
    print("probe ok", flush=True)
    if mode == "crash":
        coordinator.run(["n2", "n3"], "crash", after_seconds=0.5)
    elif mode == "stall":
        coordinator.run(["n2", "n3"], "stall")
    else:
        coordinator.wait_any([coordinator.submit(["n2", "n3"], "stall")])


launch(program, settings)
