"""Timed TCP transfers between testbed namespaces: what the kernel gives each flow.

Each receiver runs in its node's namespace (``ip netns exec``, argv lists, no shell)::

    python -m emulator.kernel.transfer recv PORT

prints ``ready``, reads one connection to its end and prints JSON: the wall time of its
first and last byte, the bytes, and (time, bytes so far) samples every 20 ms. Each sender::

    python -m emulator.kernel.transfer send ADDRESS PORT SECONDS

sends for ``SECONDS`` from when it starts. :func:`run_transfers` starts a set of them at
once and returns the receivers' reports; :func:`rate_mbps` reads one report's rate over a
window in which every flow was running.
"""

import json
import socket
import subprocess
import sys
import time

from ..errors import UserError

SAMPLE_SECONDS = 0.02
CHUNK_BYTES = 1 << 16
BASE_PORT = 5301


def receive(port):
    """Serve one connection on ``port``; returns the report."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", port))
    server.listen(1)
    print("ready", flush=True)
    conn, _ = server.accept()
    got, first, last, samples, next_sample = 0, None, None, [], 0.0
    while True:
        data = conn.recv(CHUNK_BYTES)
        if not data:
            break
        last = time.time()
        if first is None:
            first, next_sample = last, last
        got += len(data)
        if last >= next_sample:
            samples.append((last, got))
            next_sample = last + SAMPLE_SECONDS
    conn.close()
    server.close()
    if got and samples[-1][1] != got:
        samples.append((last, got))
    return {"first": first, "last": last, "bytes": got, "samples": samples}


def send(address, port, seconds):
    """Send to ``address:port`` for ``seconds``."""
    conn = socket.create_connection((address, port), timeout=10)
    chunk = b"x" * CHUNK_BYTES
    end = time.time() + seconds
    while time.time() < end:
        conn.sendall(chunk)
    conn.close()


def run_transfers(namespace_of, address_of, flows, *, seconds, timeout_seconds=60.0,
                  python=sys.executable):
    """Run ``flows`` (``[(src, dst), ...]`` of node names) as TCP transfers of ``seconds``
    each, all started together. ``namespace_of(node)`` and ``address_of(node)`` name a node's
    namespace and address. Returns one receiver report per flow."""
    receivers, senders = [], []
    try:
        for k, (src, dst) in enumerate(flows):
            proc = subprocess.Popen(["ip", "netns", "exec", namespace_of(dst), python, "-m",
                                     "emulator.kernel.transfer", "recv", str(BASE_PORT + k)],
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            receivers.append(proc)
            if proc.stdout.readline().strip() != "ready":
                raise UserError(f"transfer receiver in {namespace_of(dst)} did not start: "
                                f"{proc.stderr.read().strip()}")
        for k, (src, dst) in enumerate(flows):
            senders.append(subprocess.Popen(
                ["ip", "netns", "exec", namespace_of(src), python, "-m",
                 "emulator.kernel.transfer", "send", address_of(dst), str(BASE_PORT + k),
                 str(seconds)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        reports = []
        for k, (sender, receiver) in enumerate(zip(senders, receivers)):
            err = sender.communicate(timeout=timeout_seconds)[1]
            if sender.returncode != 0:
                raise UserError(f"transfer {flows[k][0]} -> {flows[k][1]} failed: "
                                f"{err.strip().splitlines()[-1] if err.strip() else 'no output'}")
            out, err = receiver.communicate(timeout=timeout_seconds)
            if receiver.returncode != 0:
                raise UserError(f"transfer receiver {flows[k][1]} failed: {err.strip()}")
            reports.append(json.loads(out))
        return reports
    finally:
        for proc in receivers + senders:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def bytes_at(report, t):
    """Bytes received by wall time ``t`` (interpolated between samples)."""
    samples = report["samples"]
    if not samples or t <= samples[0][0]:
        return 0.0
    for (t0, b0), (t1, b1) in zip(samples, samples[1:]):
        if t0 <= t <= t1:
            return b0 + (b1 - b0) * (t - t0) / (t1 - t0) if t1 > t0 else b1
    return float(samples[-1][1])


def common_window(reports, *, settle_seconds=1.0):
    """The wall-time window in which every flow ran, less ``settle_seconds`` at each end
    (TCP's start and the senders' staggered stops)."""
    start = max(r["first"] for r in reports) + settle_seconds
    end = min(r["last"] for r in reports) - settle_seconds
    if end <= start:
        raise UserError("the transfers did not overlap long enough to measure; run longer")
    return start, end


def rate_mbps(report, start, end):
    """Payload rate of one flow over [start, end] wall time."""
    return (bytes_at(report, end) - bytes_at(report, start)) * 8 / (end - start) / 1e6


def _main(argv):
    if argv[:1] == ["recv"] and len(argv) == 2:
        print(json.dumps(receive(int(argv[1]))), flush=True)
        return 0
    if argv[:1] == ["send"] and len(argv) == 4:
        send(argv[1], int(argv[2]), float(argv[3]))
        return 0
    print("usage: python -m emulator.kernel.transfer recv PORT | send ADDRESS PORT SECONDS",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))
