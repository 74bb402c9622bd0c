"""Skeletons through the fluid model in one process (skeletons.simulate): hand-worked
times, shared CPUs and links, and a run that cannot go on."""

import pytest

from emulator.network.cluster import crossbar
from skeletons import NODE_MFLOPS
from skeletons.simulate import SimComm, SimulationError, Simulator

EP_S_FLOPS = 30 * 2 ** 25  # EP class S: 30 flops per random number, 2^25 of them


def test_ep_alone_is_its_compute_and_a_local_user_takes_its_share():
    sim = Simulator(crossbar(2), latency_seconds=0.0)
    job = sim.add_job("ep", "S", ["n1", "n2"])
    got = sim.run()[job]
    assert got["seconds"] == pytest.approx(EP_S_FLOPS / 2 / (NODE_MFLOPS * 1e6))
    assert got["cpu_seconds"] == pytest.approx(EP_S_FLOPS / 2 / (NODE_MFLOPS * 1e6))
    loaded = Simulator(crossbar(2), latency_seconds=0.0, local_cpu={"n1": 0.15})
    job = loaded.add_job("ep", "S", ["n1", "n2"])
    # n1's rank computes at 0.85 and the reductions wait for it
    assert loaded.run()[job]["seconds"] == pytest.approx(got["seconds"] / 0.85)


def test_two_jobs_on_the_same_nodes_share_cpus_and_links():
    """Two EPs on the same nodes: each phase at half the CPU. Two IS class-A jobs started
    together in lockstep: every phase shared two ways, twice the time alone (but for the
    pairs' token buckets and the small messages they let through at once)."""
    sim = Simulator(crossbar(2), latency_seconds=0.0)
    a, b = (sim.add_job("ep", "S", ["n1", "n2"]) for _ in range(2))
    both = sim.run()
    assert both[a]["seconds"] == pytest.approx(2 * EP_S_FLOPS / 2 / (NODE_MFLOPS * 1e6))
    assert both[b]["cpu_seconds"] == pytest.approx(EP_S_FLOPS / 2 / (NODE_MFLOPS * 1e6))
    nodes = ["n1", "n2", "n3", "n4"]
    alone = Simulator(crossbar(4), latency_seconds=0.0)
    job = alone.add_job("is", "A", nodes, iterations=2)
    one = alone.run()[job]["seconds"]
    sim = Simulator(crossbar(4), latency_seconds=0.0)
    a, b = (sim.add_job("is", "A", nodes, iterations=2) for _ in range(2))
    got = sim.run()
    assert got[a]["seconds"] == pytest.approx(2 * one, rel=0.01)
    assert got[b]["seconds"] == pytest.approx(2 * one, rel=0.01)
    # on other nodes they do not meet
    sim = Simulator(crossbar(8), latency_seconds=0.0)
    a = sim.add_job("is", "A", nodes, iterations=2)
    b = sim.add_job("is", "A", ["n5", "n6", "n7", "n8"], iterations=2, start_seconds=0.01)
    got = sim.run()
    assert got[a]["seconds"] == pytest.approx(one) and got[b]["seconds"] == pytest.approx(one)
    assert got[b]["start"] == 0.01 and got[b]["end"] == pytest.approx(0.01 + one, abs=1e-3)


def test_a_message_takes_size_over_bandwidth_plus_latency():
    """Through SimComm directly: 1.25 MB at 100 Mbit/s, less the pair's token bucket (two
    1514-byte frames pass at once, as HTB's burst), plus 1 ms of latency; the send holds
    its sender until what is left fits the 512 KiB socket buffer."""
    import numpy as np

    sim = Simulator(crossbar(2), latency_seconds=0.001)
    sim.jobs.append({"comms": None, "mailbox": {}, "posted": {}})
    s, r = SimComm(sim, 0, 0, ["n1", "n2"]), SimComm(sim, 0, 1, ["n1", "n2"])
    payload = np.arange(1_250_000, dtype=np.uint8)
    into = np.zeros_like(payload)
    recv = r.Irecv(into, 0)
    send = s.Isend(payload, 1)
    paced = 1_250_000 - 2 * 1514
    assert not send.done and recv.due() == pytest.approx(paced * 8 / 100e6 + 0.001)
    assert send.due() == pytest.approx((paced - 512 * 1024) * 8 / 100e6)
    sim.now = 0.101
    sim.model.fluid.advance(sim.now)
    assert send.Test() and recv.Test() and (into == payload).all()


def test_every_message_pays_the_paths_cost_beyond_its_latency():
    """A zero-byte ping-pong through SimComm: each one-way trip is the latency plus the
    path's per-message cost (scripts/calibrate_messages), which may not be negative."""
    import numpy as np

    sim = Simulator(crossbar(2), latency_seconds=0.0001, message_seconds=0.00003)
    sim.jobs.append({"comms": None, "mailbox": {}, "posted": {}})
    a, b = SimComm(sim, 0, 0, ["n1", "n2"]), SimComm(sim, 0, 1, ["n1", "n2"])
    empty = np.zeros(0, dtype=np.uint8)
    recv = b.Irecv(empty, 0)
    assert a.Isend(empty, 1).done and recv.due() == pytest.approx(0.00013)
    with pytest.raises(ValueError, match="message_seconds"):
        Simulator(crossbar(2), message_seconds=-1e-6)


def test_a_receive_nobody_sends_is_a_clear_error():
    from skeletons import SKELETONS, register

    @register
    def lonely_(run):  # rank 0 waits for a message rank 1 never sends
        if run.rank == 0:
            run.comm.Recv(run.buffer(1), 1, tag=5)
        return 1

    try:
        sim = Simulator(crossbar(2))
        from emulator.selection import patterns

        patterns.CLASS_PARAMS.setdefault("lonely", {"S": {}})
        sim.add_job("lonely", "S", ["n1", "n2"])
        with pytest.raises(SimulationError, match="never comes"):
            sim.run()
    finally:
        SKELETONS.pop("lonely", None)
        patterns.CLASS_PARAMS.pop("lonely", None)


def test_a_message_waits_its_paths_latency_on_a_tree():
    from emulator.network.cluster import cluster_from_dict

    tree = cluster_from_dict({"topology": "tree", "latency_ms": 0.1, "switches": ["s", "t"],
                              "nodes": [{"name": "a", "switch": "s"},
                                        {"name": "b", "switch": "s"},
                                        {"name": "c", "switch": "t"}],
                              "links": [{"a": "s", "b": "t", "latency_ms": 1.0}]})
    sim = Simulator(tree)
    assert sim.latency("a", "b") == pytest.approx(0.0002)
    assert sim.latency("a", "c") == pytest.approx(0.0012)
    assert sim.latency("c", "c") == 0.0
    assert Simulator(tree, latency_seconds=0.005).latency("a", "c") == 0.005
    from emulator.network.sharing import simulate

    near, far = simulate(tree, [(0, "a", "b", 0), (0, "a", "c", 0)], bucket=False)
    assert (near, far) == (pytest.approx(0.0002), pytest.approx(0.0012))


@pytest.mark.parametrize("name,nprocs", [("mg", 4), ("is", 8), ("ft", 8), ("bt", 4), ("lu", 4)])
def test_a_patterns_rounds_are_the_latencies_its_skeleton_waits(name, nprocs):
    """What one more millisecond of latency costs a skeleton's run, in the model, over its
    iterations: the rounds its pattern charges predictions (within 20%; LU's wavefronts
    hide some behind their compute). Without rounds a prediction has no latency at all."""
    from emulator.selection.patterns import CLASS_PARAMS, builtin_pattern

    def seconds(latency):
        sim = Simulator(crossbar(nprocs), latency_seconds=latency)
        job = sim.add_job(name, "S", [f"n{i}" for i in range(1, nprocs + 1)])
        return sim.run()[job]["seconds"]

    waited = (seconds(0.001) - seconds(0.0)) / 0.001 / CLASS_PARAMS[name]["S"]["niter"]
    rounds = builtin_pattern(name, nprocs, npb_class="S").graph["rounds"]
    assert rounds == pytest.approx(waited, rel=0.2), (rounds, waited)
