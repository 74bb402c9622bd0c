"""Run one MPI rank as a child, so that a rank killed by a signal looks like an ordinary
exit to the MPI launcher.

Hydra (MPICH's mpiexec) ends the whole job when one of its processes dies of a signal, even
with ``-disable-auto-cleanup``; an exit status it leaves alone. An emulated node killed with
``kill -9`` must not take the cluster with it, so each rank runs under this supervisor::

    mpiexec -disable-auto-cleanup -n 11 \
        python -m emulator.coordinator.supervise python -m emulator ...

The rank inherits the process-manager connection (``PMI_FD``). SIGINT and SIGTERM are passed
on; Hydra's SIGUSR1 failure notice is ignored (the coordinator finds failures itself). The
supervisor exits with the rank's status, ``128 + N`` for a rank killed by signal N.

Two failures cannot be survived, and for them the supervisor dies of a signal itself so that
Hydra ends the job instead of leaving it hung:

- a rank that fails before it has joined the job (:func:`joined`): the others wait for it in
  MPI's start-up collectives, which have no timeout;
- the coordinator (rank 0) failing at any time: the nodes would wait for it for ever.

The supervisor then prints one line naming the rank, unless it had passed on a SIGINT or
SIGTERM (the user asked for the end). The rank dies with its supervisor
(``PR_SET_PDEATHSIG``), so a job ended this way leaves no rank behind.
"""

import ctypes
import os
import signal
import subprocess
import sys

JOINED_FD_ENV = "NODESEL_JOINED_FD"
_PR_SET_PDEATHSIG = 1
_ENDS = {signal.SIGINT, signal.SIGTERM}  # the ends a user or a batch system asks for


def rank_command(args):
    """The argv of one supervised emulator rank running ``python -m emulator ARGS``."""
    return [sys.executable, "-m", "emulator.coordinator.supervise",
            sys.executable, "-m", "emulator", *args]


_told_fd = []  # the pipe to the supervisor, taken out of the environment on first use


def _tell(byte):
    if not _told_fd:  # processes this rank starts must not inherit the number
        _told_fd.append(os.environ.pop(JOINED_FD_ENV, ""))
    fd = _told_fd[0]
    if fd.isdigit():
        try:
            os.write(int(fd), byte)
        except OSError:
            pass  # the supervisor is gone; nothing to tell


def joined():
    """Tell this rank's supervisor (if any) that the rank is past MPI's start-up collectives:
    from here on the coordinator's timeouts handle its failure."""
    _tell(b"j")


def ending_reported():
    """Tell this rank's supervisor that the rank is ending the job itself (MPI_Abort) and has
    said why, so the supervisor adds nothing."""
    _tell(b"e")


def _die_with_parent(parent_pid):
    """In the child before exec: take the end signals the supervisor held while starting it,
    and be killed when the supervisor dies."""
    signal.pthread_sigmask(signal.SIG_UNBLOCK, _ENDS)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the supervisor died before prctl took effect
        os._exit(1)


def _describe(status):
    if status < 0:
        return f"was killed by {signal.Signals(-status).name}"
    return f"exited with status {status}"


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print("usage: python -m emulator.coordinator.supervise COMMAND [ARG ...]", file=sys.stderr)
        return 2
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    fds = tuple(int(os.environ[k]) for k in ("PMI_FD",) if os.environ.get(k, "").isdigit())
    joined_r, joined_w = os.pipe()
    env = dict(os.environ, **{JOINED_FD_ENV: str(joined_w)})
    me = os.getpid()
    forwarded = []  # signals passed on: an end the user asked for needs no message

    def forward(number, frame):
        forwarded.append(number)
        proc.send_signal(number)

    for sig in _ENDS:
        signal.signal(sig, forward)
    # an end that comes while the rank starts waits for it, then is passed on
    signal.pthread_sigmask(signal.SIG_BLOCK, _ENDS)
    try:
        proc = subprocess.Popen(argv, pass_fds=fds + (joined_w,), env=env,
                                preexec_fn=lambda: _die_with_parent(me))
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _ENDS)
    os.close(joined_w)
    status = proc.wait()  # restarted by Python after a forwarded signal
    os.set_blocking(joined_r, False)
    try:
        told = os.read(joined_r, 64)
    except BlockingIOError:
        told = b""
    rank = os.environ.get("PMI_RANK", "?")
    if status != 0 and b"e" not in told and (rank == "0" or b"j" not in told):
        why = ("the coordinator cannot be replaced" if rank == "0"
               else "the other ranks wait for it in MPI start-up")
        if not forwarded:
            print(f"nodesel: rank {rank} {_describe(status)} ({why}); ending the job",
                  file=sys.stderr, flush=True)
        sig = -status if status < 0 else signal.SIGTERM
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
    return status if status >= 0 else 128 - status


if __name__ == "__main__":
    sys.exit(main())
