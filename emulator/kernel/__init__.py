"""Kernel shaping: real traffic shaped by tc/HTB, on network namespaces of this machine or
on the hosts of a real cluster (needs root).

Open ``testbed`` first (namespaces, veths, a bridge, HTB; ``up`` and an idempotent
``down``). ``iproute`` builds every ip/tc argv as pure functions, ``command`` runs them and
checks each status, ``tcplayer`` plays a scenario into tc classes, and ``kernelshaper`` is the
coordinator's handle on it during a run.
"""
