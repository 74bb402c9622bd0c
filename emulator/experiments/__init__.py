"""Experiments on the emulated cluster, and selection for users' own programs.

Open ``figure3`` first (the Figure 3 experiment of Goteti and Subhlok: selection methods
compared on one scenario timeline); ``report`` turns its rows into intervals, tables and the
plot, and ``userjob`` runs the same selection for real MPI programs (``nodesel run``).
"""
