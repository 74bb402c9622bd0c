"""Stopping a command the way a person or a batch system does: a signal once it is busy."""

import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def stop_command(argv, sig, ready, *, wait_seconds=120.0, settle_seconds=0.0,
                 poll_seconds=0.05, reap_seconds=30.0):
    """Run ``argv``, send ``sig`` once ``ready()`` is true (or ``wait_seconds`` have passed,
    or it ended) and ``settle_seconds`` more have passed, and return (exit status, stderr)
    once it has ended (within ``reap_seconds``). Killed at the end whatever happens, so a
    run that ignores the signal cannot outlive its test."""
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + wait_seconds
        while not ready() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(poll_seconds)
        assert ready(), "the command never got busy"
        time.sleep(settle_seconds)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=reap_seconds)
        return proc.returncode, err
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def stop_when(args, sig, ready, *, launcher=(), **options):
    """:func:`stop_command` of ``nodesel ARGS...`` (under ``launcher``, such as ``mpiexec
    -n 3``)."""
    return stop_command([*launcher, sys.executable, "-m", "emulator", *args], sig, ready,
                        **options)


def gone(found, patience_seconds=5.0):
    """True once ``found()`` is empty, within ``patience_seconds``."""
    deadline = time.monotonic() + patience_seconds
    while found() and time.monotonic() < deadline:
        time.sleep(0.1)
    return not found()
