"""The model served across hosts: a host's mirror, and the owner and an agent in one process."""

import math
import time

import pytest
from mpi4py import MPI

from emulator.network import cluster as clusters
from emulator.network.sharing import BUFFER_BITS, ClusterModel, Flow, simulate
from emulator.network import _mirror
from emulator.shaping.doorbell import Doorbell
from emulator.shaping.served import Agent, ClockOffset, Owner, host_skew_seconds

STRIDE = _mirror.HOST_STRIDE
RECEIVER, SENDER = 1, 2


def mirror(host=0, hosts=2, node_host=(0, 0, 1, 1), slots=64):
    return _mirror.Mirror(host, hosts, list(node_host), slots, BUFFER_BITS)


def test_a_send_takes_a_slot_here_and_its_start_waits_in_the_outbox():
    m = mirror()
    gid, gen, start = m.add(10.0, 0, 2, 8e6, refs=2)
    assert gid < STRIDE and start == 10.0  # host 0: its slots are ids 0..STRIDE-1
    assert m.pending() == 1
    (event,) = m.take()
    kind, eid, egen, src, dst, amount, bound, resource, persistent, bucket, wall, bell = event
    assert (kind, eid, egen, src, dst, amount, wall) == (_mirror.START, gid, gen, 0, 2, 8e6, 10.0)
    assert m.pending() == 0 and m.take() == []
    view = m.view(gid, gen)
    assert not view["done"] and not view["released"] and math.isinf(view["end"])


def test_a_send_to_another_host_is_freed_when_its_end_is_reported():
    m = mirror()
    gid, gen, _ = m.add(0.0, 0, 2, 8e6, refs=1)  # receiver on host 1, no hold: nobody reads it
    free = m.counts()["free"]
    assert m.apply([(gid, gen, _mirror.DONE, 3.0)]) == 0
    assert m.counts()["free"] == free + 1
    with pytest.raises(KeyError):
        m.view(gid, gen)


def test_a_send_here_is_kept_for_its_receiver_until_it_lets_go():
    m = mirror()
    gid, gen, _ = m.add(0.0, 0, 1, 8e6, refs=2)  # receiver on this host, sender holds
    m.apply([(gid, gen, _mirror.RELEASE, 1.5)])
    view = m.view(gid, gen, party=SENDER)
    assert view["released"] and view["release"] == 1.5 and not view["done"]
    m.drop(gid, gen, party=SENDER)
    m.apply([(gid, gen, _mirror.DONE, 2.0)])
    view = m.view(gid, gen, party=RECEIVER)
    assert view["done"] and view["end"] == 2.0
    m.drop(gid, gen, party=RECEIVER)
    with pytest.raises(KeyError):
        m.view(gid, gen)


def test_a_flow_from_another_host_is_unknown_until_reported_then_its_receivers():
    m = mirror(host=1)
    gid = 0 * STRIDE + 5  # host 0's slot 5
    view = m.view(gid, 3)
    assert not view["done"] and math.isinf(view["end"])  # started, no end known here
    bell = Doorbell()
    try:
        m.apply([(gid, 3, _mirror.DONE, 7.25, bell.address)])
        assert bell.wait(1.0), "the receiver's bell rings when its flow's end arrives"
        view = m.view(gid, 3)
        assert view["done"] and view["end"] == 7.25
        assert m.counts()["remote"] == 1
        m.drop(gid, 3, party=RECEIVER)
        assert m.counts()["remote"] == 0
    finally:
        bell.close()


def test_remote_flows_come_and_go_many_times_over_a_small_table():
    m = mirror(host=1, slots=8)
    for k in range(500):  # tombstones are reused, the table never fills
        gid = (k * 7) % 40
        m.apply([(gid, k, _mirror.DONE, float(k))])
        assert m.view(gid, k)["end"] == float(k)
        m.drop(gid, k, party=RECEIVER)
    assert m.counts()["free"] == 8 and m.counts()["remote"] == 0


def test_a_persistent_flow_ends_at_the_owner_when_its_owner_drops_it():
    m = mirror()
    gid, gen, _ = m.add(0.0, 1, 1, 0.0, bound=5.0, resource=3, persistent=True)
    m.take()
    m.drop(gid, gen)
    (event,) = m.take()
    assert (event[0], event[1], event[2]) == (_mirror.END, gid, gen)


def test_another_hosts_id_or_a_freed_slot_of_this_one_is_not_found():
    m = mirror()
    with pytest.raises(KeyError):
        m.view(3, 0)  # this host's slot 3, never taken
    gid, gen, _ = m.add(0.0, 0, 1, 1e3)
    m.drop(gid, gen, party=RECEIVER)
    m.apply([(gid, gen, _mirror.DONE, 1.0)])
    with pytest.raises(KeyError):
        m.view(gid, gen)


def test_bad_mirrors_and_flows_are_refused():
    with pytest.raises(ValueError, match="among the hosts"):
        _mirror.Mirror(2, 2, [0, 1], 8, BUFFER_BITS)
    with pytest.raises(ValueError, match="out of range"):
        _mirror.Mirror(0, 2, [0, 2], 8, BUFFER_BITS)
    m = mirror()
    with pytest.raises(ValueError, match="node index"):
        m.add(0.0, 0, 9, 1e3)


def _serve_in_one_process(cluster, flows, dilation=1.0, skew_seconds=0.0):
    """The owner and one host's agent over COMM_SELF: every flow of ``flows`` started through
    the mirror at its (dilated) start; returns each flow's reported end and release, in
    emulated seconds from the epoch. ``skew_seconds``: the agent's host clock reads that far
    off (the test hook), which its clock estimate must undo."""
    model = ClusterModel(cluster, None)
    epoch = time.time() + 0.2
    model.set_clock(epoch=epoch, dilation=dilation)
    nodes = clusters.node_names(cluster)
    m = _mirror.Mirror(0, 1, [0] * len(nodes), 256, BUFFER_BITS)
    comm = MPI.COMM_SELF.Dup()
    owner = Owner(comm, model, [0] * len(nodes), [0])
    agent = Agent(comm, m, skew_seconds=skew_seconds)
    owner.start()
    agent.start()
    try:
        assert agent.ready.wait(10), "the first clock pings are answered"
        ids = []
        for f in sorted(flows, key=lambda f: f.start_seconds):
            time.sleep(max(0.0, epoch + f.start_seconds * dilation - time.time()))
            ids.append(m.add(epoch + f.start_seconds * dilation, model.index[f.src],
                             model.index[f.dst], f.size_bytes * 8.0)[:2])
        ends = []
        deadline = time.time() + 30
        for gid, gen in ids:
            while not m.view(gid, gen)["done"]:
                assert time.time() < deadline, "the owner reports every end"
                time.sleep(0.001)
            view = m.view(gid, gen)
            ends.append(((view["end"] - epoch) / dilation, (view["release"] - epoch) / dilation))
        return ends
    finally:
        agent.stop()
        owner.stop()
        agent.join(30)
        owner.join(30)
        assert not agent.is_alive() and not owner.is_alive(), "they say bye and end"
        assert not comm.Iprobe(MPI.ANY_SOURCE, MPI.ANY_TAG), "no message is left behind"
        comm.Free()
        assert owner.error is None and agent.error is None


@pytest.mark.parametrize("skew_seconds", [0.0, 0.05, -0.05])
def test_the_owner_reports_the_ends_its_model_gives(skew_seconds):
    """Also with the agent's host clock 50 ms off either way: what crosses to the owner and
    back is moved by the estimated offset, so the ends are the same."""
    cluster = clusters.load_cluster("hostfiles/racks12.toml")
    flows = [Flow(0.0, "n1", "n5", 2e6), Flow(0.0, "n2", "n6", 2e6), Flow(0.05, "n3", "n9", 1e6),
             Flow(0.1, "n4", "n1", 5e5), Flow(0.12, "n5", "n10", 1.5e6)]
    want = simulate(cluster, flows, latency_seconds=0.0)
    reported = _serve_in_one_process(cluster, flows, skew_seconds=skew_seconds)
    got = [end for end, _ in reported]
    for g, w, f in zip(got, want, flows):
        # the owner is the model: an end differs by how late its start reached the owner
        assert g == pytest.approx(w, abs=0.005), (f, g, w)
    # the uplinks are shared: the two first flows end together in the model, later than
    # alone, and each reported end is the model's (above; their starts may reach the owner
    # a few ms apart on a busy host, so the two reported ends differ by as much)
    assert want[0] == pytest.approx(want[1], rel=1e-9) and want[0] > 2e6 * 8 / 100e6 + 0.05
    # a sender of more than its socket buffer is released when the rest fits, before the end
    for (end, release), f in zip(reported, flows):
        if f.size_bytes * 8 > BUFFER_BITS:
            assert f.start_seconds < release < end - 0.01, (f, release, end)


def test_no_full_collection_walks_the_heap_while_the_model_is_served():
    """A full collection holds the GIL through every object, and the owner's and agents'
    threads wait with it: while they relay, what the process held is frozen and no full
    collection runs (young ones do); closing gives the collector back as it was."""
    import gc

    from emulator.network.owner import FULL_COLLECTIONS_OFF
    from emulator.shaping.served import served_model

    before = gc.get_threshold()
    comm = MPI.COMM_WORLD.Dup()
    local = comm.Split_type(MPI.COMM_TYPE_SHARED)
    model = served_model(comm, local, clusters.load_cluster("hostfiles/racks12.toml"), None)
    collected = []

    def seen(phase, info):
        if phase == "start":
            collected.append(info["generation"])

    gc.callbacks.append(seen)
    try:
        assert gc.get_freeze_count() > 0 and gc.get_threshold()[2] == FULL_COLLECTIONS_OFF
        kept = [[[] for _ in range(10)] for _ in range(30_000)]  # long-lived: promoted
        assert len(kept) == 30_000 and 1 in collected and 2 not in collected
    finally:
        gc.callbacks.remove(seen)
        comm.Barrier()
        model.close()
        comm.Free()
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_the_clock_offset_is_the_fastest_exchanges():
    clock = ClockOffset(samples=3)
    clock.add(0.0, 5.010, 5.011, 0.030)  # 29 ms round trip, offset 4.9955
    clock.add(1.0, 6.001, 6.0015, 1.0025)  # 2 ms round trip: offset 5.0
    assert clock.seconds == pytest.approx(5.0)
    assert clock.round_trip_seconds == pytest.approx(0.002)
    for k in range(3):  # the fast one ages out of the last three
        clock.add(2.0 + k, 7.0 + k + 0.004, 7.0 + k + 0.005, 2.0 + k + 0.011)
    assert clock.seconds == pytest.approx(4.999)
    assert clock.round_trip_seconds == pytest.approx(0.01)


def test_the_skew_hook_reads_its_hosts_entry():
    env = {"NODESEL_CLOCK_SKEW_SECONDS": "0,0.002,-0.002"}
    assert [host_skew_seconds(h, env) for h in range(4)] == [0.0, 0.002, -0.002, 0.0]
    assert host_skew_seconds(1, {}) == 0.0


class _Wire:
    """A communicator for one agent alone: what it sends is kept, ``replies`` come in."""

    def __init__(self, replies=()):
        self.sent, self.replies = [], list(replies)

    def isend(self, message, rank, tag):
        self.sent.append((tag, message))
        return MPI.REQUEST_NULL

    def Iprobe(self, source, tag, status=None):
        return any(t == tag for t, _ in self.replies)

    def recv(self, source, tag):
        k = next(i for i, (t, _) in enumerate(self.replies) if t == tag)
        return self.replies.pop(k)[1]


def test_the_agent_moves_the_times_it_relays_by_its_clocks_offset():
    """Starts go out in the owner's time (this host's + skew + offset), reports come back
    in this host's: checked on the wire, where the owner's clamps cannot hide them."""
    from emulator.shaping.served import REPORTS_TAG, STARTS_TAG

    m = mirror()
    gid, gen, _ = m.add(100.0, 0, 1, 8e6, refs=2)
    wire = _Wire(replies=[(REPORTS_TAG, [(gid, gen, _mirror.DONE, 250.0)])])
    agent = Agent(wire, m, skew_seconds=0.25)
    agent.clock.seconds = 1.5  # the owner's clock reads 1.5 s past this host's (skewed) one
    agent._next_ping = float("inf")  # no ping in this step
    agent.step()
    ((tag, (event,)),) = wire.sent
    assert tag == STARTS_TAG and event[10] == pytest.approx(100.0 + 0.25 + 1.5)
    assert m.view(gid, gen)["end"] == pytest.approx(250.0 - 0.25 - 1.5)


def test_an_agent_whose_clock_is_not_known_in_time_gives_the_collector_back():
    """No owner answers the agent's clock pings: the start fails in one error, and the
    collector is as it was before (a caller that goes on is not left without full
    collections)."""
    import gc

    from emulator.shaping.served import Served, start_loops

    before = gc.get_threshold()
    cluster = clusters.load_cluster("hostfiles/racks12.toml")
    nodes = clusters.node_names(cluster)
    comm = MPI.COMM_SELF.Dup()
    agent = Agent(comm, _mirror.Mirror(0, 1, [0] * len(nodes), 8, BUFFER_BITS))
    owner = None
    try:
        with pytest.raises(Served, match="did not answer this host's clock pings in 0.3 s"):
            start_loops([agent], ready_seconds=0.3)
        assert gc.get_threshold() == before and gc.get_freeze_count() == 0
    finally:  # an owner late, so that the goodbyes end at once
        owner = Owner(comm, ClusterModel(cluster, None), [0] * len(nodes), [0])
        owner.start()
        for loop in (agent, owner):
            loop.stop()
        for loop in (agent, owner):
            loop.join(30)
            assert not loop.is_alive()
        comm.Free()


class _Hosts:
    """A communicator for the owner alone: ``pings[rank]`` clock pings wait from each rank
    (one is taken a step); what the owner sends is dropped."""

    def __init__(self):
        self.pings = {}

    def isend(self, message, rank, tag):
        return MPI.REQUEST_NULL

    def Iprobe(self, source, tag, status=None):
        from emulator.shaping.served import PING_TAG

        waiting = [r for r, n in self.pings.items() if n > 0] if tag == PING_TAG else []
        if waiting and status is not None:
            status.Set_source(waiting[0])
        return bool(waiting)

    def recv(self, source, tag):
        self.pings[source] -= 1
        return time.time()


def test_the_owner_names_a_machine_that_has_gone_silent_and_no_other():
    """Machines 2 and 3 ping; machine 3 stops. The owner goes on while both ping (past the
    limit), then names machine 3 within a ping period of the limit; the owner's own machine
    (1) is never judged."""
    from emulator.errors import MachineFailure

    cluster = clusters.load_cluster("hostfiles/racks12.toml")
    nodes = clusters.node_names(cluster)
    wire = _Hosts()
    owner = Owner(wire, ClusterModel(cluster, None), [0] * len(nodes), [0, 4, 5],
                  machines=["machine 1", "machine 2", "machine 3"], silent_seconds=1.5)
    began = time.monotonic()
    while time.monotonic() - began < 2.5:  # both ping twice a second
        wire.pings = {4: 1, 5: 1}
        owner.step()
        time.sleep(0.5)
    silent = time.monotonic()
    with pytest.raises(MachineFailure, match=r"^machine 3 sent nothing for 1.5 s \(its agent, "
                                             r"rank 5, pings every 1 s\)"):
        while time.monotonic() - silent < 5:
            wire.pings = {4: 1}
            owner.step()
            time.sleep(0.05)
    assert 1.5 <= time.monotonic() - silent <= 2.7


@pytest.mark.parametrize("given", ["1", "0.5", "-3", "nan", "inf", "soon", "1e999"])
def test_a_silence_limit_that_is_no_time_over_the_ping_period_is_refused(given):
    from emulator.shaping.served import Served, host_silent_seconds

    with pytest.raises(Served, match=rf"NODESEL_HOST_SILENT_SECONDS='{given}': not a finite "
                                     r"time over 1 s"):
        host_silent_seconds({"NODESEL_HOST_SILENT_SECONDS": given})
    assert host_silent_seconds({"NODESEL_HOST_SILENT_SECONDS": "2.5"}) == 2.5
