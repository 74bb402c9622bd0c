"""Kernel-shaping commands: ``testbed`` (network namespaces shaped by tc on this machine) and
``tc`` (shaping scripts for the hosts of a real cluster)."""

import os
import sys

from ..coordinator.launch import mpiexec_path
from ..errors import UserError
from .common import actions, command, positive_float, positive_int

LAUNCH_HINT = ("mpiexec -launcher ssh -launcher-exec hostfiles/nsel-launcher "
               "-f hostfiles/nsel.hosts -n 5 python prog.py")


def testbed_options(p):
    p.add_argument("--name", default="nsel",
                   help="testbed name, prefix of every object it makes (default nsel)")
    p.add_argument("--state-dir", default="/run/nodesel",
                   help="where the testbed records what it made (default /run/nodesel)")


def register(sub):
    tsub = actions(sub, "testbed", help="a network-namespace testbed shaped by tc (needs root)",
                   examples=["sudo nodesel testbed up --nodes 10 --capacity-mbps 100",
                             "sudo nodesel testbed down"])
    tup = command(tsub, "up", help="create namespaces, veths, a bridge and HTB shaping",
                  examples=["sudo nodesel testbed up --nodes 10 --capacity-mbps 100",
                            "sudo nodesel testbed up --nodes 4 --scenario s.json --out /tmp",
                            "sudo nodesel testbed up --cluster hostfiles/racks12.toml",
                            "sudo nodesel testbed up --machines 3 --slots 5 --name nselh   "
                            "# fake machines to spread a cluster over",
                            f"then: {LAUNCH_HINT}"],
                  handler=cmd_testbed)
    tup.add_argument("--nodes", type=positive_int,
                     help="node namespaces n1..nN of a crossbar (default 10)")
    tup.add_argument("--cluster", help="a tree cluster file (switches and links, e.g. "
                                       "hostfiles/racks12.toml): a namespace per switch and "
                                       "node, trunks shaped at the links' capacities")
    tup.add_argument("--machines", type=positive_int,
                     help="instead, H fake machines (not shaped): each its own network, "
                          "hostname, IPC, PID and mount namespaces (a private /dev/shm), for "
                          "ranks of one emulated cluster spread over machines")
    tup.add_argument("--slots", type=positive_int, default=1,
                     help="with --machines, ranks each machine takes in the hostfile, in "
                          "rank order (default 1: ranks dealt round the machines)")
    tup.add_argument("--queue", choices=("fair", "fifo"), default="fair",
                     help="on a tree, how a link serves the node pairs crossing it: fair, "
                          "round robin among them, pure TCP ACKs first (default); fifo, "
                          "one drop-tail queue")
    tup.add_argument("--background", choices=("rates", "real"), default="rates",
                     help="on a tree, a scenario's competing streams as a change of the "
                          "link's rate (default) or as real TCP streams (started by 'play' "
                          "and by tc runs, from a background host per switch)")
    tup.add_argument("--capacity-mbps", type=positive_float, default=100.0,
                     help="port capacity of every node (default 100)")
    tup.add_argument("--scenario", help="shape pairs at the scenario's bandwidths at time 0 "
                                        "(default: every pair at port capacity)")
    tup.add_argument("--bandwidth-mbps", type=positive_float,
                     help="shape every pair at this bandwidth instead")
    tup.add_argument("--subnet", default="10.77.0.0/24",
                     help="IPv4 subnet of the bridge and the node addresses; the bridge takes "
                          "the last host address (default 10.77.0.0/24)")
    tup.add_argument("--out", default="hostfiles", help="where the hostfile and launcher go "
                                                        "(default hostfiles)")
    testbed_options(tup)
    tdown = command(tsub, "down", help="remove everything 'up' made (idempotent)",
                    examples=["sudo nodesel testbed down", "sudo nodesel testbed down --name nsel"],
                    handler=cmd_testbed)
    testbed_options(tdown)
    tplay = command(tsub, "play", help="play a scenario into the testbed's tc classes",
                    examples="sudo nodesel testbed play --scenario s.json --time-scale 10",
                    handler=cmd_testbed)
    tplay.add_argument("--scenario", required=True, help="scenario file to play")
    tplay.add_argument("--time-scale", type=positive_float, default=1.0,
                       help="scenario seconds per wall second (default 1)")
    testbed_options(tplay)

    tcsub = actions(sub, "tc", help="traffic-control plans for a real cluster",
                    examples="nodesel tc plan --hostfile hosts --scenario s.json --out plan/")
    plan = command(tcsub, "plan", help="write one shaping script per host (run them with sudo)",
                   examples=["nodesel tc plan --hostfile hosts --scenario s.json --out plan/",
                             "on each host: sudo sh plan/HOST.sh up; sudo sh plan/HOST.sh play; "
                             "sudo sh plan/HOST.sh down"],
                   handler=cmd_tc)
    plan.add_argument("--hostfile", required=True, help="MPICH or Open MPI hostfile; hosts "
                                                         "are IPv4 addresses or resolvable names")
    plan.add_argument("--scenario", required=True, help="scenario the scripts play")
    plan.add_argument("--out", required=True, help="folder for the scripts")
    plan.add_argument("--interface", default="eth0", help="each host's cluster interface")
    plan.add_argument("--capacity-mbps", type=positive_float, default=100.0,
                      help="port capacity of every host (default 100)")
    plan.add_argument("--time-scale", type=positive_float, default=1.0,
                      help="scenario seconds per wall second (default 1)")
    plan.add_argument("--apply", action="store_true",
                      help="instead, play the scenario into the local testbed (--name)")
    testbed_options(plan)


def testbed_that_is_up(name, state_dir):
    """The testbed ``name`` that is up, and its state."""
    from ..kernel.treebed import open_testbed

    return open_testbed(name, state_dir)


def _play(testbed, state, scenario, time_scale):
    from ..kernel.tcplayer import player_for
    from ..network import cluster as clusters
    from ..network.scenario import load_scenario

    cluster = getattr(testbed, "cluster", None) or \
        clusters.crossbar(state["nodes"], capacity_mbps=state["capacity_mbps"])
    timeline = load_scenario(scenario, cluster)
    player = player_for(cluster, timeline, testbed)
    try:
        return _play_with(player, timeline, time_scale)
    finally:
        if hasattr(testbed, "stop_streams"):
            testbed.stop_streams()


def _play_with(player, timeline, time_scale):
    print(f"playing {len(timeline.events)} changes over {timeline.duration_seconds():g} "
          f"scenario seconds at time scale {time_scale:g}; Ctrl-C stops", flush=True)
    player.play(time_scale=time_scale,
                progress=lambda t, n: print(f"  t={t:g} s: {n} class change(s)", flush=True))
    return 0


def _machines_up(args):
    from ..kernel.machines import MachinesTestbed
    from ..kernel.testbed import Layout, require_root

    if args.nodes or args.cluster or args.scenario or args.bandwidth_mbps:
        raise UserError("--machines makes unshaped machines: give it without --nodes, "
                        "--cluster, --scenario or --bandwidth-mbps")
    testbed = MachinesTestbed(Layout(args.name, args.machines, args.subnet),
                              state_dir=args.state_dir)
    require_root()  # after the names and addresses are checked
    files = testbed.up(slots=args.slots, out_dir=args.out)
    L = testbed.layout
    print(f"testbed {args.name}: {args.machines} fake machines ({L.namespace('n1')} ...) on "
          f"bridge {L.bridge} ({L.bridge_address}); state in {testbed.path}")
    print(f"hostfile {files['hostfile']} ({args.slots} rank(s) a machine), launcher "
          f"{files['launcher']}")
    bin_dir = os.path.dirname(mpiexec_path() or sys.executable)
    print(f"run a cluster over them: {bin_dir}/mpiexec -launcher ssh -launcher-exec "
          f"{files['launcher']} -f {files['hostfile']} -n N+1 nodesel flows --nodes N ...")
    return 0


def cmd_testbed(args):
    from ..kernel.testbed import Layout, Testbed, require_root

    if args.action == "up" and args.machines:
        return _machines_up(args)
    if args.action == "up" and args.cluster:
        return _tree_up(args)
    if args.action == "up":
        args.nodes = 10 if args.nodes is None else args.nodes
        testbed = Testbed(Layout(args.name, args.nodes, args.subnet), state_dir=args.state_dir)
        require_root()  # after the names and addresses are checked
        if args.scenario and args.bandwidth_mbps:
            raise UserError("give --scenario or --bandwidth-mbps, not both")
        if args.scenario:
            from ..network import cluster as clusters
            from ..network.scenario import load_scenario, pair_bandwidth_function

            cluster = clusters.crossbar(args.nodes, capacity_mbps=args.capacity_mbps)
            pair_at = pair_bandwidth_function(cluster, load_scenario(args.scenario, cluster))

            def pair(a, b):
                return pair_at(a, b, 0.0)
        else:
            rate = args.bandwidth_mbps or args.capacity_mbps

            def pair(a, b):
                return rate
        files = testbed.up(args.capacity_mbps, pair, out_dir=args.out)
        print(f"testbed {args.name}: {args.nodes} node namespaces "
              f"({testbed.layout.namespace('n1')} "
              f"...) and a coordinator namespace on bridge {testbed.layout.bridge} "
              f"({testbed.layout.bridge_address}); state in {testbed.path}")
        print(f"hostfile {files['hostfile']}, launcher {files['launcher']}")
        bin_dir = os.path.dirname(mpiexec_path() or sys.executable)
        print(f"build an MPI program with this MPI (the mpich wheel's): {bin_dir}/mpicc -o prog "
              "prog.c")
        print(f"run it with the same MPI's launcher: {bin_dir}/mpiexec -launcher ssh "
              f"-launcher-exec {files['launcher']} -f {files['hostfile']} -n {args.nodes + 1} "
              "./prog")
        print(f"select nodes for it: nodesel run --testbed-name {args.name} --state-dir "
              f"{args.state_dir} --pattern ring --nprocs {min(4, args.nodes)} "
              f"--skeleton-cmd '{bin_dir}/mpiexec -launcher ssh -launcher-exec "
              f"{files['launcher']} -f {{machinefile}} -n {{nprocs}} ./prog' --app-cmd '...'")
        return 0
    require_root()
    if args.action == "down":
        # down removes what the state file lists, whatever the layout
        removed = Testbed(Layout(args.name, 1), state_dir=args.state_dir).down()
        print(f"removed {len(removed)} objects of testbed {args.name}" if removed
              else f"nothing to remove: no testbed named {args.name!r} is up")
        return 0
    testbed, state = testbed_that_is_up(args.name, args.state_dir)
    return _play(testbed, state, args.scenario, args.time_scale)


def _tree_up(args):
    """``testbed up --cluster TREE``: switches, trunks and ports as the cluster file says."""
    from ..kernel.tcplayer import player_for
    from ..kernel.testbed import require_root
    from ..kernel.treebed import TreeTestbed
    from ..network import cluster as clusters
    from ..network.scenario import load_scenario

    if args.bandwidth_mbps or args.nodes is not None:
        raise UserError("--cluster gives the nodes and link capacities: leave out --nodes and "
                        "--bandwidth-mbps (a scenario changes links: --scenario)")
    cluster = clusters.load_cluster(args.cluster)
    testbed = TreeTestbed.for_cluster(args.name, cluster, path=args.cluster, subnet=args.subnet,
                                      queue=args.queue, background=args.background,
                                      state_dir=args.state_dir)
    timeline = load_scenario(args.scenario, cluster) if args.scenario else None
    player = None if timeline is None else player_for(cluster, timeline, testbed)
    require_root()
    files = testbed.up(out_dir=args.out)
    if player is not None and args.background == "rates":
        player.apply(0.0)
    elif player is not None:
        print("real background streams start with 'nodesel testbed play' or a tc run")
    L = testbed.layout
    print(f"testbed {args.name}: {L.nodes} node namespaces ({L.namespace('n1')} ...) on "
          f"{len(testbed.switch_index)} switch namespaces "
          f"({testbed.switch_namespace(testbed.root)} "
          f"is {testbed.root}, joined to bridge {L.bridge}, {L.bridge_address}); state in "
          f"{testbed.path}")
    for node in testbed.names[:3]:
        print(f"  {node} is {L.namespace(testbed.host(node))} at {L.ip(testbed.host(node))}")
    print(f"hostfile {files['hostfile']}, launcher {files['launcher']}")
    print(f"run on it: nodesel run --testbed-name {args.name} --state-dir {args.state_dir} ..., "
          f"or play a scenario: nodesel testbed play --name {args.name} --scenario S.json")
    return 0


def cmd_tc(args):
    from ..files import write_text_atomic
    from ..kernel.tcplayer import plan_scripts
    from ..network import cluster as clusters
    from ..network.scenario import load_scenario

    if args.apply:
        from ..kernel.testbed import require_root

        require_root()
        testbed, state = testbed_that_is_up(args.name, args.state_dir)
        return _play(testbed, state, args.scenario, args.time_scale)
    import socket

    names = list(clusters.parse_hostfile(args.hostfile))
    addresses = {}
    for host in names:
        try:
            addresses[host] = socket.gethostbyname(host)
        except OSError:
            raise UserError(f"{args.hostfile}: host {host!r} has no address; give IPv4 "
                            "addresses or resolvable names") from None
    cluster = clusters.crossbar(names, capacity_mbps=args.capacity_mbps)
    timeline = load_scenario(args.scenario, cluster)
    if not os.path.isdir(args.out):
        parent = os.path.dirname(os.path.abspath(args.out))
        if not os.path.isdir(parent):
            raise UserError(f"the parent of the output folder, {parent}, does not exist")
        os.makedirs(args.out)
    scripts = plan_scripts(cluster, timeline, addresses, interface=args.interface,
                           time_scale=args.time_scale)
    for host, text in scripts.items():
        write_text_atomic(os.path.join(args.out, f"{host}.sh"), text)
    print(f"wrote {len(scripts)} scripts to {args.out}: "
          f"{', '.join(sorted(f'{h}.sh' for h in scripts))}")
    return 0
