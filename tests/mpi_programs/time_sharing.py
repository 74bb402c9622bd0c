"""Time sharing on a node: the EP skeleton (all compute) alone on two nodes, two at once on
the same two nodes, and alone beside a local user. Run with ``mpiexec -n 3``; rank 0
prints one JSON line."""

import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from emulator.coordinator.runtime import Settings, launch  # noqa: E402
from emulator.network.cluster import crossbar  # noqa: E402
from emulator.network.scenario import full_capacity_timeline  # noqa: E402

NODES = ["n1", "n2"]


def until_done(c, handles):
    """Each job's result and the time it came back."""
    results, ends = [None] * len(handles), [None] * len(handles)
    while None in results:
        for i, h in enumerate(handles):
            if results[i] is None:
                results[i] = c.poll(h)
                if results[i] is not None:
                    ends[i] = time.time()
        time.sleep(0.01)
    return results, ends


def program(c):
    def run(k):
        """Each of k EPs submitted at once: its own span and its CPU time."""
        start = time.time()
        done, ends = until_done(c, [c.submit(NODES, "skeleton", name="ep", npb_class="S",
                                             threaded=True) for _ in range(k)])
        return [e - start for e in ends], [r["n1"]["cpu_seconds"] for r in done]

    (alone,), (alone_cpu,) = run(1)
    shared, shared_cpu = run(2)
    c.broadcast({"op": "load", "spec": {"cpu_fraction": 0.15, "memory_fraction": 0.01,
                                        "lan_bytes_per_second": 0.0}})
    (loaded,), _ = run(1)
    c.broadcast({"op": "unload"})
    print(json.dumps({"alone_seconds": alone, "alone_cpu_seconds": alone_cpu,
                      "shared_seconds": shared,
                      "shared_cpu_seconds": shared_cpu, "loaded_seconds": loaded}), flush=True)


cluster = crossbar(2)
settings = Settings(cluster, full_capacity_timeline(cluster), timeout_seconds=30)
settings.epoch = time.time()
launch(program, settings)
