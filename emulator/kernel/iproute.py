"""argv lists for iproute2 (``ip``, ``tc``): namespaces, veths, a bridge, HTB shaping.

Pure functions: each returns a list of argv lists and runs nothing (see
:mod:`emulator.kernel.command` for the runner). Every name, address and rate is validated first,
so nothing malformed ever reaches a command line.

Shaping follows the tc vocabulary: each node's egress interface gets an HTB root qdisc; one
parent class holds the node's port capacity (rate = ceil = capacity), and under it one leaf
class per destination node holds the pair's available bandwidth (rate = ceil = available, so
HTB never lends a pair more than it has), selected by a u32 filter on the destination
address. Unclassified traffic (to the bridge address, say) goes to a default class at port
capacity. What a node receives shares its port too: the bridge side of its veth carries one
HTB class at port capacity, pure TCP ACKs served first. ``tc class change`` moves a pair to a
new bandwidth without touching the others.
"""

import ipaddress
import re

from ..errors import UserError
from ..network.sharing import burst_bytes

NAME = re.compile(r"^[a-z][a-z0-9-]{0,14}$")  # Linux interface names: at most 15 characters
MAX_RATE_MBPS = 100_000.0
MIN_RATE_MBPS = 0.01
DEFAULT_CLASS = 0xFFF  # HTB minor of the default class
ACK_CLASS = 0xFFE  # HTB minor of a fair link's leaf for pure TCP ACKs
# u32 words of a pure TCP ACK: protocol TCP, a 20-byte IP header, under 128 bytes in all
# (headers, timestamps, a few SACK blocks), and the ACK flag alone (a bulk segment may carry
# only ACK too, but not under 128 bytes)
PURE_ACK = [("ip", "protocol", "6", "0xff"), ("u8", "0x05", "0x0f", "at", "0"),
            ("u16", "0x0000", "0xff80", "at", "2"), ("u8", "0x10", "0xff", "at", "33")]
MAX_GSO_BYTES = 65536
TIMER_SLACK_SECONDS = 0.002  # how late HTB's timer may fire before a class loses rate


def segment_limit(capacity_mbps, *, seconds=0.0002, mtu_bytes=1514):
    """``gso_max_size`` for a port: a veth hands HTB segmentation-offload packets of up to
    64 KiB, each of which passes as one burst; capped at what the port sends in ``seconds``
    (one frame at 100 Mbit/s, 25 kB at 1 Gbit/s), packets are paced about as a real NIC of
    that speed sends them, while fast ports keep large packets (the CPU cannot shape 1 Gbit/s
    frame by frame)."""
    size = int(check_rate(capacity_mbps, "port capacity") * 1e6 / 8 * seconds)
    return ["gso_max_size", str(min(MAX_GSO_BYTES, max(mtu_bytes, size)))]
PORT_CLASS = 1


class InvalidTestbedValue(UserError, ValueError):
    """A name, address or rate that must not reach a command."""


def check_name(name, what="name"):
    """A namespace, interface or bridge name: lowercase letters, digits and '-', 1-15
    characters, starting with a letter."""
    if not isinstance(name, str) or not NAME.match(name):
        raise InvalidTestbedValue(
            f"invalid {what} {name!r}: use 1-15 lowercase letters, digits or '-', "
            "starting with a letter")
    return name


def check_rate(rate_mbps, what="rate"):
    if isinstance(rate_mbps, bool) or not isinstance(rate_mbps, (int, float)) \
            or not MIN_RATE_MBPS <= rate_mbps <= MAX_RATE_MBPS:
        raise InvalidTestbedValue(f"invalid {what} {rate_mbps!r} Mbit/s: must lie in "
                                  f"[{MIN_RATE_MBPS}, {MAX_RATE_MBPS:g}]")
    return float(rate_mbps)


def check_interface_address(text):
    """An address with prefix length, e.g. ``10.77.0.1/24``."""
    try:
        iface = ipaddress.IPv4Interface(text)
    except (ValueError, TypeError):
        raise InvalidTestbedValue(f"invalid address {text!r}: expected IPv4 with a prefix, "
                                  "e.g. 10.77.0.1/24") from None
    if "/" not in str(text):
        raise InvalidTestbedValue(f"invalid address {text!r}: give the prefix length")
    return str(iface)


def check_address(text):
    try:
        return str(ipaddress.IPv4Address(text))
    except (ValueError, TypeError):
        raise InvalidTestbedValue(f"invalid IPv4 address {text!r}") from None


def rate_arg(rate_mbps):
    """A tc rate: kbit, exact to 1 kbit/s (tc reads 'mbit' as 10^6 bit/s, 'kbit' as 10^3)."""
    return f"{max(1, round(check_rate(rate_mbps) * 1000))}kbit"


def htb_burst_bytes(rate_mbps):
    """A class's HTB bucket: the model's (:func:`burst_bytes`, 0.2 ms of the rate) plus what the
    rate sends in ``TIMER_SLACK_SECONDS``. HTB refills a waiting class when its watchdog timer
    fires, and a virtual machine's timers fire late (0.1 ms typically on an idle one, more on a
    busy host): with the bare 0.2 ms, what a late wake-up would have sent beyond the bucket is
    lost: two transfers sharing a 150 Mbit/s uplink got 62 Mbit/s each of their 75 here, and a
    100 Mbit/s trunk 34 on a CI machine. The price: after an idle spell, 2 ms of the rate
    passes at once where the model's bucket passes 0.2 ms."""
    rate = check_rate(rate_mbps)
    return burst_bytes(rate) + int(rate * 1e6 / 8 * TIMER_SLACK_SECONDS)


def _htb(rate_mbps, ceil_mbps=None):
    ceil_mbps = rate_mbps if ceil_mbps is None else ceil_mbps
    return ["htb", "rate", rate_arg(rate_mbps), "ceil", rate_arg(ceil_mbps),
            "burst", str(htb_burst_bytes(rate_mbps)), "cburst", str(htb_burst_bytes(ceil_mbps))]


def class_id(minor):
    if not 1 <= minor <= 0xFFFF:
        raise InvalidTestbedValue(f"class minor {minor} out of range")
    return f"1:{minor:x}"


# -- namespaces, links, addresses -----------------------------------------------------------


def add_namespace(ns):
    return [["ip", "netns", "add", check_name(ns, "namespace")]]


def delete_namespace(ns):
    return [["ip", "netns", "delete", check_name(ns, "namespace")]]


def namespace_pids(ns):
    """The command that prints the process ids whose network namespace is ``ns``."""
    return ["ip", "netns", "pids", check_name(ns, "namespace")]


def add_bridge(bridge, address):
    check_name(bridge, "bridge")
    return [["ip", "link", "add", "name", bridge, "type", "bridge"],
            ["ip", "addr", "add", check_interface_address(address), "dev", bridge],
            ["ip", "link", "set", "dev", bridge, "up"]]


def add_switch(ns, bridge):
    """A bridge with no address inside namespace ``ns`` (a switch of a tree), loopback up."""
    check_name(ns, "namespace"), check_name(bridge, "bridge")
    return [["ip", "-n", ns, "link", "add", "name", bridge, "type", "bridge"],
            ["ip", "-n", ns, "link", "set", "dev", "lo", "up"],
            ["ip", "-n", ns, "link", "set", "dev", bridge, "up"]]


def add_trunk(ns_a, end_a, ns_b, end_b, capacity_mbps):
    """A veth pair from namespace ``ns_a`` (``end_a``) to ``ns_b`` (``end_b``); ``None`` is
    the host. Packet size for the link's capacity on both ends, neither end up yet."""
    where = [] if ns_a is None else ["-n", check_name(ns_a, "namespace")]
    peer = [] if ns_b is None else ["netns", check_name(ns_b, "namespace")]
    check_name(end_a, "interface"), check_name(end_b, "interface")
    return [["ip", *where, "link", "add", "name", end_a, "type", "veth", "peer", "name", end_b,
             *peer],
            ["ip", *where, "link", "set", "dev", end_a] + segment_limit(capacity_mbps),
            ["ip"] + ([] if ns_b is None else ["-n", ns_b]) + ["link", "set", "dev", end_b]
            + segment_limit(capacity_mbps)]


def attach(ns, dev, bridge):
    """Put ``dev`` on ``bridge`` (both in namespace ``ns``; None: the host) and bring it up."""
    where = [] if ns is None else ["-n", check_name(ns, "namespace")]
    check_name(dev, "interface"), check_name(bridge, "bridge")
    return [["ip", *where, "link", "set", "dev", dev, "master", bridge],
            ["ip", *where, "link", "set", "dev", dev, "up"]]


def show_addresses():
    """The host's IPv4 addresses, as JSON (read-only)."""
    return ["ip", "-j", "-4", "addr", "show"]


def delete_link(name):
    return [["ip", "link", "delete", "dev", check_name(name, "interface")]]


def add_veth(host_end, ns, ns_end, bridge, capacity_mbps):
    """A veth pair: ``host_end`` on the bridge, ``ns_end`` inside namespace ``ns``."""
    check_name(host_end, "interface"), check_name(ns, "namespace")
    check_name(ns_end, "interface"), check_name(bridge, "bridge")
    return [["ip", "link", "add", "name", host_end, "type", "veth", "peer", "name", ns_end,
             "netns", ns],
            ["ip", "link", "set", "dev", host_end, "master", bridge],
            ["ip", "link", "set", "dev", host_end] + segment_limit(capacity_mbps),
            ["ip", "link", "set", "dev", host_end, "up"]]


def configure_namespace(ns, ns_end, address, gateway, capacity_mbps):
    """Packet size for the port, address, loopback, link up and a default route via the
    bridge's address."""
    check_name(ns, "namespace"), check_name(ns_end, "interface")
    return [["ip", "-n", ns, "link", "set", "dev", "lo", "up"],
            ["ip", "-n", ns, "link", "set", "dev", ns_end] + segment_limit(capacity_mbps),
            ["ip", "-n", ns, "addr", "add", check_interface_address(address), "dev", ns_end],
            ["ip", "-n", ns, "link", "set", "dev", ns_end, "up"],
            ["ip", "-n", ns, "route", "add", "default", "via", check_address(gateway)]]


# -- shaping ---------------------------------------------------------------------------------


def _tc(ns, dev):
    """``tc`` in namespace ``ns`` (None: the host's own, as on a real cluster node)."""
    check_name(dev, "interface")
    return ["tc"] if ns is None else ["tc", "-n", check_name(ns, "namespace")]


def add_shaping(ns, dev, capacity_mbps, destinations):
    """HTB on ``dev`` in ``ns``: the port class, then one class and filter per destination.

    ``destinations`` is a list of ``(minor, destination address, rate_mbps)``; minors must
    be distinct, between 2 and 0xFFE. ``ns`` None shapes the host's own interface.
    """
    cap = check_rate(capacity_mbps, "port capacity")
    return _classes(_tc(ns, dev), dev, cap, _htb(cap), [
        (minor, _htb(min(check_rate(rate), cap)),
         [("ip", "dst", f"{check_address(address)}/32")], 1)
        for minor, address, rate in destinations])


def _classes(tc, dev, cap, default_leaf, leaves):
    """HTB root, the port or link class at ``cap``, its default leaf, and one leaf and u32
    filter per ``(minor, htb arguments, [u32 match words], filter priority)`` (a filter of a
    lower priority number is tried first)."""
    cmds = [tc + ["qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default",
                  f"{DEFAULT_CLASS:x}"],
            tc + ["class", "add", "dev", dev, "parent", "1:", "classid", class_id(PORT_CLASS)]
            + _htb(cap),
            tc + ["class", "add", "dev", dev, "parent", class_id(PORT_CLASS), "classid",
                  class_id(DEFAULT_CLASS)] + default_leaf]
    seen = set()
    for minor, leaf, match, prio in leaves:
        if not 2 <= minor < DEFAULT_CLASS or minor in seen:
            raise InvalidTestbedValue(f"class minor {minor} invalid or repeated")
        seen.add(minor)
        words = []
        for selector in match:
            words += ["match", *selector]
        cmds += [tc + ["class", "add", "dev", dev, "parent", class_id(PORT_CLASS), "classid",
                       class_id(minor)] + leaf,
                 tc + ["filter", "add", "dev", dev, "parent", "1:", "protocol", "ip", "prio",
                       str(prio), "u32", *words, "flowid", class_id(minor)]]
    return cmds


def add_port_limit(ns, dev, capacity_mbps):
    """HTB with a single class at ``capacity_mbps`` on ``dev``: everything leaving through it
    shares the port (on a node's host-side veth this caps what the node receives)."""
    tc = _tc(ns, dev)
    cap = check_rate(capacity_mbps, "port capacity")
    return [tc + ["qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default",
                  f"{PORT_CLASS:x}"],
            tc + ["class", "add", "dev", dev, "parent", "1:", "classid", class_id(PORT_CLASS)]
            + _htb(cap)]


def add_receive_port(ns, dev, capacity_mbps):
    """What a node receives, through ``dev`` (the bridge side of its veth), at its port's
    ``capacity_mbps``, pure TCP ACKs first: they go through a leaf of their own served
    before the data's. The fluid model has no ACKs, and behind the data a node receives,
    those of the data it sends would hold that data's clock back (a ring of 2 MiB exchanges
    ran 21% slower than the model through a single FIFO here). A fair link with no pairs:
    one data leaf, beside the ACKs'."""
    return add_fair_link(ns, dev, capacity_mbps, [])


def change_rate(ns, dev, minor, rate_mbps, capacity_mbps):
    """``tc class change`` of one destination class to ``rate_mbps`` (capped at the port)."""
    rate = min(check_rate(rate_mbps), check_rate(capacity_mbps, "port capacity"))
    return [_tc(ns, dev) + ["class", "change", "dev", dev, "parent", class_id(PORT_CLASS),
             "classid", class_id(minor)] + _htb(rate)]


def add_fair_link(ns, dev, capacity_mbps, pairs, *, quantum_bytes=3028):
    """HTB on ``dev`` for one direction of a link served round robin among the node pairs
    that cross it: the link's class (rate = ceil = capacity), and under it one leaf per pair,
    selected by a u32 filter on source and destination address. The leaves' own rates are
    the smallest tc takes, so they share the link by borrowing, and HTB's deficit round
    robin with one ``quantum_bytes`` for all gives each active pair an equal turn (fair
    queuing across pairs; flows of one pair share its leaf's FIFO). Pure TCP ACKs go first,
    through a leaf of their own served before the pairs': the fluid model has no ACKs, and in
    a pair's leaf those of a flow in the opposite direction would wait behind its data,
    holding that flow's clock back. (MPI carries both directions of a pair on one TCP
    connection, so ACKs that ride on data still wait.) Other traffic (control, ARP) goes to
    a default leaf of the same kind.

    ``pairs`` is a list of ``(minor, source address, destination address)``, or of
    ``(minor, source, destination, source port)`` for a leaf of one TCP stream; minors
    distinct, between 2 and 0xFFD.
    """
    cap = check_rate(capacity_mbps, "link capacity")
    leaf = ["htb", "rate", rate_arg(MIN_RATE_MBPS), "ceil", rate_arg(cap),
            "burst", str(htb_burst_bytes(cap)), "cburst", str(htb_burst_bytes(cap)),
            "quantum", str(int(quantum_bytes))]
    pair_leaf = leaf + ["prio", "1"]  # served after the ACKs' leaf (prio 0)
    return _classes(_tc(ns, dev), dev, cap, pair_leaf, [
        (ACK_CLASS, leaf + ["prio", "0"], PURE_ACK, 1)] + [
        (minor, pair_leaf,
         [("ip", "src", f"{check_address(src)}/32"), ("ip", "dst", f"{check_address(dst)}/32")]
         + ([] if sport is None else [("ip", "sport", str(_port(sport)), "0xffff")]), 2)
        for minor, src, dst, *rest in pairs for sport in [rest[0] if rest else None]])


def _port(port):
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        raise InvalidTestbedValue(f"invalid port {port!r}")
    return port


def change_port_rate(ns, dev, rate_mbps):
    """``tc class change`` of the single class of :func:`add_port_limit` to ``rate_mbps``."""
    rate = check_rate(rate_mbps)
    return [_tc(ns, dev) + ["class", "change", "dev", dev, "parent", "1:", "classid",
                            class_id(PORT_CLASS)] + _htb(rate)]


def delete_shaping(ns, dev):
    return [_tc(ns, dev) + ["qdisc", "delete", "dev", dev, "root"]]
