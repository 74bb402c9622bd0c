"""What the command groups share: argument types, the sub-command factory (every command
carries examples), the cluster options, and running a program on the emulated cluster."""

import argparse
import contextlib
import gc
import math
import os
import sys

from ..coordinator.launch import (START_TIMEOUT_SECONDS, STARTED_FILE_ENV, mpiexec_path,
                                  run_mpiexec, under_mpiexec)
from ..errors import UserError


def positive_int(text):
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def finite_float(text):
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {value}")
    return value


def positive_float(text):
    value = finite_float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be > 0, got {value}")
    return value


def nonnegative_float(text):
    value = finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def fraction(text):
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must lie in [0, 1], got {value}")
    return value


def command(sub, name, *, help, examples, handler=None):
    """A command (or an action of one) with its help line and an ``examples:`` epilog."""
    if isinstance(examples, str):
        examples = [examples]
    parser = sub.add_parser(name, help=help, description=help[:1].upper() + help[1:] + ".",
                            formatter_class=argparse.RawDescriptionHelpFormatter,
                            epilog="examples:\n" + "\n".join(f"  {e}" for e in examples))
    if handler is not None:
        parser.set_defaults(handler=handler)
    return parser


def actions(sub, name, *, help, examples):
    """A command with actions (``nodesel NAME ACTION``); returns its subparsers."""
    parser = command(sub, name, help=help, examples=examples)
    acts = parser.add_subparsers(dest="action", metavar="ACTION")
    acts.required = True
    return acts


def echo(*args, **kwargs):
    print(*args, **kwargs, flush=True)


@contextlib.contextmanager
def collector_off():
    """Python's cyclic garbage collector held off, then as it was: a trace run builds
    hundreds of thousands of records that live to the end and make no cycles, which each
    full collection would walk again (7-11% of `nodesel schedule`, its peak memory the
    same)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def require_mpiexec():
    mpiexec = mpiexec_path()
    if mpiexec is None:
        raise UserError("mpiexec not found; install the 'mpich' wheel (pip install mpich)")
    return mpiexec


def output_folder(path, default):
    """The absolute output folder: ``path`` (its parent must exist) or ``default`` (made with
    its parents); made if missing."""
    if path is None:
        os.makedirs(default, exist_ok=True)
    out = os.path.abspath(path or default)
    parent = os.path.dirname(out)
    if not os.path.isdir(parent):
        raise UserError(f"the parent of the output folder, {parent}, does not exist")
    if os.path.exists(out) and not os.path.isdir(out):
        raise UserError(f"{out} exists and is not a folder")
    os.makedirs(out, exist_ok=True)
    return out


def cluster_options(p, probe_kib=256, default_nodes=10):
    """Options of every command that runs the emulated cluster under mpiexec (whose node
    ranks take everything from rank 0: see :func:`emulator.coordinator.runtime.serve`)."""
    p.set_defaults(runs_cluster=True)
    p.add_argument("--cluster", help="cluster file (TOML/JSON) or hostfile; default "
                                     f"{default_nodes}-node crossbar")
    p.add_argument("--nodes", type=positive_int, help="use only the first N nodes")
    p.add_argument("--scenario", help="scenario file; default: the stream model, --seed")
    p.add_argument("--seed", type=int, default=1,
                   help="seed of the default stream-model scenario (default 1)")
    p.add_argument("--time-scale", type=positive_float, default=10.0,
                   help="scenario seconds per wall second (default 10)")
    p.add_argument("--timeout-seconds", type=positive_float, default=30.0,
                   help="how long the coordinator waits for a node (default 30)")
    p.add_argument("--dilation", type=positive_float,
                   help="time dilation K: one emulated second lasts K wall seconds "
                        "(bandwidths divided by K, latencies and compute phases multiplied "
                        "by K, the scenario clock slowed by K); every figure is in emulated "
                        "seconds. More ranks than cores want K of about ranks/cores "
                        "(default 1, or nodes over cores with --cpu kernel; with --shaping "
                        "tc the testbed runs at 1/K of the bandwidths)")
    p.add_argument("--cpu", choices=("model", "kernel"), default="model",
                   help="model: compute phases and local users share each node's CPU in the "
                        "fluid model (default); kernel: they burn real CPU, each node's "
                        "processes held to one node's share of the cores by a cgroup, and "
                        "the kernel's scheduler decides (needs root and the cgroup cpu "
                        "controller)")
    p.add_argument("--probe-bytes", type=positive_int, default=probe_kib * 1024,
                   help=f"bytes per bandwidth probe (default {probe_kib} KiB)")
    p.add_argument("--shaping", choices=("inproc", "tc", "external"), default="inproc",
                   help="inproc: the emulator paces messages (default, no root); tc: the "
                        "kernel shapes real traffic (needs --testbed netns and root); "
                        "external: real traffic, shaped by someone else (a real cluster, "
                        "under your own mpiexec)")
    p.add_argument("--testbed", choices=("netns",),
                   help="with --shaping tc: run node ranks in network namespaces of this "
                        "machine")
    p.add_argument("--testbed-name", default="nselx",
                   help="name of the testbed a tc run brings up (default nselx)")
    p.add_argument("--testbed-queue", choices=("fair", "fifo"), default="fair",
                   help="on a tree testbed, how a link serves the node pairs crossing it: "
                        "fair, round robin among them, pure TCP ACKs first (default); fifo, "
                        "one drop-tail queue")
    p.add_argument("--testbed-background", choices=("rates", "real"), default="rates",
                   help="on a tree testbed, the scenario's competing streams as link rates "
                        "(default) or as real TCP streams")


def load_cluster(path, nodes=None, *, allocation=False):
    """The cluster of ``path`` (default: the 10-node crossbar, or with ``allocation`` the
    nodes of the batch allocation this runs in), trimmed to ``nodes``."""
    from ..network import cluster as clusters

    graph = allocation_cluster() if path is None and allocation else None
    graph = clusters.load_cluster(path) if graph is None else graph
    names = clusters.node_names(graph)
    if nodes is not None:
        if nodes > len(names):
            raise UserError(f"--nodes {nodes} is more than the {len(names)} nodes of the cluster")
        if graph.graph.get("topology") != "crossbar":
            raise UserError("--nodes only trims crossbar clusters")
        graph.remove_nodes_from(names[nodes:])
    return graph


def allocation_cluster():
    """A crossbar of the nodes of the Slurm or PBS allocation this runs in (None outside
    one); says so once, on rank 0 or outside mpiexec."""
    from ..network import cluster as clusters
    from ..network.allocation import allocation_hosts

    found = allocation_hosts()
    if found is None:
        return None
    source, hosts = found
    if os.environ.get("PMI_RANK", "0") == "0":
        print(f"nodesel: the allocation's {len(hosts)} nodes ({source})", file=sys.stderr)
    return clusters.crossbar(list(hosts), slots=hosts)


DEFAULT_SCENARIO_SECONDS = 86400.0


def on_cluster(args, program, *, scenario_seconds=3600.0, cluster=None, streams=True,
               allocation=False):
    """Run ``program(coordinator)`` on the emulated cluster of ``args``.

    Outside mpiexec this launches ``mpiexec -n N+1`` on the same command line; under
    mpiexec every rank checks the rank count, then rank 0 coordinates and the rest serve.
    Without ``--scenario`` the network plays the stream model (``--seed``), or with
    ``streams=False`` every link at its capacity.
    """
    from ..network import cluster as clusters
    from ..network.scenario import default_timeline, full_capacity_timeline, load_scenario

    if cluster is None:
        cluster = load_cluster(args.cluster, args.nodes, allocation=allocation)
    if args.scenario:
        timeline = load_scenario(args.scenario, cluster)
    elif streams:
        # a day of scenario at least, so that runs of any usual length play within it (the
        # coordinator says so if one plays past its end)
        timeline = default_timeline(cluster, seed=args.seed,
                                    duration_seconds=max(scenario_seconds,
                                                         DEFAULT_SCENARIO_SECONDS))
    else:
        timeline = full_capacity_timeline(cluster)
    n = len(clusters.node_names(cluster))
    args.dilation = _dilation(args, n)
    if args.shaping == "tc" and args.testbed != "netns":
        raise UserError("--shaping tc needs --testbed netns (node ranks in network namespaces)")
    if args.testbed and args.shaping != "tc":
        raise UserError("--testbed netns goes with --shaping tc")
    if args.dilation != 1.0 and args.shaping == "external":
        raise UserError("--dilation needs shaping nodesel controls (--shaping inproc or tc): "
                        "a real network runs at its own speed")
    if args.cpu == "kernel" and args.shaping == "external":
        raise UserError("--cpu kernel emulates the nodes' CPUs on this machine; a real "
                        "cluster's nodes have their own (--shaping inproc or tc)")
    if not under_mpiexec():
        mpiexec = require_mpiexec()
        with _cpu_groups(args, cluster):
            if args.shaping == "tc":
                return _on_testbed(args, cluster, mpiexec)
            # -disable-auto-cleanup and the supervisor: a dead node must not take the others
            # with it, so the coordinator can name it and go on without it.
            from ..coordinator.supervise import rank_command

            return run_mpiexec([mpiexec, "-disable-auto-cleanup", "-n", str(n + 1)]
                               + rank_command(args.argv),
                               start_timeout_seconds=START_TIMEOUT_SECONDS)

    from mpi4py import MPI

    from ..coordinator.runtime import Settings, launch

    world = MPI.COMM_WORLD
    if world.Get_size() - 1 != n:
        if world.Get_rank() == 0:
            print(f"nodesel: error: the cluster has {n} nodes, so run {n + 1} ranks "
                  f"(mpiexec -n {n + 1}), not {world.Get_size()}", file=sys.stderr)
        return 2
    settings = Settings(cluster, timeline, time_scale=args.time_scale,
                        timeout_seconds=args.timeout_seconds * args.dilation,
                        dilation=args.dilation, cpu=args.cpu)
    if args.shaping == "external":
        settings.shaping = "external"
    if args.shaping == "tc":
        from ..kernel.testbed import shaping_info

        settings.shaping = "tc"
        settings.extra["testbed"] = shaping_info(args.testbed_name)
    if world.Get_rank() == 0:
        import time

        settings.epoch = time.time()
    launch(program, settings)
    return 0


def _dilation(args, nodes):
    """``--dilation``, or with ``--cpu kernel`` the one it needs (nodes over cores), said
    once."""
    if args.dilation is not None:
        return args.dilation
    if args.cpu != "kernel":
        return 1.0
    from ..kernel.cgroups import default_dilation

    k = float(default_dilation(nodes))
    launched_here = STARTED_FILE_ENV in os.environ  # its launcher said it already
    if not under_mpiexec() or (os.environ.get("PMI_RANK") == "0" and not launched_here):
        print(f"nodesel: --cpu kernel: dilation {k:g} ({nodes} nodes on {os.cpu_count()} "
              f"cores, one core's 1/{k:g} each)", file=sys.stderr, flush=True)
    return k


@contextlib.contextmanager
def _cpu_groups(args, cluster):
    """With ``--cpu kernel``: the nodes' cgroups for the run's ranks (made before they
    start, taken down after they end, whatever ended them); one line if it cannot run."""
    if args.cpu != "kernel":
        yield None
        return
    from ..kernel import cgroups
    from ..network import cluster as clusters

    why = cgroups.unavailable()
    if why:
        raise UserError(why)
    groups = cgroups.CpuGroups(clusters.node_names(cluster), args.dilation)
    try:
        os.environ[cgroups.ENV] = groups.up()
        yield groups
    finally:
        os.environ.pop(cgroups.ENV, None)
        groups.down()


def _on_testbed(args, cluster, mpiexec):
    """Bring up a namespace testbed for ``cluster``, run the command's ranks in it (rank 0 in
    the coordinator namespace, rank i in node i's), and take the testbed down again."""
    import tempfile

    from ..coordinator.launch import cleanup_flags
    from ..coordinator.supervise import rank_command
    from ..kernel.testbed import Layout, Testbed, require_root
    from ..network import cluster as clusters

    names = clusters.node_names(cluster)
    if cluster.graph.get("topology") == "tree":
        from ..kernel.treebed import TreeTestbed

        testbed = TreeTestbed.for_cluster(args.testbed_name, cluster, path=args.cluster,
                                          queue=args.testbed_queue,
                                          background=args.testbed_background)
        require_root()

        def up(out_dir):
            return testbed.up(out_dir=out_dir, rate_scale=1.0 / args.dilation)
    else:
        capacities = {cluster.nodes[n]["capacity_mbps"] for n in names}
        if len(capacities) != 1 or names != [f"n{i}" for i in range(1, len(names) + 1)]:
            raise UserError("the namespace testbed emulates a crossbar of nodes n1..nN with "
                            "one port capacity, or a tree cluster file; use the default "
                            "cluster, --nodes, or a tree")
        require_root()
        testbed, capacity = Testbed(Layout(args.testbed_name, len(names))), capacities.pop()

        def up(out_dir):
            return testbed.up(capacity, lambda a, b: capacity, out_dir=out_dir,
                              rate_scale=1.0 / args.dilation)
    with tempfile.TemporaryDirectory(prefix="nodesel-testbed-") as tmp:
        files = up(tmp)
        try:
            return run_mpiexec([mpiexec, *cleanup_flags(one_host=False), "-launcher", "ssh",
                                "-launcher-exec", files["launcher"], "-f", files["hostfile"],
                                "-n", str(len(names) + 1)] + rank_command(args.argv),
                               start_timeout_seconds=START_TIMEOUT_SECONDS)
        finally:
            testbed.down()
