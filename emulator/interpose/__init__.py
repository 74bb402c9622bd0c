"""Real MPI programs on the emulated cluster, without root.

- ``_pmpi.c``: the interposition library (MPI's profiling interface), built by the install
  and ``LD_PRELOAD``ed into an unmodified program: every message a flow of the cluster's
  model, delivered when the model says;
- :mod:`.relay`: the model served to the program's ranks (a mirror in a shared-memory file,
  solved by a thread of the launcher);
- :mod:`.job`: one program run as one job of N ranks on named nodes of the cluster.
"""
