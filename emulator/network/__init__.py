"""The network: what the cluster is and how much bandwidth its pairs have over time.

Open ``cluster`` first (nodes, switches, hostfiles as a networkx graph), then ``scenario``
(bandwidth timelines: the stream model, static matrices, CSV traces). ``netgraph`` reads and
writes network status graphs as node-link JSON; ``sharing`` is how every flow shares the
network: one fluid model, max-min fair, for the emulator and every prediction (in C,
``_fluid``). Served to ranks elsewhere, the model has an ``owner`` that solves it and a
mirror (``_mirror``) of the flows of each host.
"""
