"""Flows files: what ``nodesel flows`` sends and the model predicts.

A CSV file with the header ``start_seconds,src,dst,size_bytes`` and one flow a row; a flow's
id is its row's index from 0 (the first row after the header is flow 0). ``start_seconds``
is emulated time from the run's start, ``src`` and ``dst`` are node names of the cluster
(two different nodes), ``size_bytes`` a whole number of bytes (at least 1; at most 2 GiB,
MPI's limit for one message).
"""

import math

from ..errors import InputFileError
from ..files import read_input_csv
from .sharing import Flow

HEADER = ["start_seconds", "src", "dst", "size_bytes"]
MAX_BYTES = 2**31 - 1


def read_flows(path, nodes):
    """The flows of the CSV file ``path`` between ``nodes`` (names), as
    :class:`~emulator.network.sharing.Flow` in file order."""
    known = set(nodes)
    flows = []
    rows = read_input_csv(path, "flows file")
    header = rows[0][1] if rows else None
    if header is None or [h.strip() for h in header] != HEADER:
        raise InputFileError(path, "line 1", f"header must be {','.join(HEADER)}, got "
                             f"{','.join(header or [])!r}")
    for lineno, row in rows[1:]:
        if not row or all(not cell.strip() for cell in row):
            continue
        where = f"line {lineno}"
        if len(row) != 4:
            raise InputFileError(path, where, f"expected 4 fields, got {len(row)}")
        start, src, dst, size = (cell.strip() for cell in row)
        try:
            start_seconds = float(start)
        except ValueError:
            raise InputFileError(path, f"{where}, start_seconds",
                                 f"not a number: {start!r}") from None
        if not (math.isfinite(start_seconds) and start_seconds >= 0):
            raise InputFileError(path, f"{where}, start_seconds", f"must be >= 0, got {start}")
        for name, node in (("src", src), ("dst", dst)):
            if node not in known:
                raise InputFileError(path, f"{where}, {name}",
                                     f"{node!r} is not a node of the cluster")
        if src == dst:
            raise InputFileError(path, f"{where}, dst", "a flow needs two different nodes")
        try:
            size_bytes = int(size)
        except ValueError:
            raise InputFileError(path, f"{where}, size_bytes",
                                 f"not a whole number: {size!r}") from None
        if not 1 <= size_bytes <= MAX_BYTES:
            raise InputFileError(path, f"{where}, size_bytes",
                                 f"must be from 1 to {MAX_BYTES}, got {size_bytes}")
        flows.append(Flow(start_seconds, src, dst, size_bytes))
    if not flows:
        raise InputFileError(path, "", "no flows listed")
    return flows
