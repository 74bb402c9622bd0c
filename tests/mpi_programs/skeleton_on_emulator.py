"""Run a skeleton on 4 emulated nodes at a uniform static bandwidth; rank 0 prints JSON.

usage: skeleton_on_emulator.py NAME BANDWIDTH_MBPS [DILATION]
"""

import json
import sys
import time

import networkx as nx
from mpi4py import MPI

from emulator.coordinator.runtime import Settings, launch
from emulator.network import cluster as clusters
from emulator.network.scenario import static_timeline

name, mbps = sys.argv[1], float(sys.argv[2])
dilation = float(sys.argv[3]) if len(sys.argv) > 3 else 1.0
cluster = clusters.crossbar(4)
static = nx.Graph()
names = clusters.node_names(cluster)
static.add_edges_from(((a, b) for i, a in enumerate(names) for b in names[i + 1:]),
                      bandwidth_mbps=mbps, capacity_mbps=100.0)
settings = Settings(cluster, static_timeline(static, cluster), timeout_seconds=120,
                    dilation=dilation)
if MPI.COMM_WORLD.Get_rank() == 0:
    settings.epoch = time.time()


def program(coordinator):
    replies = coordinator.run(names, "skeleton", name=name, npb_class="S")
    print(json.dumps({n: r["result"] for n, r in replies.items()}), flush=True)


launch(program, settings)
