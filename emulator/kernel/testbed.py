"""A network-namespace testbed on one machine: one namespace per node, shaped by the kernel.

``up`` creates, in order, a bridge with an address, then per node a namespace, a veth pair
(one end on the bridge, the other as ``eth0`` in the namespace), an address and a default
route via the bridge, HTB shaping on the namespace's ``eth0`` (what the node sends) and one
HTB class at port capacity on the bridge side of its veth (what it receives); see
:mod:`emulator.kernel.iproute`.
A coordinator namespace (unshaped) holds MPI rank 0. Each object is recorded in a state file
as soon as it exists, so ``down`` removes exactly what ``up`` made, in reverse order, even
after a crash; a failure part-way through ``up`` removes what was already made.

``up`` also writes an MPICH hostfile of the nodes' addresses and a launcher for Hydra::

    mpiexec -launcher ssh -launcher-exec LAUNCHER -f HOSTFILE -n 5 python prog.py

The hostfile lists addresses, not the namespaces' names: Hydra resolves every host it is
given and no resolver knows the names, so with a DNS server that never answers each lookup
waits out the resolver's timeout (20 s a name with glibc's defaults) before the job starts.
The launcher maps an address back to its namespace, runs the proxy inside it under the
namespace's name as hostname (a new UTS namespace), points the proxy's control connection at
the bridge address, and sets the UCX environment that keeps MPICH on TCP over ``eth0``
instead of shared memory.
"""

import ipaddress
import json
import os
import re
import shlex
import signal
import socket
import stat
import sys
import time
from dataclasses import dataclass

from ..errors import UserError
from ..files import write_json_atomic, write_text_atomic
from . import command, iproute

STATE_DIR = "/run/nodesel"
NS_DEV = "eth0"
DEFAULT_NAME = "nsel"
DEFAULT_SUBNET = "10.77.0.0/24"
TESTBED_NAME = re.compile(r"^[a-z][a-z0-9]{0,5}$")
MPI_ENV = {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": NS_DEV}
# Defaults a user's environment may override. Large messages go eagerly, streamed through
# the socket as MPI over TCP sockets does: jobs that time-share a node are threads of one
# rank, sharing its UCX worker and connections, and UCX's rendezvous then stalls (two IS
# class-A jobs on one node pair took 7.9, 12.5 and 9.8 s in three runs under the kernel,
# 6.4 to 6.6 s with eager sends, 7.3 s in-process).
MPI_DEFAULTS = {"UCX_RNDV_THRESH": "inf"}
# A fake machine's namespaces (:mod:`.machines`) beside its network's, as unshare's flags
# (``--kill-child``: the machine goes if its launcher is killed; ``--mount-proc``: a private
# mount namespace with the machine's own /proc)
MACHINE_UNSHARE = ("--uts", "--ipc", "--pid", "--fork", "--kill-child", "--mount-proc")
# Bandwidths mean what a TCP stream carries (as NWS measured it): HTB counts whole Ethernet
# frames, so a class is set this much above the payload rate (1514-byte frames carrying
# 1448 bytes of TCP payload with timestamps, at the 1500-byte MTU of the veths).
WIRE_PER_PAYLOAD = 1514 / 1448


@dataclass(frozen=True)
class Layout:
    """Names and addresses of a testbed of ``nodes`` nodes."""

    name: str
    nodes: int
    subnet: str = DEFAULT_SUBNET

    def __post_init__(self):
        if not TESTBED_NAME.match(self.name or ""):
            raise iproute.InvalidTestbedValue(
                f"invalid testbed name {self.name!r}: 1-6 lowercase letters or digits, "
                "starting with a letter")
        try:
            net = ipaddress.IPv4Network(self.subnet)
        except ValueError:
            raise iproute.InvalidTestbedValue(f"invalid subnet {self.subnet!r}") from None
        if isinstance(self.nodes, bool) or not isinstance(self.nodes, int) or self.nodes < 1:
            raise iproute.InvalidTestbedValue(
                f"--nodes must be a positive integer, got {self.nodes!r}")
        if self.nodes + 2 > net.num_addresses - 2:
            raise iproute.InvalidTestbedValue(
                f"subnet {self.subnet} has no room for {self.nodes} nodes, a coordinator "
                "and the bridge")

    @property
    def bridge(self):
        return f"{self.name}-br"

    def _addr(self, host):
        net = ipaddress.IPv4Network(self.subnet)
        return f"{net.network_address + host}/{net.prefixlen}"

    def addresses(self):
        """Host addresses of the subnet."""
        return ipaddress.IPv4Network(self.subnet).num_addresses - 2

    def prefixlen(self):
        return ipaddress.IPv4Network(self.subnet).prefixlen

    def host_ip(self, host):
        """Host number ``host`` of the subnet, without the prefix length."""
        return self._addr(host).split("/")[0]

    @property
    def bridge_address(self):
        net = ipaddress.IPv4Network(self.subnet)
        return self._addr(net.num_addresses - 2)

    @property
    def gateway(self):
        return self.bridge_address.split("/")[0]

    def node_names(self):
        return [f"n{i}" for i in range(1, self.nodes + 1)]

    def namespace(self, node):
        return f"{self.name}-{node}"

    def veth(self, node):
        return f"{self.name}-v{node}"

    def address(self, node):
        """``n<i>`` gets host i of the subnet; the coordinator ``c`` the one below the bridge."""
        net = ipaddress.IPv4Network(self.subnet)
        return self._addr(net.num_addresses - 3 if node == "c" else int(node[1:]))

    def ip(self, node):
        """``node``'s address without the prefix length: its name in hostfiles."""
        return self.address(node).split("/")[0]

    def hosts(self):
        """Coordinator first, then the nodes: the order of MPI ranks."""
        return ["c"] + self.node_names()


def state_path(name, state_dir=STATE_DIR):
    return os.path.join(state_dir, f"{name}.json")


def shaping_info(name, state_dir=STATE_DIR):
    """What a run's coordinator needs to shape testbed ``name`` (read from its state)."""
    with open(state_path(name, state_dir)) as f:
        state = json.load(f)
    return {"name": name, "nodes": state["nodes"], "subnet": state["subnet"],
            "state_dir": state_dir, "capacity_mbps": state["capacity_mbps"],
            "cluster": state.get("cluster")}  # a tree's cluster (node-link JSON)


DISCARD_PORT = 9  # where local users' datagrams go (the discard service's port)


def lan_sink(info):
    """Where a node's local user sends its LAN traffic on testbed ``info``
    (:func:`shaping_info`): the testbed's host, across the node's port and the switches on
    the way, as a user's traffic to a server of its LAN.

    >>> lan_sink({"subnet": "10.77.0.0/24"})
    ('10.77.0.254', 9)
    """
    return Layout("x", 1, info["subnet"]).gateway, DISCARD_PORT


def require_root():
    if os.geteuid() != 0:
        raise UserError("the namespace testbed needs root (ip netns, tc): run it as root "
                        "or with sudo")


class Testbed:
    """Brings a :class:`Layout` up and down, recording what it made in a state file.

    ``run`` is the command runner (``command.run``; tests pass a recorder).
    """

    __test__ = False  # not a test class, despite the name

    def __init__(self, layout, *, state_dir=STATE_DIR, run=command.run):
        self.layout, self.state_dir, self.run = layout, state_dir, run
        self.path = state_path(layout.name, state_dir)
        self.created = []
        self.capacity_mbps = None  # from the state file, when first needed
        self.rate_scale = None  # kernel rates per emulated rate (1/K under dilation K)

    # -- up --------------------------------------------------------------------------------

    def up(self, capacity_mbps, pair_mbps, *, out_dir=None, rate_scale=1.0):
        """Create everything; shape node i -> node j at ``pair_mbps(ni, nj)`` under a port of
        ``capacity_mbps``, each times ``rate_scale`` in the kernel (1/K under dilation K).
        Returns the paths of the hostfile and launcher."""
        L = self.layout
        unscaled = pair_mbps

        def pair_mbps(a, b):
            return unscaled(a, b) * rate_scale

        capacity_mbps = capacity_mbps * rate_scale
        self._begin(capacity_mbps, out_dir, rate_scale=rate_scale)
        try:
            self._make_hosts(L.hosts(), capacity_mbps)
            for i, node in enumerate(L.node_names()):
                # what the node receives: the bridge side of its veth, at port capacity
                self._steps(iproute.add_receive_port(None, L.veth(node),
                                                     capacity_mbps * WIRE_PER_PAYLOAD))
                self._make("qdisc", f"{L.namespace(node)}/{NS_DEV}",
                           iproute.add_shaping(L.namespace(node), NS_DEV,
                                               capacity_mbps * WIRE_PER_PAYLOAD,
                                               self.destinations(node, pair_mbps)))
            files = self._write_files(out_dir) if out_dir else {}
        except BaseException:
            self.down()
            raise
        return files

    def _make_hosts(self, hosts, capacity_mbps):
        """The bridge, then per host a namespace on it: a veth pair, an address and a
        default route via the bridge."""
        L = self.layout
        self._make("bridge", L.bridge, iproute.add_bridge(L.bridge, L.bridge_address))
        for host in hosts:
            ns, veth = L.namespace(host), L.veth(host)
            self._make("netns", ns, iproute.add_namespace(ns))
            self._make("link", veth, iproute.add_veth(veth, ns, NS_DEV, L.bridge,
                                                      capacity_mbps))
            self._steps(iproute.configure_namespace(ns, NS_DEV, L.address(host), L.gateway,
                                                    capacity_mbps))

    def _begin(self, capacity_mbps, out_dir, *, rate_scale=1.0, **state):
        """Checks before anything is made, then an empty state (``state`` adds fields)."""
        L = self.layout
        iproute.check_rate(capacity_mbps, "port capacity")
        if out_dir is not None and not os.path.isdir(out_dir):
            raise UserError(f"output folder {out_dir} does not exist")
        if os.path.exists(self.path):
            raise UserError(f"testbed {L.name!r} is already up ({self.path}); run "
                            f"'nodesel testbed down --name {L.name}' first")
        self.check_subnet_free()
        os.makedirs(self.state_dir, exist_ok=True)
        self.created = []
        self.capacity_mbps = float(capacity_mbps)
        self.rate_scale = float(rate_scale)
        self.state = {"name": L.name, "nodes": L.nodes, "subnet": L.subnet,
                      "capacity_mbps": float(capacity_mbps), "rate_scale": self.rate_scale,
                      "created": self.created, "files": [], **state}

    def check_subnet_free(self):
        """Refuse a subnet that another testbed's state records or that an address of this
        host lies in: traffic for it would be routed through one or the other."""
        net = ipaddress.IPv4Network(self.layout.subnet)
        if os.path.isdir(self.state_dir):
            for entry in sorted(os.listdir(self.state_dir)):
                path = os.path.join(self.state_dir, entry)
                if not entry.endswith(".json") or path == self.path:
                    continue
                try:
                    with open(path) as f:
                        other = json.load(f)
                    theirs = ipaddress.IPv4Network(other["subnet"], strict=False)
                except (OSError, ValueError, KeyError, TypeError):
                    continue  # not a testbed's state
                if net.overlaps(theirs):
                    raise UserError(f"subnet {net} overlaps {theirs} of testbed "
                                    f"{other.get('name', entry[:-5])!r} ({path}): give "
                                    "another with --subnet, or take that testbed down")
        try:
            links = json.loads(self.run(iproute.show_addresses()) or "[]")
        except ValueError:
            links = []
        for link in links:
            for info in link.get("addr_info", []):
                try:
                    address = ipaddress.IPv4Interface(f"{info['local']}/{info['prefixlen']}")
                except (KeyError, ValueError):
                    continue
                if net.overlaps(address.network):
                    raise UserError(f"subnet {net} overlaps {address} on this host's "
                                    f"{link.get('ifname', 'interface')}: give another with "
                                    "--subnet")

    def destinations(self, node, pair_mbps):
        """HTB destination classes of ``node``: minor 2+j for node j's address."""
        L = self.layout
        return [(self.minor(other), L.address(other).split("/")[0],
                 pair_mbps(node, other) * WIRE_PER_PAYLOAD)
                for other in L.node_names() if other != node]

    @staticmethod
    def minor(node):
        return 1 + int(node[1:])

    def _steps(self, argvs):
        for argv in argvs:
            self.run(argv)

    def _make(self, kind, name, argvs):
        """Run the commands that make one object, recording it once its first command (the
        one that creates it) succeeds."""
        self.run(argvs[0])
        self.created.append({"kind": kind, "name": name})
        self._save()
        self._steps(argvs[1:])

    def _save(self):
        write_json_atomic(self.path, self.state)

    def _write_files(self, out_dir, *, hosts=None, slots=1, machine=False):
        """The hostfile (``hosts``, default the layout's, ``slots`` ranks each) and the
        launcher (for fake machines with ``machine``)."""
        L = self.layout
        hosts = hosts or L.hosts()
        hostfile = os.path.join(out_dir, f"{L.name}.hosts")
        launcher = os.path.join(out_dir, f"{L.name}-launcher")
        write_text_atomic(hostfile, f"# testbed {L.name}: {', '.join(hosts)} in this order\n"
                          + "".join(f"{L.ip(h)}:{slots}\n" for h in hosts))
        self.state["files"].append(hostfile)
        self._save()
        write_text_atomic(launcher, launcher_script(
            L.gateway, {L.ip(h): L.namespace(h) for h in hosts}, machine=machine))
        os.chmod(launcher, os.stat(launcher).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        self.state["files"].append(launcher)
        self._save()
        return {"hostfile": hostfile, "launcher": launcher}

    # -- changes ---------------------------------------------------------------------------

    def set_pair(self, a, b, rate_mbps):
        """Shape a -> b at ``rate_mbps`` (``tc class change``)."""
        L = self.layout
        if self.capacity_mbps is None:
            with open(self.path) as f:
                state = json.load(f)
            self.capacity_mbps, self.rate_scale = state["capacity_mbps"], \
                state.get("rate_scale", 1.0)
        cap = self.capacity_mbps
        self._steps(iproute.change_rate(L.namespace(a), NS_DEV, self.minor(b),
                                        rate_mbps * self.rate_scale * WIRE_PER_PAYLOAD,
                                        cap * WIRE_PER_PAYLOAD))

    # -- down ------------------------------------------------------------------------------

    def down(self):
        """Remove what the state file lists, newest first; idempotent. Returns what was
        removed."""
        try:
            with open(self.path) as f:
                state = json.load(f)
        except FileNotFoundError:
            return []
        except ValueError:
            raise UserError(f"testbed state {self.path} is unreadable; remove the testbed's "
                            "namespaces and links by hand") from None
        removed, errors = [], []
        for path in state.get("files", []):
            if os.path.exists(path):
                os.unlink(path)
                removed.append(path)
        for item in reversed(state.get("created", [])):
            try:
                if self._remove(item):
                    removed.append(f"{item['kind']} {item['name']}")
            except command.CommandError as e:
                errors.append(str(e))
        if errors:
            raise UserError("could not remove everything: " + "; ".join(errors))
        os.unlink(self.path)
        return removed

    def _remove(self, item):
        kind, name = item["kind"], item["name"]
        if kind == "netns":
            if name not in self._namespaces():
                return False
            self._end_processes(name)
            self._steps(iproute.delete_namespace(name))
        elif kind in ("link", "bridge"):
            if not self._link_exists(name):
                return False
            self._steps(iproute.delete_link(name))
        elif kind == "qdisc":
            return False  # goes with its namespace's interface
        return True

    def _end_processes(self, ns, grace_seconds=2.0):
        """End what still runs in a namespace of the testbed before the namespace goes: a
        Hydra proxy whose mpiexec was killed waits for ever on a control connection that no
        longer has a link. SIGTERM first, then SIGKILL to what is left after the grace."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            pids = self._pids_in(ns)
            for pid in pids:
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
            deadline = time.monotonic() + grace_seconds
            while pids and time.monotonic() < deadline:
                time.sleep(0.05)
                pids = self._pids_in(ns)
            if not pids:
                return
        raise command.CommandError(iproute.namespace_pids(ns), 1,
                                   f"processes {pids} outlived SIGKILL in namespace {ns}")

    def _pids_in(self, ns):
        out = self.run(iproute.namespace_pids(ns)) or ""
        return [int(p) for p in out.split() if p.isdigit() and int(p) != os.getpid()]

    def _namespaces(self):
        out = self.run(["ip", "netns", "list"]) or ""
        return {line.split()[0] for line in out.splitlines() if line.strip()}

    def _link_exists(self, name):
        try:
            self.run(["ip", "link", "show", "dev", iproute.check_name(name, "interface")])
            return True
        except command.CommandError:
            return False


# -- the launcher ----------------------------------------------------------------------------


def launcher_script(gateway, namespaces, *, machine=False):
    """The launcher file: a Python script that calls :func:`launch_in_namespace` (for fake
    machines with ``machine``)."""
    return (f"#!{sys.executable}\n"
            "# Hydra launcher for the nodesel namespace testbed "
            "(written by 'nodesel testbed up').\n"
            "import sys\n"
            "from emulator.kernel.testbed import launch_in_namespace\n"
            f"NAMESPACES = {namespaces!r}\n"
            f"sys.exit(launch_in_namespace(sys.argv[1:], gateway={gateway!r}, "
            f"namespaces=NAMESPACES, machine={bool(machine)!r}))\n")


def launch_in_namespace(argv, *, gateway, namespaces=None, machine=False):
    """Hydra calls ``LAUNCHER -x HOST CMD...`` as it would call ssh: run CMD in the namespace
    of HOST (an address in ``namespaces``, or a namespace's own name), under the namespace's
    name as hostname, with its control connection pointed at ``gateway``. With ``machine``,
    as a fake machine's (:mod:`.machines`): in IPC, PID and mount namespaces of its own too,
    a private /dev/shm mounted."""
    args = list(argv)
    while args and args[0].startswith("-"):  # ssh options Hydra passes (-x)
        args.pop(0)
    if len(args) < 2:
        print("usage: LAUNCHER [-x] NAMESPACE COMMAND...", file=sys.stderr)
        return 2
    # ssh joins the words and the remote shell splits them again (Hydra quotes the proxy's
    # path for it); shlex does the splitting here, and no shell runs
    host = iproute.check_name((namespaces or {}).get(args[0], args[0]), "namespace")
    cmd = shlex.split(" ".join(args[1:]))
    for i, arg in enumerate(cmd):
        if arg == "--control-port" and i + 1 < len(cmd):
            cmd[i + 1] = f"{gateway}:{cmd[i + 1].rsplit(':', 1)[1]}"
    env = dict(MPI_DEFAULTS, **os.environ, **MPI_ENV)
    if machine:
        argv = ["ip", "netns", "exec", host, "unshare", *MACHINE_UNSHARE, "--", sys.executable,
                "-m", "emulator.kernel.testbed", "as-host", host, "--private-shm", "--", *cmd]
    else:
        argv = ["ip", "netns", "exec", host, "unshare", "--uts", "--", sys.executable, "-m",
                "emulator.kernel.testbed", "as-host", host, "--", *cmd]
    os.execvpe(argv[0], argv, env)


SHM_MOUNT = ["mount", "-t", "tmpfs", "-o", "nosuid,nodev,mode=1777", "tmpfs", "/dev/shm"]


def _as_host(argv):
    """``python -m emulator.kernel.testbed as-host NAME [--private-shm] -- CMD...``: set the
    hostname (in a fresh UTS namespace), with ``--private-shm`` mount a tmpfs of its own on
    /dev/shm (in a fresh mount namespace), then become CMD."""
    name, *rest = argv or [""]
    private_shm = rest[:1] == ["--private-shm"]
    if private_shm:
        rest = rest[1:]
    if rest[:1] != ["--"] or len(rest) < 2:
        print("usage: python -m emulator.kernel.testbed as-host NAME [--private-shm] -- "
              "COMMAND...", file=sys.stderr)
        return 2
    socket.sethostname(iproute.check_name(name, "hostname"))
    if private_shm:
        try:
            command.run(SHM_MOUNT)
        except command.CommandError as e:
            print(f"nodesel: machine {name}: cannot mount its own /dev/shm: {e}",
                  file=sys.stderr)
            return 2
    os.execvp(rest[1], rest[1:])


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "as-host":
        sys.exit(_as_host(sys.argv[2:]))
    print("usage: python -m emulator.kernel.testbed as-host NAME -- COMMAND...", file=sys.stderr)
    sys.exit(2)
