"""Shared by the benchmarks: one static bandwidth matrix on 4 nodes (or one rate for every
pair), a benchmark's child program run once with in-process shaping and once under the
kernel's shaping on a namespace testbed (bench_tc, bench_pingpong), and the ``RESULT`` line
a child prints its figures on."""

import json
import subprocess
import sys
import tempfile
import time

# one static matrix with every kind of pair: fast, middling, slow
MATRIX = {("n1", "n2"): 100.0, ("n1", "n3"): 50.0, ("n1", "n4"): 20.0,
          ("n2", "n3"): 80.0, ("n2", "n4"): 35.0, ("n3", "n4"): 60.0}


def matrix(uniform_mbps=None):
    """MATRIX, or every pair at ``uniform_mbps``."""
    if uniform_mbps is None:
        return MATRIX
    names = ["n1", "n2", "n3", "n4"]
    return {(a, b): float(uniform_mbps) for i, a in enumerate(names) for b in names[i + 1:]}


def child_settings(backend, testbed, *, uniform_mbps=None, **cluster_options):
    """Runtime settings for a child: 4 nodes under MATRIX with 100 Mbit/s ports (or every
    pair and port at ``uniform_mbps``), shaped in-process or (``backend`` "tc") by the
    kernel on testbed ``testbed``."""
    import networkx as nx
    from mpi4py import MPI

    from emulator.coordinator.runtime import Settings
    from emulator.network import cluster as clusters
    from emulator.network.scenario import static_timeline

    port_mbps = capacity(uniform_mbps)
    cluster = clusters.crossbar(4, capacity_mbps=port_mbps, **cluster_options)
    static = nx.Graph()
    for (a, b), mbps in matrix(uniform_mbps).items():
        static.add_edge(a, b, bandwidth_mbps=mbps, capacity_mbps=port_mbps)
    settings = Settings(cluster, static_timeline(static, cluster), timeout_seconds=600)
    if backend == "tc":
        from emulator.kernel.testbed import shaping_info

        settings.shaping = "tc"
        settings.extra["testbed"] = shaping_info(testbed)
    if MPI.COMM_WORLD.Get_rank() == 0:
        settings.epoch = time.time()
    return settings


def capacity(uniform_mbps=None):
    """Port capacity of the nodes: 100 Mbit/s, or ``uniform_mbps``."""
    return 100.0 if uniform_mbps is None else float(uniform_mbps)


def run_both(command, testbed, *, uniform_mbps=None):
    """Run ``command + ["--child", BACKEND]`` under mpiexec -n 5 in both backends; the
    JSON each prints on a ``RESULT`` line, by backend. The testbed's ports run at
    :func:`capacity` (the kernel shaper sets the pairs when a job starts)."""
    from emulator.coordinator.launch import mpiexec_path
    from emulator.kernel.testbed import Layout, Testbed

    results = {"inproc": run_inproc(command)}
    bed = Testbed(Layout(testbed, 4))
    port_mbps = capacity(uniform_mbps)
    with tempfile.TemporaryDirectory() as tmp:
        files = bed.up(port_mbps, lambda a, b: port_mbps, out_dir=tmp)
        try:
            tc = subprocess.run([mpiexec_path(), "-launcher", "ssh", "-launcher-exec",
                                 files["launcher"], "-f", files["hostfile"], "-n", "5"]
                                + command + ["--child", "tc"], capture_output=True, text=True)
        finally:
            bed.down()
    results["tc"] = result_of(tc)
    return results


def run_inproc(command):
    """Run ``command + ["--child", "inproc"]`` under mpiexec -n 5; the JSON it prints."""
    from emulator.coordinator.launch import mpiexec_path

    return result_of(subprocess.run([mpiexec_path(), "-n", "5"] + command
                                    + ["--child", "inproc"], capture_output=True, text=True),
                     "the in-process run")


def result_of(proc, what="a run"):
    """The JSON a finished child printed with :func:`print_result`; exits if it failed."""
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    if proc.returncode or not lines:
        sys.stderr.write(proc.stderr[-3000:])
        raise SystemExit(f"{what} failed")
    return json.loads(lines[-1][7:])


def print_result(out):
    print("RESULT " + json.dumps(out), flush=True)


def matrix_json(uniform_mbps=None):
    return {f"{a}-{b}": v for (a, b), v in matrix(uniform_mbps).items()}

