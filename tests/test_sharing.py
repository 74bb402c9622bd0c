"""The cluster's one fluid model (emulator.network.sharing and its C core), worked by hand:
the max-min solve, flows over time, scenarios, trees, and the flow table's bookkeeping."""

import math
import os
import pickle

import pytest

from emulator.network import _fluid
from emulator.network.cluster import cluster_from_dict, crossbar, load_cluster
from emulator.network.cluster import node_names as clusters_node_names
from emulator.network.generate import fat_tree
from emulator.network.cluster import links as cluster_links
from emulator.network.scenario import Timeline, generate_streams
from emulator.network.sharing import (
    BUFFER_BITS,
    ClusterModel,
    maxmin,
    model_plan,
    node_plan,
    pattern_seconds,
    resources,
    simulate,
    timeline_arrays,
)

MB = 1_000_000
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def racks(uplink_mbps=150.0, per_rack=4, count=3, port_mbps=100.0, latency_ms=0.0,
          uplink_latency_ms=0.0):
    """``count`` racks of ``per_rack`` nodes under one core switch."""
    names = [f"r{r}n{i}" for r in range(1, count + 1) for i in range(1, per_rack + 1)]
    return cluster_from_dict({
        "topology": "tree", "capacity_mbps": port_mbps, "latency_ms": latency_ms,
        "switches": ["core"] + [f"rack{r}" for r in range(1, count + 1)],
        "nodes": [{"name": n, "switch": f"rack{n[1]}"} for n in names],
        "links": [{"a": f"rack{r}", "b": "core", "capacity_mbps": uplink_mbps,
                   "latency_ms": uplink_latency_ms} for r in range(1, count + 1)]})


def static(cluster, bandwidth):
    """A timeline with ``bandwidth[frozenset((a, b))]`` on those links, capacity elsewhere."""
    links = cluster_links(cluster)
    return Timeline(links, [bandwidth.get(frozenset((a, b)), cap) for a, b, cap in links], [],
                    {"kind": "static"})


# -- the solve -----------------------------------------------------------------------------

def test_flows_on_one_resource_share_it_equally():
    assert maxmin([90.0], [0], [[0], [0], [0]]) == [30.0, 30.0, 30.0]


def test_a_flow_held_back_elsewhere_leaves_its_share_to_the_others():
    # port (0) of 100 shared by a flow limited to 10 by its pair (1) and one free flow:
    # max-min gives 10 and 90, where an equal split of the port would give 50 and 50
    assert maxmin([100.0, 10.0], [0, 0], [[0, 1], [0]]) == [10.0, 90.0]


def test_three_flows_on_an_uplink_one_held_back():
    # uplink (0) of 150: alone, three flows get 50 each; one limited to 20 by its port (1)
    # leaves 65 to each of the others
    assert maxmin([150.0], [0], [[0], [0], [0]]) == [50.0, 50.0, 50.0]
    assert maxmin([150.0, 20.0], [0, 0], [[0, 1], [0], [0]]) == [20.0, 65.0, 65.0]


def test_background_streams_take_their_share_as_flows():
    # a link of 100 carrying S = 3 streams leaves one new flow 100/4, two flows 100/5 each
    assert maxmin([100.0], [3], [[0]]) == [25.0]
    assert maxmin([100.0], [3], [[0], [0]]) == [20.0, 20.0]
    # a flow held back elsewhere leaves the streams more: 10 for it, 30 for each stream
    assert maxmin([100.0, 10.0], [3, 0], [[0, 1]]) == [10.0]


def test_bounds_cap_a_flow_and_free_the_rest():
    assert maxmin([100.0], [0], [[0], [0]], [15.0, 0.0]) == [15.0, 85.0]
    assert maxmin([1.0], [0], [[0], [0]], [0.15, 1.0]) == [pytest.approx(0.15),
                                                         pytest.approx(0.85)]


def test_a_flow_crossing_nothing_is_unlimited():
    assert maxmin([100.0], [0], [[], [0]]) == [math.inf, 100.0]


@pytest.mark.parametrize("caps, bgs, paths, match", [
    ([0.0], [0], [[0]], "capacity must be positive"),
    ([10.0], [0], [[1]], "unknown resource"),
    ([10.0], [0, 1], [[0]], "one background count per resource"),
])
def test_bad_solver_input_is_refused(caps, bgs, paths, match):
    with pytest.raises(ValueError, match=match):
        maxmin(caps, bgs, paths)


# -- resources of clusters -------------------------------------------------------------------

def test_a_crossbar_flow_crosses_its_ports_and_its_pair_and_directions_are_apart():
    res = resources(crossbar(3))
    path = [res.names[r] for r in res.paths[(0, 1)]]
    assert path == [("up", "n1"), ("pair", "n1", "n2"), ("down", "n2")]
    back = [res.names[r] for r in res.paths[(1, 0)]]
    assert not set(path) & set(back)  # full duplex: two resources per link
    assert res.names[res.cpu("n2")] == ("cpu", "n2")


def test_a_tree_flow_crosses_the_uplinks_it_travels_in_their_direction():
    res = resources(racks())
    path = [res.names[r] for r in res.paths[(0, 4)]]  # r1n1 -> r2n1
    assert path == [("up", "r1n1"), ("link", "rack1", "core"), ("link", "core", "rack2"),
                    ("down", "r2n1")]
    inside = [res.names[r] for r in res.paths[(0, 1)]]  # within a rack: no uplink
    assert inside == [("up", "r1n1"), ("down", "r1n2")]


def fabric_racks(fabric=None, uplink_sharing=None, uplink2_mbps=1000.0):
    """Two racks of two 100 Mbit/s nodes, 1 Gbit/s uplinks; rack1's switch may have a fabric
    (a dict of its fields), rack2's uplink another capacity and a sharing."""
    data = {"topology": "tree", "capacity_mbps": 100.0, "latency_ms": 0.0,
            "switches": ["core", {"name": "rack1", **(fabric or {})}, "rack2"],
            "nodes": [{"name": n, "switch": f"rack{n[1]}"} for n in ("r1a", "r1b", "r2a",
                                                                    "r2b")],
            "links": [{"a": "rack1", "b": "core", "capacity_mbps": 1000.0},
                      {"a": "rack2", "b": "core", "capacity_mbps": uplink2_mbps,
                       **({"sharing": uplink_sharing} if uplink_sharing else {})}]}
    return cluster_from_dict(data)


@pytest.mark.parametrize("fabric, seconds", [
    (None, [1.0, 1.0, 1.0]),  # the ports decide
    ({"fabric_mbps": 150.0}, [4 / 3, 4 / 3, 1.0]),  # two flows through rack1: 75 each
    ({"fabric_mbps": 50.0, "fabric_sharing": "fatpipe"}, [2.0, 2.0, 1.0]),  # each held to 50
])
def test_a_switch_fabric_is_crossed_by_the_flows_through_the_switch(fabric, seconds):
    # r1a -> r1b turns at rack1; r1b -> r2a passes through it; r2a -> r2b never meets it
    flows = [(0, "r1a", "r1b", 12.5 * MB), (0, "r1b", "r2a", 12.5 * MB),
             (0, "r2a", "r2b", 12.5 * MB)]
    got = simulate(fabric_racks(fabric), flows, latency_seconds=0.0, bucket=False)
    assert got == pytest.approx(seconds)


def test_a_fatpipe_uplink_bounds_each_flow_and_a_duplex_one_is_shared():
    two = [(0, "r1a", "r2a", 6.25 * MB), (0, "r1b", "r2b", 6.25 * MB)]
    fat = fabric_racks(uplink_sharing="fatpipe", uplink2_mbps=50.0)
    assert simulate(fat, two, latency_seconds=0.0, bucket=False) == pytest.approx([1.0, 1.0])
    assert simulate(fabric_racks(uplink2_mbps=50.0), two, latency_seconds=0.0,
                    bucket=False) == pytest.approx([2.0, 2.0])
    res = resources(fat)
    assert ("link", "rack2", "core") not in [res.names[r] for r in res.paths[(0, 2)]]


def test_stream_timelines_become_background_flows_and_matrices_capacities():
    cluster = crossbar(3)
    res = resources(cluster)
    streams = generate_streams(cluster, seed=3, duration_seconds=300)
    _, _, caps, bgs, init_cap, init_bg, duration = timeline_arrays(res, cluster, streams)
    pair = res.index[("pair", "n1", "n2")]
    link = [i for i, (a, b, _) in enumerate(streams.links) if {a, b} == {"n1", "n2"}][0]
    assert init_cap[pair] == 100e6  # the link's capacity, shared with S streams
    assert init_bg[pair] == streams.streams[0][link]
    assert streams.initial_mbps[link] == pytest.approx(100.0 / (init_bg[pair] + 1))
    assert duration == 300
    matrix = static(cluster, {frozenset(("n1", "n2")): 40.0})
    _, _, _, _, init_cap, init_bg, duration = timeline_arrays(res, cluster, matrix)
    assert (init_cap[pair], init_bg[pair], duration) == (40e6, 0, math.inf)


def _ends(model, flows):
    """When each ``(start, src, dst, bits)`` flow ends in ``model`` (its own clock)."""
    model.set_clock(epoch=0.0, time_scale=10.0, wall=0.0)
    made = [model.fluid.add(t, model.index[a], model.index[b], bits, bucket=False)
            for t, a, b, bits in flows]
    model.fluid.advance(math.inf)
    return [model.fluid.view(slot, gen, wall=math.inf)["end"] for slot, gen, _ in made]


@pytest.mark.parametrize("make", [lambda: crossbar(4), racks], ids=["crossbar", "tree"])
def test_a_model_made_from_its_plan_is_the_one_made_from_the_graph(make):
    """What a rank attaching to a shared model does: the description made elsewhere, the
    cluster unseen, the scenario's streams and the flows' ends the same."""
    cluster = make()
    streams = generate_streams(cluster, seed=5, duration_seconds=600)
    names = clusters_node_names(cluster)
    flows = [(0.1 * k, names[k % len(names)], names[(3 * k + 1) % len(names)], 40e6)
             for k in range(12) if k % len(names) != (3 * k + 1) % len(names)]
    plan = model_plan(cluster, streams)
    graph_made = ClusterModel(cluster, streams, base=0.0)
    plan_made = ClusterModel(None, None, base=0.0, plan=pickle.loads(pickle.dumps(plan)))
    assert plan_made.resources == graph_made.resources
    assert _ends(plan_made, flows) == _ends(graph_made, flows)
    assert _ends(ClusterModel(None, None, base=0.0, plan=model_plan(cluster)), flows) != \
        _ends(ClusterModel(cluster, streams, base=0.0), flows)  # the streams count


def test_a_nodes_own_plan_has_its_cpu_alone():
    model = ClusterModel(None, None, base=0.0, plan=node_plan("n7"))
    assert model.index == {"n7": 0}
    assert model.resources.names == [("up", "n7"), ("down", "n7"), ("cpu", "n7")]
    model.set_clock(epoch=0.0, wall=0.0)
    cpu = model.resources.cpu("n7")
    slot, gen, _ = model.fluid.add(0.0, 0, 0, 2.0, resource=cpu, bucket=False)
    model.fluid.advance(math.inf)
    assert model.fluid.view(slot, gen, wall=math.inf)["end"] == pytest.approx(2.0)


# -- flows over time -------------------------------------------------------------------------

def test_one_flow_takes_its_size_over_the_rate_plus_latency():
    assert simulate(crossbar(2), [(0.0, "n1", "n2", 12.5 * MB)], latency_seconds=0.0001,
                    bucket=False) == [pytest.approx(1.0001)]


def test_the_token_bucket_lets_two_frames_through_at_once():
    (end,) = simulate(crossbar(2), [(0.0, "n1", "n2", MB)], latency_seconds=0.0)
    assert end == pytest.approx((8 * MB - 8 * 3028) / 100e6)


def test_two_flows_on_one_pair_share_it_then_the_last_goes_alone():
    cluster = crossbar(2)
    first, second = simulate(cluster, [(0.0, "n1", "n2", MB), (0.02, "n1", "n2", MB)],
                             latency_seconds=0.0, bucket=False)
    # alone for 20 ms (2 Mbit), then both at 50: the first's 6 Mbit left take 0.12 s
    assert first == pytest.approx(0.14)
    # the second then has 8 - 0.12 * 50e6 / 1e6 = 2 Mbit left at 100
    assert second == pytest.approx(0.16)


def test_the_end_of_a_flow_speeds_up_the_others_at_once():
    # n1 sends to n2 and n3: each 50 on n1's port; n2's flow is 1 MB, n3's 2 MB
    small, large = simulate(crossbar(3), [(0.0, "n1", "n2", MB), (0.0, "n1", "n3", 2 * MB)],
                            latency_seconds=0.0, bucket=False)
    assert small == pytest.approx(0.16)
    assert large == pytest.approx(0.16 + 8e6 / 100e6)


def test_a_scenario_change_mid_flow_applies_from_its_instant():
    cluster = crossbar(2)
    links = cluster_links(cluster)
    timeline = Timeline(links, [100.0], [(0.05, 0, 25.0)], {"kind": "trace"})
    (end,) = simulate(cluster, [(0.0, "n1", "n2", MB)], timeline=timeline,
                      latency_seconds=0.0, bucket=False)
    # 5 Mbit by 0.05 s, the other 3 at 25 Mbit/s
    assert end == pytest.approx(0.05 + 3e6 / 25e6)
    # at time scale 10 the change comes at 0.005 s of the run
    (end,) = simulate(cluster, [(0.0, "n1", "n2", MB)], timeline=timeline, time_scale=10.0,
                      latency_seconds=0.0, bucket=False)
    assert end == pytest.approx(0.005 + (8e6 - 0.5e6) / 25e6)


def test_streams_entering_mid_flow_slow_it_as_background_flows():
    cluster = crossbar(2)
    links = cluster_links(cluster)
    timeline = Timeline(links, [100.0], [(0.04, 0, 50.0)], {"kind": "streams"},
                        ([0], [1]))  # one stream enters at 0.04 s
    (end,) = simulate(cluster, [(0.0, "n1", "n2", MB)], timeline=timeline,
                      latency_seconds=0.0, bucket=False)
    assert end == pytest.approx(0.04 + 4e6 / 50e6)
    # two flows of one job beside that stream share the link three ways
    a, b = simulate(cluster, [(0.05, "n1", "n2", MB), (0.05, "n1", "n2", MB)],
                    timeline=timeline, latency_seconds=0.0, bucket=False)
    assert a == b == pytest.approx(0.05 + 8e6 / (100e6 / 3))


def test_jobs_across_one_uplink_share_it_and_within_a_rack_do_not():
    cluster = racks(uplink_mbps=150.0)
    across = [(0.0, "r1n1", "r2n1", 10 * MB), (0.0, "r1n2", "r2n2", 10 * MB)]
    assert simulate(cluster, across, latency_seconds=0.0, bucket=False) == \
        [pytest.approx(80e6 / 75e6)] * 2
    inside = [(0.0, "r1n1", "r1n3", 10 * MB), (0.0, "r1n2", "r1n4", 10 * MB)]
    assert simulate(cluster, inside, latency_seconds=0.0, bucket=False) == \
        [pytest.approx(0.8)] * 2
    # the opposite direction of the uplink is another resource
    both = [(0.0, "r1n1", "r2n1", 10 * MB), (0.0, "r2n2", "r1n2", 10 * MB)]
    assert simulate(cluster, both, latency_seconds=0.0, bucket=False) == [pytest.approx(0.8)] * 2


def test_a_node_to_itself_crosses_no_link():
    assert simulate(crossbar(2), [(0.5, "n1", "n1", 10 * MB)], latency_seconds=0.001) == \
        [pytest.approx(0.501)]


def test_simulate_refuses_unknown_nodes_and_negative_sizes():
    with pytest.raises(ValueError, match="not a node"):
        simulate(crossbar(2), [(0.0, "n1", "x", 1)])
    with pytest.raises(ValueError, match="size_bytes >= 0"):
        simulate(crossbar(2), [(0.0, "n1", "n2", -1)])


def test_pattern_seconds_is_the_fluid_model_of_one_iteration():
    import networkx as nx

    pattern = nx.Graph()
    pattern.add_edge(0, 1, bytes=2 * MB)
    pattern.add_edge(0, 2, bytes=4 * MB)
    # rank 0 sends 1 and 2 MB over its port of 100: 50 each until the 1 MB flow ends
    seconds = pattern_seconds(pattern, {0: "a", 1: "b", 2: "c"}, lambda u, v: 1000.0,
                              port_mbps=lambda u: 100.0)
    assert seconds == pytest.approx(0.16 + 0.08)


# -- the flow table ----------------------------------------------------------------------

def test_a_sender_is_released_when_what_is_left_fits_its_buffer():
    model = ClusterModel(crossbar(2), base=0.0)
    model.set_clock(epoch=0.0, wall=0.0)
    size_bits = BUFFER_BITS + 8e6
    slot, gen, start = model.fluid.add(0.0, 0, 1, size_bits, refs=2, bucket=False)
    view = model.fluid.view(slot, gen, wall=0.01, party=_fluid.SENDER)
    assert not view["released"] and view["release"] == pytest.approx(0.08)
    view = model.fluid.view(slot, gen, wall=0.1)
    assert view["released"] and not view["done"]
    assert view["end"] == pytest.approx(size_bits / 100e6)


def test_a_slot_lives_until_every_holder_lets_go():
    model = ClusterModel(crossbar(2), base=0.0, max_flows=2)
    model.set_clock(epoch=0.0, wall=0.0)
    slot, gen, _ = model.fluid.add(0.0, 0, 1, 8e6, refs=2, bucket=False)
    model.fluid.advance(1.0)  # done in the model
    model.fluid.drop(slot, gen, party=_fluid.SENDER)
    assert model.fluid.view(slot, gen, wall=1.0)["done"]  # the receiver still holds it
    model.fluid.drop(slot, gen, party=_fluid.RECEIVER)
    with pytest.raises(KeyError):
        model.fluid.view(slot, gen, wall=1.0)
    assert model.fluid.counts()["free"] == 2


def test_a_full_table_is_an_error_not_a_crash():
    model = ClusterModel(crossbar(2), base=0.0, max_flows=1)
    model.fluid.add(0.0, 0, 1, 8e6)
    with pytest.raises(RuntimeError, match="full"):
        model.fluid.add(0.0, 0, 1, 8e6)


def test_dilation_stretches_the_model_and_the_scenario_clock():
    cluster = crossbar(2)
    links = cluster_links(cluster)
    timeline = Timeline(links, [100.0], [(1.0, 0, 50.0)], {"kind": "trace"})
    model = ClusterModel(cluster, timeline, base=0.0)
    model.set_clock(epoch=0.0, dilation=4.0, wall=0.0)
    slot, gen, _ = model.fluid.add(0.0, 0, 1, 8e6, bucket=False)
    # 25 Mbit/s of wall time until scenario second 1 (wall 4 s): 8 Mbit take 0.32 s
    assert model.fluid.view(slot, gen, wall=10.0)["end"] == pytest.approx(0.32)
    # after the change, 12.5 Mbit/s of wall time; a flow never starts before the model's
    # clock (here 10 s, where the view above left it)
    slot, gen, start = model.fluid.add(4.0, 0, 1, 8e6, bucket=False)
    assert start == 10.0
    assert model.fluid.view(slot, gen, wall=20.0)["end"] == pytest.approx(10.0 + 0.64)
    assert model.clock()["scenario_seconds_played"] == pytest.approx(20.0 / 4.0)


@pytest.mark.parametrize("make", [lambda: crossbar(5), racks,
                                  lambda: cluster_from_dict(fat_tree(4, link_mbps=100)),
                                  lambda: load_cluster(os.path.join(ROOT, "hostfiles",
                                                                    "tree16.toml"))])
def test_routes_give_every_pair_the_links_of_its_path_in_order(make):
    """Paths are made from the routes (O(n)), not stored per pair: each is the cluster's
    own path, link by link in the direction travelled, and the model's flows cross it."""
    import networkx as nx

    cluster = make()
    res = resources(cluster)
    nodes = res.nodes
    for i, u in enumerate(nodes):
        hops_from = nx.single_source_shortest_path(cluster, u)
        for j, v in enumerate(nodes):
            if i == j:
                continue
            names = [res.names[r] for r in res.paths[(i, j)]]
            if cluster.graph["topology"] == "crossbar":
                assert names == [("up", u), ("pair", u, v), ("down", v)]
                continue
            hops = hops_from[v]
            expected = [("up", u)] + [("link", a, b) for a, b in zip(hops[1:-1], hops[2:-1])] \
                + [("down", v)]
            assert names == expected, (u, v)
    assert len(res.paths) == len(nodes) * (len(nodes) - 1)


def test_a_route_longer_than_a_flow_can_hold_is_refused_by_name():
    # a chain of 16 switches: a to b crosses its port, 15 switch links and b's port (17);
    # a to c, on the 15th switch, crosses 16 and is taken
    switches = [f"s{k}" for k in range(16)]
    cluster = cluster_from_dict({"topology": "tree", "switches": switches,
                                 "nodes": [{"name": "a", "switch": "s0"},
                                           {"name": "b", "switch": "s15"},
                                           {"name": "c", "switch": "s14"}],
                                 "links": [{"a": x, "b": y} for x, y in zip(switches,
                                                                            switches[1:])]})
    model = ClusterModel(cluster, None, base=0.0, max_flows=4)
    with pytest.raises(ValueError, match="the route from node 0 to 1 crosses more than 16"):
        model.fluid.add(0.0, 0, 1, 1e6)
    slot, gen, _ = model.fluid.add(0.0, 0, 2, 1e6, bucket=False)
    assert model.fluid.view(slot, gen, wall=0.0)["rate"] == pytest.approx(100e6)
    assert len(model.resources.paths[(0, 2)]) == 16


def test_pattern_seconds_by_hand_at_its_edges():
    """2.5 MB an edge, half each way: 1e7 bits at 10 Mbit/s is 1 s; two edges out of one
    node behind a 10 Mbit/s port share it (2 s, exactly); an edge without bytes, or one
    whose ranks share a node, sends nothing; no capacity at all is never done, a tiny one
    takes its time."""
    import networkx as nx

    from emulator.network.sharing import fluid_seconds, pattern_seconds

    p = nx.Graph()
    p.add_edge(0, 1, bytes=2_500_000)
    ten = {0: "a", 1: "b", 2: "c"}
    assert pattern_seconds(p, ten, lambda u, v: 10.0) == 1.0
    p.add_edge(0, 2)  # no bytes: no flow, and no share of a's port taken
    assert pattern_seconds(p, ten, lambda u, v: 10.0, port_mbps=lambda n: 10.0) == 1.0
    p.add_edge(0, 2, bytes=2_500_000)
    assert pattern_seconds(p, ten, lambda u, v: 10.0, port_mbps=lambda n: 10.0) == 2.0
    assert pattern_seconds(p, ten, lambda u, v: 10.0, port_mbps=lambda n: 100.0) == 1.0
    assert pattern_seconds(p, {0: "a", 1: "a", 2: "a"}, lambda u, v: 10.0) == 0.0
    empty = nx.Graph()
    empty.add_edge(0, 1, bytes=0)
    assert pattern_seconds(empty, ten, lambda u, v: 10.0) == 0.0
    assert pattern_seconds(p, ten, lambda u, v: 0.0) == math.inf
    one = nx.Graph()
    one.add_edge(0, 1, bytes=2)  # 8 bits each way at 0.1 bit/s
    assert pattern_seconds(one, ten, lambda u, v: 1e-7) == pytest.approx(80.0)
    assert fluid_seconds([], [], []) == 0.0


def test_model_simulation_takes_flows_in_any_order():
    """The same flows listed out of start order end at the same times, each reported in
    the place it was given."""
    flows = [(0.5, "n1", "n2", 1_250_000), (0.0, "n1", "n2", 12_500_000),
             (0.25, "n3", "n2", 1_250_000)]  # the first 1 s alone at 100 Mbit/s
    ends = simulate(crossbar(3), flows, latency_seconds=0.0, bucket=False)
    again = simulate(crossbar(3), sorted(flows), latency_seconds=0.0, bucket=False)
    assert ends == pytest.approx([again[2], again[0], again[1]])
    assert ends[1] > 1.0 and len(set(ends)) == 3  # slowed by the two that share with it


def test_pattern_seconds_charges_each_round_its_placed_latency_and_cost():
    """Rounds wait the mean latency over the pattern's edges as placed, plus the message
    cost: across racks a chain pays the rack link's latency, within one it does not; ranks
    on one node wait none; a pattern that gives no rounds waits its largest degree; the
    flows overlap the waits."""
    import networkx as nx

    from emulator.network.cluster import latency_function
    from emulator.network.sharing import pattern_rounds

    latency = latency_function(racks(per_rack=2, count=2, latency_ms=0.1,
                                     uplink_latency_ms=0.5))
    a, b, c = "r1n1", "r1n2", "r2n1"  # 0.2 ms from a to b, 1.2 ms from a to c
    chain = nx.Graph(rounds=10)
    chain.add_edges_from([(0, 1), (1, 2)], bytes=0)
    free = lambda u, v: 1e9  # noqa: E731
    near = pattern_seconds(chain, {0: a, 1: b, 2: a}, free, latency_seconds=latency)
    assert near == pytest.approx(10 * 0.0002)
    far = pattern_seconds(chain, {0: a, 1: b, 2: c}, free, latency_seconds=latency)
    assert far == pytest.approx(10 * (0.0002 + 0.0012) / 2)
    assert pattern_seconds(chain, {0: a, 1: b, 2: c}, free, latency_seconds=latency,
                           message_seconds=0.001) == pytest.approx(far + 10 * 0.001)
    assert pattern_seconds(chain, {0: a, 1: a, 2: a}, free, latency_seconds=latency,
                           message_seconds=0.001) == 0.0
    del chain.graph["rounds"]
    assert pattern_seconds(chain, {0: a, 1: b, 2: a}, free,
                           latency_seconds=latency) == pytest.approx(2 * 0.0002)
    assert pattern_seconds(chain, {0: a, 1: b, 2: a}, free) == 0.0
    assert pattern_seconds(chain, {0: a, 1: b, 2: a}, free,
                           message_seconds=0.001) == pytest.approx(2 * 0.001)  # cost alone
    chain.graph["rounds"] = 1
    assert pattern_seconds(chain, {0: a, 1: b, 2: a}, free,
                           latency_seconds=latency) == pytest.approx(0.0002)
    assert pattern_rounds(nx.Graph()) == 0.0  # no ranks, no rounds
    collectives = nx.Graph(rounds=3)  # EP's: no edges, three allreduces' rounds
    collectives.add_nodes_from([0, 1, 2])
    assert pattern_seconds(collectives, {0: a, 1: b, 2: c}, free, latency_seconds=latency) \
        == pytest.approx(3 * (0.0002 + 0.0012 + 0.0012) / 3)
    assert pattern_seconds(collectives, {0: a, 1: a, 2: a}, free, latency_seconds=latency) == 0
    # flows and waits overlap: the iteration lasts the longer of the two
    chain.graph["rounds"] = 10
    chain.edges[0, 1]["bytes"] = 2_500_000  # 1 s at 10 Mbit/s
    ten = lambda u, v: 10.0  # noqa: E731
    assert pattern_seconds(chain, {0: a, 1: b, 2: c}, ten,
                           latency_seconds=latency) == pytest.approx(1.0)
    assert pattern_seconds(chain, {0: a, 1: b, 2: c}, ten, latency_seconds=latency,
                           message_seconds=0.2) == pytest.approx(far + 10 * 0.2)


def test_message_costs_are_the_clusters_latency_and_the_paths_cost_over_the_dilation():
    from emulator.network.sharing import SKELETON_MESSAGE_SECONDS, message_costs

    costs = message_costs(crossbar(3, latency_ms=0.25), 4.0, 2e-5)
    assert costs["message_seconds"] == pytest.approx(5e-6)
    assert costs["latency_seconds"]("n1", "n3") == pytest.approx(0.00025)
    assert costs["latency_seconds"]("n2", "n2") == 0.0
    far = message_costs(racks(per_rack=1, count=2, uplink_latency_ms=1.0))
    assert far["latency_seconds"]("r1n1", "r2n1") == pytest.approx(0.002)
    assert far["message_seconds"] == SKELETON_MESSAGE_SECONDS
