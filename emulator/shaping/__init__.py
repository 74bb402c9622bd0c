"""In-process shaping: MPI messages between node ranks paced to the scenario's bandwidths,
with no root needed.

Open ``comm`` first (the shaped group communicator), then ``network`` (its view of the
cluster's fluid model, latencies and dilation). ``collectives`` builds collectives from its
point-to-point messages, ``doorbell`` wakes waiting ranks without spinning, and ``timing``
makes sleeps and compute phases last what they ask for. ``engine`` binds the communicator's
message path in C (``_engine.c``) where the MPI library allows.
"""

from . import engine  # noqa: E402,F401  (registers the compiled message path with comm)
