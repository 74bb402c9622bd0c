"""The coordinator as the batch scheduler of a non-dedicated cluster (CISNE, Hanzich et al.): jobs
(``jobs``), node selection over time-shared nodes (``placement``), application
characterization (``characterize``), turnaround estimation by on-the-fly simulation
(``cisne``), the live run on the wall clock (``live``, start here), experiments over
policies and local loads (``experiment``) and their outputs (``report``)."""
