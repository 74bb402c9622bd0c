"""Patterns a user gives: a communication matrix (bytes between each pair of ranks, from a
trace or a recorder run) made a pattern graph, pattern files (node-link JSON, a JSON or CSV
matrix), and a pattern named or given by path (:func:`resolve_pattern`)."""

import os

import numpy as np

from ..errors import InputFileError, ProcessCountError
from ..files import finite_number, read_input_csv
from .patterns import UNIT_BYTES, builtin_pattern, new_pattern, pattern_names


def pattern_from_matrix(matrix, *, threshold=0.1, name="matrix", rounds=None):
    """Pattern from a communication matrix of bytes sent from rank i to rank j.

    The two directions are added; edges whose bytes are below ``threshold`` times the
    heaviest edge are dropped, so only the dominant communication is kept. ``rounds``, if
    given, is the pattern's (:func:`emulator.network.sharing.pattern_rounds`).
    """
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.shape[0] != m.shape[1]:
        raise ValueError(f"communication matrix must be square, got shape {m.shape}")
    if not np.all(np.isfinite(m)) or np.any(m < 0):
        raise ValueError("communication matrix entries must be finite and >= 0")
    if not 0 <= threshold <= 1:
        raise ValueError(f"dominance threshold must lie in [0, 1], got {threshold}")
    sym = m + m.T
    np.fill_diagonal(sym, 0)
    nprocs = m.shape[0]
    graph = new_pattern(name, nprocs)
    if rounds is not None:
        graph.graph["rounds"] = float(rounds)
    heaviest = sym.max() if sym.size else 0
    if heaviest <= 0:
        return graph
    for a in range(nprocs):
        for b in range(a + 1, nprocs):
            if sym[a, b] > 0 and sym[a, b] >= threshold * heaviest:
                graph.add_edge(a, b, bytes=int(sym[a, b]))
    return graph


def _read_csv_matrix(path):
    rows = []
    for lineno, row in read_input_csv(path, "pattern file"):
        if not row or all(not c.strip() for c in row):
            continue
        try:
            rows.append([float(c) for c in row])
        except ValueError:
            if lineno == 1 and not rows:
                continue  # a header row
            raise InputFileError(path, f"line {lineno}",
                                 f"non-numeric entry in {row!r}") from None
    if rows and len(rows) == len(rows[0]) + 1 and rows[0] == list(range(len(rows[0]))):
        rows = rows[1:]  # a header row of rank numbers 0..m-1
    return rows


def load_pattern(path, *, threshold=0.1):
    """Read a pattern file: node-link JSON of a pattern graph, or a communication matrix
    (JSON ``{"bytes": [[...]]}`` or a bare list of lists, or CSV)."""
    path = str(path)
    if path.endswith(".csv"):
        matrix = _read_csv_matrix(path)
    else:
        from ..network.netgraph import load_json

        data = load_json(path)
        if isinstance(data, dict) and "nodes" in data:
            return _pattern_from_node_link(data, path)
        matrix = data.get("bytes", data.get("matrix")) if isinstance(data, dict) else data
        if matrix is None:
            raise InputFileError(path, "top level",
                                 "expected node-link JSON or a matrix under 'bytes'")
    try:
        return pattern_from_matrix(matrix, threshold=threshold, name=path)
    except (ValueError, TypeError) as e:
        raise InputFileError(path, "matrix", str(e)) from None


def _pattern_from_node_link(data, path):
    from ..network.netgraph import graph_from_node_link

    graph = graph_from_node_link(data, path, require_bandwidth=False)
    ids = sorted(graph.nodes, key=lambda n: (not isinstance(n, int), n))
    if ids != list(range(len(ids))):
        raise InputFileError(path, "nodes", "pattern nodes must be the ranks 0..m-1")
    for u, v, attrs in graph.edges(data=True):
        nbytes = attrs.setdefault("bytes", UNIT_BYTES)
        if not (finite_number(nbytes) and nbytes >= 0):
            raise InputFileError(path, f"edge {u}-{v}",
                                 f"bytes must be a finite number >= 0, got {nbytes!r}")
    rounds = graph.graph.get("rounds")
    if rounds is not None and not (finite_number(rounds) and rounds >= 0):
        raise InputFileError(path, "graph.rounds",
                             f"rounds must be a finite number >= 0, got {rounds!r}")
    graph.graph.setdefault("nprocs", len(ids))
    return graph


def resolve_pattern(spec, nprocs=None, *, npb_class="A", threshold=0.1):
    """A pattern from a built-in name (needs ``nprocs``) or a file path. A built-in name wins
    over a file or folder of that name in the working folder (reach the file as ``./cg``)."""
    builtin = spec.lower() in pattern_names() or spec.lower() in ("alltoall", "all-all",
                                                                  "complete")
    if not builtin and (os.path.sep in spec or os.path.exists(spec)
                        or spec.endswith((".json", ".csv"))):
        graph = load_pattern(spec, threshold=threshold)
        if nprocs is not None and graph.number_of_nodes() != nprocs:
            raise ProcessCountError(
                f"pattern file {spec} has {graph.number_of_nodes()} ranks, "
                f"but --nprocs is {nprocs}")
        return graph
    if nprocs is None:
        raise ProcessCountError("a built-in pattern needs a process count (--nprocs)")
    return builtin_pattern(spec, nprocs, npb_class=npb_class)
