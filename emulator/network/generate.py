"""Big clusters as data: tree cluster files for racks and for k-ary fat trees.

Each generator returns the cluster as the plain data of a cluster file (what
:func:`~emulator.network.cluster.cluster_from_dict` reads); :func:`cluster_toml` writes it
as TOML. Nodes are ``n1`` .. ``nN``, numbered rack by rack.

- :func:`racks`: R racks of P nodes, each rack switch joined to one core switch by an
  uplink; the uplink's capacity is given, or follows an oversubscription ratio (P ports
  of ``port_mbps`` behind ``P * port_mbps / ratio``).
- :func:`fat_tree`: the k-ary fat tree of Al-Fares et al. (k pods of k/2 edge and k/2
  aggregation switches, (k/2)^2 core switches, k^3/4 nodes, every link ``link_mbps``), as
  the tree of its aggregated links: an edge switch's k/2 uplinks are one link of
  k/2 x ``link_mbps``, a pod's (k/2)^2 links to the core one link of (k/2)^2 x
  ``link_mbps``. The flow model shares each such bundle as one resource, which is a fat
  tree whose traffic is spread perfectly over its equal-cost paths (full bisection: no
  flow is limited above its ports).

>>> data = racks(2, 3, port_mbps=100, oversubscription=2)
>>> [(link["a"], link["b"], link["capacity_mbps"]) for link in data["links"]]
[('rack1', 'core', 150.0), ('rack2', 'core', 150.0)]
>>> tree = fat_tree(4, link_mbps=1000)
>>> len(tree["nodes"]), tree["links"][0]
(16, {'a': 'edge1-1', 'b': 'pod1', 'capacity_mbps': 2000.0})
"""

from typing import Any, Optional

from ..files import finite_number

__all__ = ["racks", "fat_tree", "cluster_toml", "summary"]


def racks(count: int, per_rack: int, *, port_mbps: float = 1000.0,
          uplink_mbps: Optional[float] = None, oversubscription: Optional[float] = None,
          latency_ms: float = 0.1, memory_mb: int = 512) -> dict:
    """``count`` racks of ``per_rack`` nodes behind one core switch (a cluster file's data).

    Give ``uplink_mbps`` or ``oversubscription`` (the ratio of a rack's port capacity to
    its uplink's: 4 means 4:1), not both; with neither, uplinks carry every port at once.
    Raises ValueError for counts below 1 or capacities that are not positive."""
    _check_count("racks", count)
    _check_count("nodes per rack", per_rack)
    _check_positive("port_mbps", port_mbps)
    if uplink_mbps is not None and oversubscription is not None:
        raise ValueError("give the uplink's capacity or the oversubscription, not both")
    if uplink_mbps is None:
        ratio = 1.0 if oversubscription is None else oversubscription
        _check_positive("oversubscription", ratio)
        uplink_mbps = per_rack * port_mbps / ratio
    _check_positive("uplink_mbps", uplink_mbps)
    names = [f"rack{r}" for r in range(1, count + 1)]
    return {
        "topology": "tree", "capacity_mbps": float(port_mbps), "memory_mb": memory_mb,
        "latency_ms": latency_ms, "switches": ["core", *names],
        "nodes": [{"name": f"n{r * per_rack + i + 1}", "switch": names[r]}
                  for r in range(count) for i in range(per_rack)],
        "links": [{"a": name, "b": "core", "capacity_mbps": float(uplink_mbps)}
                  for name in names],
    }


def fat_tree(k: int, *, link_mbps: float = 1000.0, latency_ms: float = 0.1,
             memory_mb: int = 512) -> dict:
    """The k-ary fat tree (k even, k^3/4 nodes) as the tree of its aggregated links (see
    the module docstring). Raises ValueError for an odd or too small k."""
    if not isinstance(k, int) or isinstance(k, bool) or k < 2 or k % 2:
        raise ValueError(f"k must be an even integer >= 2, got {k!r}")
    _check_positive("link_mbps", link_mbps)
    half = k // 2
    pods = [f"pod{p}" for p in range(1, k + 1)]
    edges = [[f"edge{p}-{e}" for e in range(1, half + 1)] for p in range(1, k + 1)]
    nodes, links = [], []
    for p in range(k):
        for e, edge in enumerate(edges[p]):
            first = (p * half + e) * half
            nodes += [{"name": f"n{first + i + 1}", "switch": edge} for i in range(half)]
            links.append({"a": edge, "b": pods[p], "capacity_mbps": float(half * link_mbps)})
    links += [{"a": pod, "b": "core", "capacity_mbps": float(half * half * link_mbps)}
              for pod in pods]
    return {
        "topology": "tree", "capacity_mbps": float(link_mbps), "memory_mb": memory_mb,
        "latency_ms": latency_ms,
        "switches": ["core", *pods, *(edge for pod in edges for edge in pod)],
        "nodes": nodes, "links": links,
    }


def cluster_toml(data: dict, *, comment: Optional[str] = None) -> str:
    """A cluster file's data (as :func:`racks` and :func:`fat_tree` give it) as TOML text."""
    lines = [f"# {line}" for line in (comment or "").splitlines()]
    for key in ("topology", "capacity_mbps", "memory_mb", "latency_ms"):
        if key in data:
            lines.append(f"{key} = {_value(data[key])}")
    if "switches" in data:
        lines.append("switches = [" + ", ".join(_value(s) for s in data["switches"]) + "]")
    for key in ("nodes", "links"):
        if data.get(key):
            lines.append(f"{key} = [")
            lines += [f"  {_inline(item)}," for item in data[key]]
            lines.append("]")
    return "\n".join(lines) + "\n"


def summary(data: dict) -> str:
    """One line on a generated cluster: nodes, switches, and each kind of link's capacity.

    >>> summary(racks(2, 3, port_mbps=100, oversubscription=2))
    '6 nodes, 3 switches; node ports 100 Mbit/s; switch links 150 Mbit/s (2 of them)'
    """
    caps: dict = {}
    for link in data.get("links", []):
        caps[link["capacity_mbps"]] = caps.get(link["capacity_mbps"], 0) + 1
    links = ", ".join(f"{_value(c)} Mbit/s ({n} of them)" for c, n in sorted(caps.items()))
    return (f"{len(data['nodes'])} nodes, {len(data['switches'])} switches; node ports "
            f"{_value(data['capacity_mbps'])} Mbit/s; switch links {links}")


def _inline(item: Any) -> str:
    if isinstance(item, str):
        return _value(item)
    return "{" + ", ".join(f"{k} = {_value(v)}" for k, v in item.items()) + "}"


def _value(v: Any) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return repr(v)


def _check_count(what: str, n: Any) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"{what} must be a whole number >= 1, got {n!r}")


def _check_positive(what: str, v: Any) -> None:
    if not (finite_number(v) and v > 0):
        raise ValueError(f"{what} must be a finite number > 0, got {v!r}")
