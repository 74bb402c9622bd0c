"""Node selection: which nodes a job should run on, given its communication pattern.

Open ``maxmin`` first (max-min bandwidth pruning that respects the pattern, Figure 1 of
Goteti and Subhlok, and the all-all and random baselines); ``matcher`` is its embedding
test (a backtracking search on bitsets, in C); ``symmetry`` gives the search what a
pattern's structure tells (rank order, symmetry-breaking conditions); ``patterns`` holds
the pattern library (the NAS benchmarks as NPB's MPI code communicates, generic shapes),
``patternfile`` the patterns a user gives (matrices, pattern files).
"""

# the ways a job's candidate groups are chosen (``emulator.coordinator.pipeline.select``)
METHODS = ("pattern", "all-all", "random")
