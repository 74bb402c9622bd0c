"""nodesel: a cluster emulator and scheduler for shared clusters, driven by MPI.

The subpackages follow the flow of the program:

- ``network``: clusters, bandwidth scenarios, status graphs and the flow model;
- ``shaping`` and ``kernel``: the two ways traffic is shaped (in-process, or by tc);
- ``selection``: communication patterns and max-min node selection;
- ``coordinator``: the MPI runtime (rank 0 coordinates, ranks 1..N are nodes), measurement,
  local load and the selection pipeline;
- ``experiments``: the Figure 3 experiment and selection for users' own programs;
- ``cli``: the ``nodesel`` command, one module per command group.

``errors`` (the exceptions a user sees) and ``files`` (atomic result files) serve them all.
"""

import os as _os

if any(k in _os.environ for k in ("PMI_RANK", "OMPI_COMM_WORLD_RANK")):
    # A rank emulates one node, and ranks outnumber cores: one BLAS thread each. (OpenBLAS's
    # idle workers spin for a while after loading, about 6% of a core per rank here.)
    _os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
