"""Synthetic local-user load on a node (Hanzich et al. §4): CPU, memory and LAN traffic.

The load runs as its own process (``python -m emulator.coordinator.load``), so it really consumes:

- CPU: busy for ``cpu_fraction`` of every 100 ms period, asleep for the rest;
- memory: ``memory_bytes`` allocated and touched, page by page;
- LAN: UDP datagrams at ``lan_bytes_per_second`` to a sink socket on the loopback
  interface (the node's own address in a namespace testbed).

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

import psutil

PERIOD_SECONDS = 0.1
DATAGRAM_BYTES = 128


@dataclass(frozen=True)
class LoadSpec:
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
    """A running load process for one node; use as a context manager or call :meth:`stop`."""

    def __init__(self, spec, memory_mb):
        self.spec = spec
        self.memory_bytes = int(spec.memory_fraction * memory_mb * 2**20)
        self.sent_bytes = 0
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "emulator.coordinator.load", "--cpu-fraction", str(spec.cpu_fraction),
             "--memory-bytes", str(self.memory_bytes),
             "--lan-bytes-per-second", str(spec.lan_bytes_per_second)],
            stdout=subprocess.PIPE, text=True)
        self._ps = psutil.Process(self._proc.pid)
        self._ps.cpu_percent(None)
        self._since = time.monotonic()
        self._sent_at_mark = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self._proc.stdout:
            if line.startswith("sent_bytes "):
                self.sent_bytes = int(line.split()[1])

    @property
    def pid(self):
        return self._proc.pid

    def measure(self):
        """What the load used since the last call: CPU %, resident MB, LAN bytes/s."""
        now = time.monotonic()
        elapsed = max(now - self._since, 1e-9)
        try:
            cpu = self._ps.cpu_percent(None)
            rss = self._ps.memory_info().rss
        except psutil.NoSuchProcess:
            return {"alive": False}
        lan = (self.sent_bytes - self._sent_at_mark) / elapsed
        self._since, self._sent_at_mark = now, self.sent_bytes
        return {"alive": self._proc.poll() is None, "cpu_percent": cpu,
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


def modeled_compute_seconds(work_seconds, local_cpu_fraction):
    """Wall time of ``work_seconds`` of dedicated CPU work next to a local load.

    Hanzich et al. Eq. 5-7 with one parallel task wanting a whole CPU (CPU(J) = 1):
    CPU_max = 1 + CPU_local, CPU_feas = min(1, 1 / CPU_max), time = work / CPU_feas.

    >>> round(modeled_compute_seconds(10.0, 0.15), 6)
    11.5
    """
    cpu_feas = min(1.0, 1.0 / (1.0 + local_cpu_fraction))
    return work_seconds / cpu_feas


def _serve(cpu_fraction, memory_bytes, lan_bytes_per_second):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))  # Ctrl-C at a terminal: end quietly
    block = bytearray(memory_bytes)
    page = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    for i in range(0, memory_bytes, page):
        block[i] = 1
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    sink.setblocking(False)
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    payload = b"x" * DATAGRAM_BYTES
    sent, start, last_report = 0, time.monotonic(), 0.0
    while not stop:
        period_start = time.monotonic()
        busy_until = period_start + cpu_fraction * PERIOD_SECONDS
        x = 0
        while time.monotonic() < busy_until:
            x += 1
        due = (period_start - start) * lan_bytes_per_second
        while sent + DATAGRAM_BYTES <= due:
            out.sendto(payload, sink.getsockname())
            sent += DATAGRAM_BYTES
            try:
                while True:
                    sink.recv(DATAGRAM_BYTES)
            except BlockingIOError:
                pass
        if period_start - last_report >= 0.5:
            try:
                print(f"sent_bytes {sent}", flush=True)
            except BrokenPipeError:  # the node that started this load is gone: so are we
                os._exit(0)
            last_report = period_start
        rest = period_start + PERIOD_SECONDS - time.monotonic()
        if rest > 0:
            time.sleep(rest)
    del block


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m emulator.coordinator.load",
                                     description="Run one node's synthetic local-user load.")
    parser.add_argument("--cpu-fraction", type=float, default=0.15)
    parser.add_argument("--memory-bytes", type=int, default=0)
    parser.add_argument("--lan-bytes-per-second", type=float, default=512.0)
    args = parser.parse_args(argv)
    _serve(args.cpu_fraction, args.memory_bytes, args.lan_bytes_per_second)


if __name__ == "__main__":
    main()
