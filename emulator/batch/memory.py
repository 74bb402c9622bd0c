"""How much memory a task of a NAS benchmark holds: the placement's side of CISNE's policies,
which never put a task where it does not fit beside the local user (Hanzich et al. §4).

Estimated from each class's problem size and the main arrays of the NPB 3 MPI reference
codes, split evenly among the tasks, plus what one MPI process of the skeleton's runtime
holds. The byte counts per unit (grid point, key, nonzero) are the arrays' sizes:

======  ======================================================  ================
bench   main arrays                                             bytes per unit
======  ======================================================  ================
bt      u, rhs, forcing (5 each), 6 per-point temporaries,      25 doubles per
        and the block solver's lines                            grid point
sp      as BT, with scalar pentadiagonal lines                  25 doubles
lu      u, rsd, frct (5 each), flux and the SSOR blocks         20 doubles
mg      u and r over the grid hierarchy (8/7 each), v           3.3 doubles
ft      u0, u1, u2 (complex) and the twiddle factors            6 doubles
cg      a (double) and colidx (int) per nonzero, with makea's   24 bytes per
        copies; five vectors of na                              nonzero
is      key_array, key_buff1, key_buff2 (int)                   12 bytes per key
ep      one batch of 2^16 pairs                                 (1 MB in all)
======  ======================================================  ================
"""

from ..selection.patterns import CLASS_PARAMS

PROCESS_MB = 40.0  # one skeleton process: the interpreter, numpy and the MPI library
MB = 2**20


def total_mb(benchmark, npb_class):
    """The benchmark's main arrays for ``npb_class``, in MB, over all its tasks."""
    p = CLASS_PARAMS[benchmark][npb_class]
    if benchmark in ("bt", "sp", "lu"):
        per_point = 20 if benchmark == "lu" else 25
        return p["n"] ** 3 * per_point * 8 / MB
    if benchmark == "mg":
        return p["n"] ** 3 * 3.3 * 8 / MB
    if benchmark == "ft":
        return p["nx"] * p["ny"] * p["nz"] * 6 * 8 / MB
    if benchmark == "cg":
        nonzeros = p["na"] * (p["nonzer"] + 1) ** 2
        return (nonzeros * 24 + 5 * p["na"] * 8) / MB
    if benchmark == "is":
        return p["total_keys"] * 12 / MB
    return 1.0  # ep


def task_memory_mb(benchmark, npb_class, tasks):
    """Memory of one of ``tasks`` tasks of the benchmark, in MB.

    >>> round(task_memory_mb("ft", "A", 2))
    232
    >>> round(task_memory_mb("cg", "A", 4))
    52
    """
    return total_mb(benchmark, npb_class) / tasks + PROCESS_MB
