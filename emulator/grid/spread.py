"""Replications spread over MPI ranks, each result kept by rank 0 as soon as it is made.

Rank ``k`` of ``n`` runs replications ``k, k + n, ...`` and sends each result to rank 0 as
it finishes, then says it is done (with the error that stopped it, if one did). Rank 0
takes what has come between its own replications and hands everything it holds to
``on_result``, so a study stopped midway keeps every replication finished on any rank.
"""

import time
from typing import Any, Callable, Optional

from ..errors import UserError

TAG = 31001  # ("result", replication, result), then ("done", error or None): in that order
NAP_SECONDS = (0.001, 0.05)  # rank 0, its own share done, waits for the others napping


def shares(count: int, rank: int, size: int) -> list:
    """The replications rank ``rank`` of ``size`` runs."""
    return list(range(rank, count, size))


def spread(comm: Any, count: int, run_one: Callable[[int], Any],
           on_result: Callable[[dict], None]) -> tuple:
    """Run ``count`` replications over ``comm``'s ranks (collective; None: this process
    alone). Returns ``(results, failure)`` on rank 0: ``{replication: result}``, and the
    first error a rank met (None if none); ``({}, failure)`` elsewhere, this rank's own.
    ``on_result(results)`` is called on rank 0 each time it holds new results."""
    rank, size = (0, 1) if comm is None else (comm.Get_rank(), comm.Get_size())
    if rank != 0:
        return {}, _serve_share(comm, shares(count, rank, size), run_one)
    results: dict = {}
    failures: list = []
    waiting = set(range(1, size))
    for r in shares(count, 0, size):
        failure = _run(run_one, r, rank, results)
        if failure:
            failures.append(failure)
            break
        if waiting:
            _take(comm, results, waiting, failures)
        on_result(results)
    nap = NAP_SECONDS[0]
    while waiting:
        if _take(comm, results, waiting, failures):
            on_result(results)
            nap = NAP_SECONDS[0]
            continue
        time.sleep(nap)
        nap = min(2 * nap, NAP_SECONDS[1])
    return results, failures[0] if failures else None


def _run(run_one: Callable[[int], Any], r: int, rank: int, results: dict) -> Optional[str]:
    """Replication ``r`` into ``results``; the error that stopped it, or None."""
    try:
        results[r] = run_one(r)
    except UserError as e:
        return str(e)
    except Exception as e:  # noqa: BLE001 - under mpiexec, rank 0 must not wait for ever
        return f"rank {rank}: replication {r} failed: {type(e).__name__}: {e}"
    return None


def _serve_share(comm: Any, mine: list, run_one: Callable[[int], Any]) -> Optional[str]:
    """A rank other than 0: its replications, each sent as it finishes; then done."""
    failure, sent, held = None, [], {}
    for r in mine:
        failure = _run(run_one, r, comm.Get_rank(), held)
        if failure:
            break
        sent.append(comm.isend(("result", r, held.pop(r)), dest=0, tag=TAG))
    comm.send(("done", failure), dest=0, tag=TAG)
    for request in sent:
        request.wait()
    return failure


def _take(comm: Any, results: dict, waiting: set, failures: list) -> bool:
    """On rank 0: receive what has arrived; True if anything did."""
    from mpi4py import MPI

    took, status = False, MPI.Status()
    while comm.iprobe(source=MPI.ANY_SOURCE, tag=TAG, status=status):
        message = comm.recv(source=status.Get_source(), tag=TAG)
        took = True
        if message[0] == "result":
            results[message[1]] = message[2]
        else:
            waiting.discard(status.Get_source())
            if message[1]:
                failures.append(message[1])
    return took
