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
