"""What a pattern's structure gives the embedding search of :mod:`.maxmin`, before any
network is looked at: an order to place its ranks in, the common neighbours of its rank
pairs, and conditions that break its symmetries (from twins and clique components, or from
its automorphism group, Grochow and Kellis)."""

import math
import time

import networkx as nx
import numpy as np


def common_links(pattern, order):
    """For each search position, the other positions whose ranks share k >= 1 neighbours
    with its rank, as ``(position, k)``. Any embedding maps such a pair onto nodes with at
    least k common neighbours (the images of the shared neighbours), a constraint that
    prunes hard on sparse thresholded graphs (Glasgow's supplemental graphs, paths of
    length two)."""
    index = {r: i for i, r in enumerate(sorted(pattern.nodes))}
    a = np.zeros((len(order), len(order)), dtype=np.int64)
    for u, v in pattern.edges:
        a[index[u], index[v]] = a[index[v], index[u]] = 1
    common = a @ a
    return [[(j, int(common[index[r], index[q]])) for j, q in enumerate(order)
             if j != i and common[index[r], index[q]] > 0] for i, r in enumerate(order)]


def pattern_order(pattern):
    """Ranks in search order: each next rank has the most already-placed neighbours."""
    ranks = sorted(pattern.nodes)
    shared = {r: {q: len(set(pattern[r]) & set(pattern[q])) for q in ranks if q != r}
              for r in ranks}
    order, placed = [], set()
    while len(order) < len(ranks):  # then the most neighbours shared with placed ranks
        best = max((r for r in ranks if r not in placed),
                   key=lambda r: (sum(1 for q in pattern[r] if q in placed),
                                  sum(shared[r][q] for q in placed), pattern.degree(r), -r))
        order.append(best)
        placed.add(best)
    pos = {r: i for i, r in enumerate(order)}
    back = [[pos[q] for q in pattern[r] if pos[q] < i] for i, r in enumerate(order)]
    ahead = [[pos[q] for q in pattern[r] if pos[q] > i] for i, r in enumerate(order)]
    degree = [pattern.degree(r) for r in order]
    return order, back, ahead, degree


def symmetry_chains(pattern, order):
    """Symmetry-breaking conditions from twins and interchangeable clique components.

    Two safe kinds of symmetry are broken: twins (ranks u, v with N(u) - {v} = N(v) - {u}
    can swap, so a class of pairwise twins can be sorted), and interchangeable clique
    components (K1, K2, ... of the same size can swap whole, so they can be sorted by their
    first node). Every node group keeps an embedding that obeys the conditions, so searches
    stay exact while visiting far fewer symmetric copies.

    Returns the conditions as position pairs ``(a, b)``, "the node at position a has a lower
    index than the node at position b", and how many symmetric copies they remove.
    """
    pos = {r: i for i, r in enumerate(order)}
    pairs, factor = [], 1
    classes = []
    for r in order:  # greedy classes of pairwise twins, in search order
        for cls in classes:
            if all(set(pattern[r]) - {q} == set(pattern[q]) - {r} for q in cls):
                cls.append(r)
                break
        else:
            classes.append([r])
    chained = set()
    for cls in classes:
        factor *= math.factorial(len(cls))
        for a, b in zip(cls, cls[1:]):
            pairs.append((pos[a], pos[b]))
            chained.add(pos[b])
    anchors = {}
    for comp in nx.connected_components(pattern):
        if all(pattern.degree(r) == len(comp) - 1 for r in comp):  # a clique component
            anchors.setdefault(len(comp), []).append(min(pos[r] for r in comp))
    for firsts in anchors.values():
        firsts.sort()
        links = [(a, b) for a, b in zip(firsts, firsts[1:]) if b not in chained]
        if len(links) == len(firsts) - 1:
            factor *= math.factorial(len(firsts))
        pairs.extend(links)
    return pairs, factor


def refine(neighbours, colours):
    """Colour refinement (1-dimensional Weisfeiler-Leman) to a stable colouring. Colours are
    numbered canonically (by sorted signature), so isomorphic inputs give corresponding
    colourings."""
    count = len(set(colours))
    while True:
        signatures = [(colours[v], tuple(sorted(colours[u] for u in neighbours[v])))
                      for v in range(len(colours))]
        index = {s: i for i, s in enumerate(sorted(set(signatures)))}
        colours = [index[s] for s in signatures]
        if len(index) == count:
            return colours
        count = len(index)


def automorphism_conditions(pattern, order, deadline):
    """Symmetry-breaking conditions from the pattern's automorphism group (Grochow and
    Kellis, RECOMB 2007): fix ranks one by one in search order; each rank a must take a
    lower node index than every other rank of its orbit under the automorphisms that fix
    the ranks before it. Orbits come from automorphisms found by VF2 between colour-refined
    copies of the pattern. Stops at ``deadline`` with the conditions of the levels done so
    far (each level's conditions are safe on their own).

    Returns position pairs ``(a, b)`` (node at position a below node at position b) and how
    many symmetric copies they remove (the product of the orbit sizes).
    """
    ranks = list(order)
    index = {r: i for i, r in enumerate(ranks)}  # work on positions 0..m-1
    neighbours = [[index[q] for q in pattern[r]] for r in ranks]
    graph = nx.Graph()
    graph.add_nodes_from(range(len(ranks)))
    graph.add_edges_from((i, j) for i, nb in enumerate(neighbours) for j in nb)

    def individualise(fixed):
        colours = [0] * len(ranks)
        for i, v in enumerate(fixed):
            colours[v] = i + 1
        return refine(neighbours, colours)

    def automorphism(ca, cb):
        """An automorphism taking colouring ca onto colouring cb, or None."""
        if sorted(ca) != sorted(cb):
            return None
        g1, g2 = graph.copy(), graph.copy()
        nx.set_node_attributes(g1, dict(enumerate(ca)), "c")
        nx.set_node_attributes(g2, dict(enumerate(cb)), "c")
        matcher = nx.algorithms.isomorphism.GraphMatcher(
            g1, g2, node_match=lambda x, y: x["c"] == y["c"])
        return next(matcher.isomorphisms_iter(), None)

    pairs, factor, fixed = [], 1, []
    for a in range(len(ranks)):
        if time.monotonic() > deadline:
            break
        base = individualise(fixed)
        if len(set(base)) == len(ranks):
            break  # a discrete colouring: only the identity fixes these ranks
        found = individualise(fixed + [a])
        orbit, generators = {a}, []
        for b in range(a + 1, len(ranks)):
            if b in orbit or base[b] != base[a]:
                continue
            if time.monotonic() > deadline:
                break  # part of the orbit is still a safe condition
            sigma = automorphism(found, individualise(fixed + [b]))
            if sigma is not None:
                generators.append(sigma)
                frontier = list(orbit)
                while frontier:  # the orbit of a under the automorphisms found so far
                    v = frontier.pop()
                    for g in generators:
                        if g[v] not in orbit:
                            orbit.add(g[v])
                            frontier.append(g[v])
        pairs.extend((a, b) for b in sorted(orbit) if b != a)
        factor *= len(orbit)
        fixed.append(a)
    return pairs, factor


def symmetry_conditions(pattern, order, deadline):
    """Symmetry-breaking conditions by search position: for each, the positions that must
    take a higher node index than it, and those that must take a lower one. From the
    automorphism group when that removes more symmetric copies (and is found before
    ``deadline``), else from twins and clique components; the two kinds are never mixed
    (together they could exclude every copy of a group)."""
    pairs, factor = symmetry_chains(pattern, order)
    if time.monotonic() < deadline:
        group_pairs, group_factor = automorphism_conditions(pattern, order, deadline)
        if group_factor > factor:
            pairs = group_pairs
    bigger, smaller = [[] for _ in order], [[] for _ in order]
    for a, b in pairs:  # node at a < node at b
        bigger[a].append(b)
        smaller[b].append(a)
    return bigger, smaller
