"""The shaped communicator's message path, compiled and Python, in one process.

One process sends to itself on COMM_SELF (node "a" to node "a": no link is crossed, so a
message is delivered a latency after it is sent): MPI's matching order, buffers, objects and
a wait that times out. The timing of the model is checked in tests/test_sharing.py, and the
message path against it under mpiexec in tests/test_mpi.py and tests/test_flows.py. Each
case runs with both message paths.
"""

import numpy as np
import pytest
from mpi4py import MPI

from emulator.network.cluster import crossbar
from emulator.shaping import engine
from emulator.shaping.comm import Network, ShapedComm

LATENCY = 0.0001


@pytest.fixture(params=["c", "python"])
def make(request, monkeypatch):
    """make() -> a one-member shaped communicator on the chosen path."""
    if request.param == "c" and not engine.available():
        pytest.skip("the compiled engine did not bind to this MPI")
    monkeypatch.setenv(engine.ENV, request.param)
    made = []

    def build():
        comm = ShapedComm(MPI.COMM_SELF.Dup(), [0], ["a"],
                          Network.private(crossbar(["a"]), latency_seconds=LATENCY),
                          timeout_seconds=30)
        assert isinstance(comm, engine.CompiledShapedComm) == (request.param == "c")
        made.append(comm)
        return comm

    yield build
    for comm in made:
        comm.comm.Free()


def test_a_message_to_the_same_node_comes_a_latency_later(make):
    comm = make()
    out, into = np.arange(1 << 18, dtype=np.uint8), np.zeros(1 << 18, np.uint8)
    recv = comm.Irecv(into, 0, 3)
    recv.Waitall([recv, comm.Isend(out, 0, 3)])
    assert (into == out).all()
    assert recv.due_at - recv.start_at == pytest.approx(LATENCY, abs=1e-6)


@pytest.mark.parametrize("size", [100, 64 * 1024])  # with the header, and staged
def test_receives_match_in_order_per_source_and_tag(make, size):
    comm = make()
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
    comm = make()
    comm.Isend(np.ones(100, np.uint8), 0, 1)
    with pytest.raises(ValueError, match="does not fit"):
        comm.Irecv(np.zeros(10, np.uint8), 0, 1).Wait()


def test_objects_go_through_pickled(make):
    comm = make()
    comm.send({"x": [1, 2]}, 0, 5)
    assert comm.recv(0, 5) == {"x": [1, 2]}


def test_a_wait_for_a_message_that_never_comes_names_the_node(make):
    from emulator.errors import NodeFailure

    comm = make()
    if isinstance(comm, engine.CompiledShapedComm):
        comm._engine.timeout_seconds = 0.2
    else:
        comm.timeout_seconds = 0.2
    with pytest.raises(NodeFailure) as failure:
        comm.Irecv(np.zeros(1, np.uint8), 0, 7).Wait()
    assert failure.value.nodes == ["a"]  # rank 0 emulates node "a"
    assert str(failure.value) == "node a failed: no message within 0 s"


def test_unknown_engine_names_are_refused(monkeypatch):
    monkeypatch.setenv(engine.ENV, "fortran")
    with pytest.raises(ValueError, match="c or python"):
        engine.wanted()
