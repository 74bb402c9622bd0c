"""The shaped communicator's message path, compiled and Python, on hand-worked cases.

One process sends to itself on COMM_SELF (node "a" to node "a"), so the model's times can be
worked out by hand: every receive reports when its flow started and when the model
delivered it (``start_at``, ``due_at``, wall times), and those must be the fluid model's,
to the model's step (1 us). Each case runs with both message paths.
"""

import math
import time

import numpy as np
import pytest
from mpi4py import MPI

from emulator.network.flowmodel import burst_bytes
from emulator.shaping import engine
from emulator.shaping.comm import Network, ShapedComm

MIB = 1 << 20
LATENCY = 0.0001
STEP = 5e-6  # the model never steps by less than 1 us; a few steps of slack


@pytest.fixture(params=["c", "python"])
def make(request, monkeypatch):
    """make(pair_mbps, port_mbps) -> a one-member shaped communicator on the chosen path."""
    if request.param == "c" and not engine.available():
        pytest.skip("the compiled engine did not bind to this MPI")
    monkeypatch.setenv(engine.ENV, request.param)
    made = []

    def build(pair_mbps, port_mbps, epoch=None):
        comm = ShapedComm(MPI.COMM_SELF.Dup(), [0], ["a"],
                          Network(pair_mbps, {"a": port_mbps}, latency_seconds=LATENCY,
                                  epoch=epoch), timeout_seconds=30)
        assert isinstance(comm, engine.CompiledShapedComm) == (request.param == "c")
        made.append(comm)
        return comm

    yield build
    for comm in made:
        comm.comm.Free()


def credit_bits(rate_mbps):
    """What the pair's full token bucket lets through at once."""
    return 8.0 * burst_bytes(rate_mbps)


def exchange(comm, sizes, tag=3):
    """Send messages of ``sizes`` to self at once; the receive requests, in order."""
    outs = [np.full(n, k + 1, np.uint8) for k, n in enumerate(sizes)]
    ins = [np.zeros(n, np.uint8) for n in sizes]
    recvs = [comm.Irecv(b, 0, tag) for b in ins]
    sends = [comm.Isend(b, 0, tag) for b in outs]
    recvs[0].Waitall(recvs + sends)
    for k, b in enumerate(ins):
        assert (b == k + 1).all()
    return recvs


def test_one_flow_takes_its_size_over_the_rate_less_the_bucket(make):
    comm = make(lambda u, v, t: 100.0, 1000.0)
    (r,) = exchange(comm, [MIB])
    expect = (8 * MIB - credit_bits(100)) / 100e6 + LATENCY
    assert r.due_at - r.start_at == pytest.approx(expect, abs=STEP)
    assert time.time() >= r.due_at - LATENCY  # delivered no earlier than its last byte


def test_two_flows_on_one_pair_share_it(make):
    comm = make(lambda u, v, t: 100.0, 1000.0)
    first, second = exchange(comm, [MIB, MIB])
    gap = second.start_at - first.start_at
    assert 0 <= gap < 0.01
    # the first goes alone for `gap`, then both at half the rate; the bucket was spent by the
    # first, so the pair is busy from the first start until the last bit of both
    left = 8 * MIB - credit_bits(100) - 100e6 * gap
    assert first.due_at == pytest.approx(second.start_at + left / 50e6 + LATENCY, abs=STEP)
    total = (2 * 8 * MIB - credit_bits(100)) / 100e6
    assert second.due_at == pytest.approx(first.start_at + total + LATENCY, abs=STEP)


def test_a_port_slower_than_the_pair_is_shared_by_its_flows(make):
    comm = make(lambda u, v, t: 1000.0, 100.0)
    first, second = exchange(comm, [MIB, MIB])
    gap = second.start_at - first.start_at
    left = 8 * MIB - credit_bits(100) - 100e6 * gap  # the bucket fills at the port's rate
    assert first.due_at == pytest.approx(second.start_at + left / 50e6 + LATENCY, abs=STEP)
    # The port is also the sender's: it goes back to one flow when the sender hears of the
    # first's end, one notice there and back later; on one rank that notice is read only
    # after the first's delivery has fixed the model, so the second keeps half the port
    # for up to a latency longer than on a port of two ranks.
    total = (2 * 8 * MIB - credit_bits(100)) / 100e6
    ideal = first.start_at + total + LATENCY
    assert ideal - STEP <= second.due_at <= ideal + LATENCY


def test_a_bandwidth_change_mid_message_applies_from_its_instant(make):
    epoch = time.time()
    change = {"at": math.inf}

    def pair_mbps(u, v, t):
        return 100.0 if t < change["at"] else 25.0

    pair_mbps.next_change = lambda u, v, t: change["at"] if t < change["at"] else math.inf
    comm = make(pair_mbps, 1000.0, epoch=epoch)
    change["at"] = time.time() - epoch + 0.02  # 20 ms from now, in scenario seconds
    (r,) = exchange(comm, [MIB])
    at = epoch + change["at"]
    done_bits = credit_bits(100) + 100e6 * (at - r.start_at)
    assert r.due_at == pytest.approx(at + (8 * MIB - done_bits) / 25e6 + LATENCY, abs=STEP)


@pytest.mark.parametrize("size", [100, 64 * 1024])  # with the header, and staged
def test_receives_match_in_order_per_source_and_tag(make, size):
    comm = make(lambda u, v, t: 1000.0, 1000.0)
    out = [np.full(size, v, np.uint8) for v in (1, 2, 3, 4)]
    sends = [comm.Isend(out[0], 0, 1), comm.Isend(out[1], 0, 2), comm.Isend(out[2], 0, 1)]
    probe = comm.Irecv(np.zeros(1, np.uint8), 0, 9)
    probe.Test()  # the headers arrive before any receive is posted for them
    ins = [np.zeros(size, np.uint8) for _ in range(4)]
    recvs = [comm.Irecv(ins[0], 0, 1), comm.Irecv(ins[1], 0, 1), comm.Irecv(ins[2], 0, 2)]
    sends.append(comm.Isend(out[3], 0, 2))
    recvs.append(comm.Irecv(ins[3], 0, 2))  # posted after the rest: takes the later tag-2 one
    recvs[0].Waitall(recvs + sends)
    assert [int(b[0]) for b in ins] == [1, 3, 2, 4]
    assert all(r.nbytes == size for r in recvs)
    assert not probe.done  # nothing came on tag 9


def test_a_message_larger_than_the_buffer_is_an_error(make):
    comm = make(lambda u, v, t: 1000.0, 1000.0)
    comm.Isend(np.ones(100, np.uint8), 0, 1)
    with pytest.raises(ValueError, match="does not fit"):
        comm.Irecv(np.zeros(10, np.uint8), 0, 1).Wait()


def test_objects_go_through_pickled(make):
    comm = make(lambda u, v, t: 1000.0, 1000.0)
    comm.send({"x": [1, 2]}, 0, 5)
    assert comm.recv(0, 5) == {"x": [1, 2]}


def test_a_wait_for_a_message_that_never_comes_names_the_node(make):
    from emulator.errors import NodeFailure

    comm = make(lambda u, v, t: 1000.0, 1000.0)
    if isinstance(comm, engine.CompiledShapedComm):
        comm._engine.timeout_seconds = 0.2
    else:
        comm.timeout_seconds = 0.2
    with pytest.raises(NodeFailure, match="a"):
        comm.Irecv(np.zeros(1, np.uint8), 0, 7).Wait()


def test_unknown_engine_names_are_refused(monkeypatch):
    monkeypatch.setenv(engine.ENV, "fortran")
    with pytest.raises(ValueError, match="c or python"):
        engine.wanted()
