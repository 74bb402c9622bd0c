"""The fluid model's incremental solve gives the full solve's rates after every change.

Each case drives one model through random flows (messages, bounded and persistent flows on
a node's CPU or on a path, drops) and scenario changes (capacities and background streams
of the stream model), and after every change compares the rates with a full solve of every
active flow by the reference solver (``Fluid.check``); then plays the same case again with
full solves only and compares every flow's end."""

import mmap
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from emulator.network import _fluid
from emulator.network.cluster import cluster_from_dict, crossbar
from emulator.network.generate import fat_tree, racks
from emulator.network.scenario import generate_streams
from emulator.network.sharing import ClusterModel, model_plan, state_bytes

TOLERANCE = 1e-9  # relative, per flow

def racks_with_fabrics():
    """Racks whose switches have fabrics (one a FATPIPE) and whose first uplink is FATPIPE."""
    data = racks(3, 4, port_mbps=100, oversubscription=2)
    data["switches"] = ["core", {"name": "rack1", "fabric_mbps": 150.0},
                        {"name": "rack2", "fabric_mbps": 80.0, "fabric_sharing": "fatpipe"},
                        {"name": "rack3", "fabric_mbps": 250.0}]
    data["links"][0]["sharing"] = "fatpipe"
    return cluster_from_dict(data)


CLUSTERS = {
    "racks 2:1": lambda: cluster_from_dict(racks(3, 4, port_mbps=100, oversubscription=2)),
    "racks, fabrics, fatpipes": racks_with_fabrics,
    "fat tree k=4": lambda: cluster_from_dict(fat_tree(4, link_mbps=100)),
    "crossbar 6": lambda: crossbar(6),
}


def models_on_one_window(cluster, timeline, handles):
    """``handles`` models over one block of memory, as the ranks of a machine map one MPI
    window: each keeps its own scratch between the solves it makes."""
    plan = model_plan(cluster, timeline)
    memory = mmap.mmap(-1, state_bytes(plan, 2048))
    first = ClusterModel(cluster, timeline, window=memory, create=True, max_flows=2048,
                         plan=plan, base=0.0)
    return [first] + [ClusterModel(cluster, timeline, window=memory, create=False,
                                   max_flows=2048, plan=plan) for _ in range(handles - 1)]


def play(cluster, seed, ops, *, streams, check, per_second=40.0, handles=1):
    """Drive a model through ``ops`` random changes, ``per_second`` a second, each made
    through one of ``handles`` models sharing the state (by default one, private); returns
    (worst difference from a full solve after a change, each flow's end, the counts)."""
    rng = random.Random(seed)
    timeline = generate_streams(cluster, seed=seed, duration_seconds=60,
                                interval_seconds=0.05) if streams else None
    models = [ClusterModel(cluster, timeline, base=0.0, max_flows=2048)] if handles == 1 \
        else models_on_one_window(cluster, timeline, handles)
    model = models[0]
    model.set_clock(epoch=0.0, wall=0.0)
    fluid, n = model.fluid, len(model.nodes)
    worst, t, held, ends = 0.0, 0.0, [], {}
    messages = []
    for _ in range(ops):
        t += rng.expovariate(per_second)
        if handles > 1:  # a rank of the machine makes this change
            fluid = models[rng.randrange(handles)].fluid
        kind = rng.random()
        src, dst = rng.randrange(n), rng.randrange(n)
        if kind < 0.75:
            slot, gen, _ = fluid.add(t, src, dst, rng.uniform(1e4, 4e7), bucket=False)
            messages.append((slot, gen))
        elif kind < 0.9:
            on_cpu = rng.random() < 0.5
            resource = model.resources.index[("cpu", model.nodes[src])] if on_cpu else -1
            held.append(fluid.add(t, src, src if on_cpu else dst, 0.0, persistent=True,
                                  bound=rng.choice([0.0, 0.3, 2e7]), resource=resource)[:2])
        elif held:
            slot, gen = held.pop(rng.randrange(len(held)))
            fluid.drop(slot, gen, wall=t)
        fluid.advance(t)
        if check:
            worst = max(worst, fluid.check())
    for slot, gen in held:
        fluid.drop(slot, gen, wall=t)
    while fluid.next_event() < 1e9:
        if handles > 1:
            fluid = models[rng.randrange(handles)].fluid
        fluid.advance(fluid.next_event())
        if check:
            worst = max(worst, fluid.check())
    for slot, gen in messages:
        ends[(slot, gen)] = fluid.view(slot, gen, wall=t)["end"]
    return worst, ends, fluid.counts()


@settings(max_examples=60, deadline=None)
@given(name=st.sampled_from(sorted(CLUSTERS)), seed=st.integers(0, 10_000),
       streams=st.booleans())
def test_after_every_change_the_rates_are_the_full_solves(name, seed, streams):
    worst, _, counts = play(CLUSTERS[name](), seed, 120, streams=streams, check=True)
    assert worst <= TOLERANCE
    assert counts["solves"] > 100


@pytest.mark.parametrize("name", sorted(CLUSTERS))
def test_every_flow_ends_when_full_solves_say(name):
    cluster = CLUSTERS[name]()
    _, ends, counts = play(cluster, 7, 300, streams=True, check=False)
    was = _fluid.set_incremental(False)
    try:
        _, full_ends, full_counts = play(cluster, 7, 300, streams=True, check=False)
    finally:
        _fluid.set_incremental(was)
    assert ends.keys() == full_ends.keys() and len(ends) > 150
    for key, end in ends.items():
        assert end == pytest.approx(full_ends[key], rel=TOLERANCE, abs=1e-12), key
    assert full_counts["full_solves"] == full_counts["solves"]
    assert counts["full_solves"] < counts["solves"]  # the incremental path ran


def test_a_change_on_one_side_of_a_fat_tree_leaves_the_rest_unsolved():
    # 64 flows inside pod 1, 1 flow inside pod 2: the pod-2 flow's end re-solves itself
    model = ClusterModel(cluster_from_dict(fat_tree(8, link_mbps=100)), None, base=0.0,
                         max_flows=256)
    fluid = model.fluid
    for i in range(16):
        for j in range(4):
            fluid.add(0.0, i, (i + 1 + j) % 16, 1e9, bucket=False)
    fluid.add(0.0, 20, 21, 1e6, bucket=False)
    before = fluid.counts()
    fluid.advance(fluid.next_event())  # the small flow ends
    after = fluid.counts()
    assert after["active"] == 64 and after["solves"] == before["solves"] + 1
    assert after["full_solves"] == before["full_solves"]
    assert after["round_flows"] - before["round_flows"] == 0  # nobody shared its resources
    assert fluid.check() <= TOLERANCE


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(sorted(CLUSTERS)), seed=st.integers(0, 10_000))
def test_on_a_loaded_network_the_rates_are_the_full_solves(name, seed):
    """Ten times the changes a second: most resources saturated, most changes reach far,
    and the flows below each change's floor are left out of its solve."""
    worst, _, counts = play(CLUSTERS[name](), seed, 200, streams=False, check=True,
                            per_second=400.0)
    assert worst <= TOLERANCE
    assert counts["active"] == 0 and counts["solves"] > 200


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(sorted(CLUSTERS)), seed=st.integers(0, 10_000))
def test_ranks_solving_one_shared_model_in_turn_keep_the_full_solves_rates(name, seed):
    """Three handles on one window, as three ranks of a machine, each making some of the
    changes (and the solves they bring) on a loaded network. A solve whose floor leaves
    nothing to solve once wrote the saturation of the resources that handle's last solve
    had reached, from its own scratch: on one machine's shared model, flows then kept the
    rates of a resource that no longer held them back (a flow of `nodesel flows` 100 ms
    late)."""
    worst, _, counts = play(CLUSTERS[name](), seed, 200, streams=False, check=True,
                            per_second=400.0, handles=3)
    assert worst <= TOLERANCE
    assert counts["active"] == 0 and counts["solves"] > 200


def solved_without_and_with_the_floor(build, change):
    """Flows solved by ``change(fluid)`` on the model ``build()`` makes, without and with
    the floor, with the worst difference from a full solve after it and the rounds."""
    out = []
    for pruning in (False, True):
        was = _fluid.set_pruning(pruning)
        try:
            fluid = build()
            before = fluid.counts()
            change(fluid)
            after = fluid.counts()
            out.append((after["round_flows"] - before["round_flows"], fluid.check(),
                        after["rounds"] - before["rounds"]))
        finally:
            _fluid.set_pruning(was)
    return out


def crossbar_with_a_slow_crowd():
    """Node 2 sends nine flows to node 3 and one to node 1 (10 Mbit/s each, its port the
    bottleneck); node 0 sends one fast flow to node 1 (90 Mbit/s), to end first."""
    model = ClusterModel(crossbar(4), None, base=0.0, max_flows=64)
    fluid = model.fluid
    for _ in range(9):
        fluid.add(0.0, 2, 3, 1e12, bucket=False)
    fluid.add(0.0, 2, 1, 1e12, bucket=False)
    fluid.add(0.0, 0, 1, 1e6, bucket=False)
    return fluid


def test_a_fast_flow_that_ends_leaves_the_slower_ones_out_of_the_solve():
    (without, worst_without, _), (with_floor, worst, _) = solved_without_and_with_the_floor(
        crossbar_with_a_slow_crowd, lambda fluid: fluid.advance(fluid.next_event()))
    # node 1's port loses its 90 Mbit/s flow: without the floor its 10 Mbit/s flow is solved
    # again (and stays, held by node 2's port); below the ended flow's rate nothing changes
    assert (with_floor, without) == (0, 1)
    assert worst <= TOLERANCE and worst_without <= TOLERANCE


def test_a_new_fast_flow_leaves_the_slower_ones_out_of_the_solve():
    def start(fluid):
        fluid.add(0.0, 0, 1, 1e6, bucket=False)  # a second 0 -> 1 flow: 45 and 45

    (without, _, _), (with_floor, worst, rounds) = solved_without_and_with_the_floor(
        crossbar_with_a_slow_crowd, start)
    # its floor is 45 Mbit/s (node 0's and node 1's ports): the two 0 -> 1 flows are solved,
    # and without the floor the 10 Mbit/s flow on node 1's port too
    assert (with_floor, without, rounds) == (2, 3, 1)
    assert worst <= TOLERANCE


def process_rounds():
    """(rounds, flows solved in them) of this process's incremental solves so far."""
    counts = ClusterModel(crossbar(2), None, base=0.0, max_flows=4).fluid.counts()
    return counts["rounds"], counts["round_flows"]


@settings(max_examples=20, deadline=None)
@given(name=st.sampled_from(sorted(CLUSTERS)), seed=st.integers(0, 10_000))
def test_a_round_that_reuses_the_last_rounds_counts_solves_to_the_bit(name, seed):
    """Within a solve F only grows: a round counts only the flows that joined it, and the
    fastest flow outside F on a resource holds while that flow stays outside. Against every
    round counting and scanning afresh, on a loaded network: the same ends, to the bit, and
    the same rounds."""
    cluster = CLUSTERS[name]()
    before = process_rounds()
    _, ends, counts = play(cluster, seed, 200, streams=False, check=False, per_second=400.0)
    reused = process_rounds()
    was = _fluid.set_caching(False)
    try:
        _, fresh_ends, _ = play(cluster, seed, 200, streams=False, check=False,
                                per_second=400.0)
    finally:
        _fluid.set_caching(was)
    fresh = process_rounds()
    assert ends == fresh_ends
    assert [b - a for a, b in zip(before, reused)] == [b - a for a, b in zip(reused, fresh)]
    assert reused[0] - before[0] > counts["solves"] - counts["full_solves"]  # F grew in some
