"""How flows share links: a flow model of one iteration of a pattern's communication, and the
token-bucket burst a link of a given rate lets through at once.

Every pattern edge carries its ``bytes`` (half each way) as two concurrent flows, one each way
(links are full duplex). A flow from node u to node v gets ``min(pair bandwidth / flows from
u to v, port(u) / flows leaving u, port(v) / flows entering v)``; the iteration takes as long as its slowest edge. This is the
secondary score of candidate groups and the model behind the oracle of the experiment.
"""

from collections import Counter


def predict_comm_seconds(pattern, mapping, pair_mbps, *, port_mbps=None):
    """Predicted seconds for one iteration of ``pattern`` placed by ``mapping``.

    Parameters
    ----------
    pattern : networkx.Graph
        Ranks as nodes; edges carry ``bytes``.
    mapping : dict
        Rank -> node.
    pair_mbps : callable
        ``pair_mbps(u, v)`` gives the available bandwidth between two nodes, in Mbit/s.
    port_mbps : callable, optional
        ``port_mbps(u)`` gives a node's port capacity in Mbit/s (default: unlimited).

    Returns
    -------
    float
        Seconds; 0.0 for a pattern without edges.

    Examples
    --------
    >>> import networkx as nx
    >>> p = nx.Graph(); p.add_edge(0, 1, bytes=2_500_000)
    >>> predict_comm_seconds(p, {0: "a", 1: "b"}, lambda u, v: 10.0)
    1.0
    """
    out_count, in_count, pair_count = Counter(), Counter(), Counter()
    flows = []
    for a, b, nbytes in pattern.edges(data="bytes", default=0):
        u, v = mapping[a], mapping[b]
        for src, dst in ((u, v), (v, u)):
            flows.append((src, dst, nbytes / 2))
            out_count[src] += 1
            in_count[dst] += 1
            pair_count[(src, dst)] += 1
    worst = 0.0
    for src, dst, nbytes in flows:
        rate = pair_mbps(src, dst) / pair_count[(src, dst)]
        if port_mbps is not None:
            rate = min(rate, port_mbps(src) / out_count[src], port_mbps(dst) / in_count[dst])
        if nbytes > 0:
            worst = max(worst, float("inf") if rate <= 0 else nbytes * 8 / (rate * 1e6))
    return worst


def burst_bytes(rate_mbps, *, mtu_bytes=1514, seconds=0.0002):
    """HTB burst for a rate: what the rate sends in ``seconds`` (0.2 ms), and never less than
    two full frames. Small, so that a short message after an idle spell is paced like on a
    real link of that rate rather than let through at once. (Both backends use it: the kernel's
    HTB classes, and the in-process shaper's model of the same bucket, for any rate; rates for
    tc are checked where the argv is built.)"""
    return max(2 * mtu_bytes, int(rate_mbps * 1e6 / 8 * seconds))
