"""Job workloads: Standard Workload Format traces and the workload model of England and Weissman.

Open ``swf`` first (reading and writing traces), then ``model`` (fit a trace, sample a new
one), ``runtimes`` (the run-time distributions), ``summary`` (what a trace looks like) and
``traces`` (the traces that ship with the package).
"""
