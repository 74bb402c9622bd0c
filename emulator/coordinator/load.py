"""Synthetic local-user load on a node (Hanzich et al. §4): CPU, memory and LAN traffic.

The load runs as its own process (``python -m emulator.coordinator.load``) and really holds
``memory_bytes``, allocated and touched page by page. What else it does depends on how the
node is emulated (:func:`emulator.coordinator.node._local_user`):

- CPU: under ``--cpu kernel`` it burns ``cpu_fraction`` of a CPU-second of its own CPU time
  in every 100 ms period (of emulated time: the period lasts ``dilation`` times as long) and
  sleeps for the rest, in its node's cgroup, so the kernel gives it what it wants when it
  can; otherwise its share is a bounded flow on the node's CPU in the fluid model, and the
  process burns nothing;
- LAN: under kernel shaping, UDP datagrams at ``lan_bytes_per_second`` from the node's
  address to the testbed's host across the shaped network (``lan_to``); in-process, a
  bounded flow on the node's port in the model; on a real cluster, not emulated.

The node starts it with :class:`LocalLoad` and measures what it actually uses with psutil.
Defaults follow Hanzich et al.: 15% CPU, 35% of the node's memory, 0.5 KB/s.
"""

import argparse
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass

PERIOD_SECONDS = 0.1
DATAGRAM_BYTES = 128


@dataclass(frozen=True)
class LoadSpec:
    """What a local user takes: a share of the node's CPU, of its memory, and LAN traffic.

    >>> LoadSpec()  # Hanzich et al.'s
    LoadSpec(cpu_fraction=0.15, memory_fraction=0.35, lan_bytes_per_second=512.0)
    """

    cpu_fraction: float = 0.15
    memory_fraction: float = 0.35
    lan_bytes_per_second: float = 512.0

    def __post_init__(self):
        if not 0 <= self.cpu_fraction <= 1:
            raise ValueError(f"cpu_fraction must lie in [0, 1], got {self.cpu_fraction}")
        if not 0 <= self.memory_fraction <= 0.9:
            raise ValueError(f"memory_fraction must lie in [0, 0.9], got {self.memory_fraction}")
        if self.lan_bytes_per_second < 0:
            raise ValueError(f"lan_bytes_per_second must be >= 0, got {self.lan_bytes_per_second}")


class LocalLoad:
    """A running load process for one node; use as a context manager or call :meth:`stop`.
    ``burn_cpu``: burn the CPU share for real (else it is modelled elsewhere); ``lan_to``:
    ``(address, port)`` its datagrams go to (None: no traffic)."""

    def __init__(self, spec, memory_mb, *, burn_cpu=False, dilation=1.0, lan_to=None):
        self.spec = spec
        self.dilation = float(dilation)
        self.memory_bytes = int(spec.memory_fraction * memory_mb * 2**20)
        self.sent_bytes = 0
        argv = [sys.executable, "-m", "emulator.coordinator.load",
                "--cpu-fraction", str(spec.cpu_fraction if burn_cpu else 0.0),
                "--memory-bytes", str(self.memory_bytes), "--dilation", str(dilation)]
        if lan_to is not None and spec.lan_bytes_per_second > 0:
            argv += ["--lan-bytes-per-second", str(spec.lan_bytes_per_second),
                     "--lan-to", f"{lan_to[0]}:{lan_to[1]}"]
        import psutil  # here, not at import: a node rank with no local load never needs it

        self._proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
        self._ps = psutil.Process(self._proc.pid)
        self._ready = threading.Event()
        self._held = False  # it said it holds its memory
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._mark()

    def _mark(self):
        self._ps.cpu_percent(None)
        self._since = time.monotonic()
        self._sent_at_mark = self.sent_bytes

    def wait_ready(self, timeout_seconds=60.0):
        """Block until the load holds its memory and starts its steady share, so that jobs
        started after this never meet its start-up (touching its memory costs CPU); what
        :meth:`measure` reports counts from here. Raises RuntimeError if it dies or stalls."""
        if not self._ready.wait(timeout_seconds):
            self.stop()
            raise RuntimeError(f"the local load did not start within {timeout_seconds:g} s")
        if not self._held or self._proc.poll() is not None:
            # its output ended before it said so: it is exiting (on a busy machine its
            # status may come a little after its output closed)
            try:
                code = self._proc.wait(timeout=timeout_seconds)
            except subprocess.TimeoutExpired:
                code = "none yet"
            self.stop()
            raise RuntimeError(f"the local load exited with code {code} "
                               f"before it held its {self.memory_bytes / 2**20:.0f} MB")
        self._mark()

    def _read(self):
        for line in self._proc.stdout:
            if line.startswith("sent_bytes "):
                self.sent_bytes = int(line.split()[1])
            elif line.startswith("ready"):
                self._held = True
                self._ready.set()
        self._ready.set()  # it ended: nobody waits for it any longer

    @property
    def pid(self):
        return self._proc.pid

    def measure(self):
        """What the load used since the last call: CPU % (of the emulated node's CPU, which
        dilation K makes 1/K of a core), resident MB, LAN bytes/s (per emulated second)."""
        import psutil

        now = time.monotonic()
        elapsed = max(now - self._since, 1e-9)
        try:
            cpu = self._ps.cpu_percent(None)
            rss = self._ps.memory_info().rss
        except psutil.NoSuchProcess:
            return {"alive": False}
        lan = (self.sent_bytes - self._sent_at_mark) / elapsed * self.dilation
        self._since, self._sent_at_mark = now, self.sent_bytes
        return {"alive": self._proc.poll() is None, "cpu_percent": cpu * self.dilation,
                "rss_mb": rss / 2**20, "target_memory_mb": self.memory_bytes / 2**20,
                "lan_bytes_per_second": lan, "spec": asdict(self.spec)}

    def stop(self):
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc.stdout.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def _say(line):
    """One line to the node that started this load; if it is gone (a run being stopped
    closes the pipe, maybe before the load is even ready), so are we, quietly."""
    try:
        print(line, flush=True)
    except BrokenPipeError:
        os._exit(0)


def _serve(cpu_fraction, memory_bytes, lan_bytes_per_second, lan_to, dilation):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))  # Ctrl-C at a terminal: end quietly
    try:
        block = bytearray(memory_bytes)
    except MemoryError:
        print(f"local load: cannot hold {memory_bytes} bytes of memory", file=sys.stderr)
        sys.exit(2)
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    for i in range(0, memory_bytes, page):
        block[i] = 1
    _say("ready")
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM) if lan_to else None
    payload = b"x" * DATAGRAM_BYTES
    period = PERIOD_SECONDS * dilation  # wall seconds of one emulated period
    sent, start, last_report = 0, time.monotonic(), 0.0
    while not stop:
        period_start = time.monotonic()
        # its CPU share as CPU time, however long the node's share of the cores makes it take
        busy_until = time.process_time() + cpu_fraction * PERIOD_SECONDS
        x = 0
        while cpu_fraction > 0 and time.process_time() < busy_until and \
                time.monotonic() < period_start + period:
            x += 1
        due = (period_start - start) / dilation * lan_bytes_per_second
        while out is not None and sent + DATAGRAM_BYTES <= due:
            try:
                out.sendto(payload, lan_to)
            except OSError:
                pass  # the network refused it for now (a full queue): as a real user's
            sent += DATAGRAM_BYTES
        if period_start - last_report >= 0.5:
            _say(f"sent_bytes {sent}")
            last_report = period_start
        rest = period_start + period - time.monotonic()
        if rest > 0:
            time.sleep(rest)
    del block


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m emulator.coordinator.load",
                                     description="Run one node's synthetic local-user load.")
    parser.add_argument("--cpu-fraction", type=float, default=0.15)
    parser.add_argument("--memory-bytes", type=int, default=0)
    parser.add_argument("--lan-bytes-per-second", type=float, default=0.0)
    parser.add_argument("--lan-to", help="ADDRESS:PORT the datagrams go to")
    parser.add_argument("--dilation", type=float, default=1.0)
    args = parser.parse_args(argv)
    lan_to = None
    if args.lan_to:
        host, port = args.lan_to.rsplit(":", 1)
        lan_to = (host, int(port))
    _serve(args.cpu_fraction, args.memory_bytes, args.lan_bytes_per_second, lan_to,
           args.dilation)


if __name__ == "__main__":
    main()
