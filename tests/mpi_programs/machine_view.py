"""What each rank sees of its machine: rank 0 prints one JSON line per rank (its hostname,
PID, IPC and PID namespaces, the marker files in /dev/shm, its COMM_TYPE_SHARED group's
size, the machine the coordinator takes it for). Each rank leaves a marker file
``nodesel-view-RANK`` in /dev/shm and removes it."""

import json
import os
import socket

from mpi4py import MPI

from emulator.coordinator.node import machine

world = MPI.COMM_WORLD
marker = f"/dev/shm/nodesel-view-{world.Get_rank()}"
open(marker, "w").close()
world.Barrier()
view = {"rank": world.Get_rank(), "host": socket.gethostname(), "pid": os.getpid(),
        "ipc": os.stat("/proc/self/ns/ipc").st_ino, "pidns": os.stat("/proc/self/ns/pid").st_ino,
        "shm": sorted(f for f in os.listdir("/dev/shm") if f.startswith("nodesel-view-")),
        "local": world.Split_type(MPI.COMM_TYPE_SHARED).Get_size(), "machine": machine()}
rows = world.gather(view, root=0)
world.Barrier()
os.unlink(marker)
if rows:
    for row in rows:
        print(json.dumps(row), flush=True)
