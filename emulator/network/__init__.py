"""The network: what the cluster is and how much bandwidth its pairs have over time.

Open ``cluster`` first (nodes, switches, hostfiles as a networkx graph), then ``scenario``
(bandwidth timelines: the stream model, static matrices, CSV traces). ``netgraph`` reads and
writes network status graphs as node-link JSON; ``flowmodel`` predicts how flows share links.
"""
