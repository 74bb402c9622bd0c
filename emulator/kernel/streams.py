"""Real competing TCP streams in a tree testbed: the stream model's background traffic, sent.

With ``--background real`` a scenario's streams are not a rate change of the link's class:
each of a link's S streams is a TCP connection in each direction between the link's two ends
(a node's own namespace, or a switch's background host, a namespace on the switch's bridge),
and the kernel's own sharing decides what a job's flows get beside them.

One agent per namespace that takes part (``python -m emulator.kernel.streams agent PORT``, run
with ``ip netns exec``; argv lists, no shell) sinks whatever connects to PORT and opens or
closes outgoing streams as its standard input says (``open ID ADDRESS PORT SOURCE_PORT``,
``close ID``). An agent exits when its standard input ends, so a killed run leaves none
behind. Each stream binds its own source port, so that a fair link can give it a leaf of its
own (:func:`stream_port`).
"""

import socket
import subprocess
import sys
import tempfile
import threading

from ..errors import UserError

SINK_PORT = 5399
BASE_SOURCE_PORT = 40000
SLOTS_PER_DIRECTION = 16  # streams a link direction can carry
CHUNK_BYTES = 1 << 20


def stream_port(link, direction, slot):
    """The source port of stream ``slot`` on direction 0 (a -> b) or 1 (b -> a) of link
    number ``link``."""
    if not 0 <= slot < SLOTS_PER_DIRECTION:
        raise ValueError(f"at most {SLOTS_PER_DIRECTION} streams per link direction")
    return BASE_SOURCE_PORT + (2 * link + direction) * SLOTS_PER_DIRECTION + slot


# -- the agent (runs in a namespace) -----------------------------------------------------------


def _drain(conn):
    buf = bytearray(CHUNK_BYTES)
    with conn:
        while conn.recv_into(buf):
            pass


def _sink(server):
    while True:
        try:
            conn, _ = server.accept()
        except OSError:
            return
        threading.Thread(target=_drain, args=(conn,), daemon=True).start()


def _send(conn, stop, source):
    """Send until ``stop``: ``sendfile`` from a file of zeros (no copy through Python, so
    dozens of streams fit on a small machine)."""
    with conn:
        while not stop.is_set():
            try:
                conn.sendfile(source, 0, CHUNK_BYTES)
            except OSError:
                return


def agent(port):
    """Sink on ``port``; open and close streams as standard input says; end with it."""
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("0.0.0.0", port))
    server.listen(64)
    threading.Thread(target=_sink, args=(server,), daemon=True).start()
    print("ready", flush=True)
    streams = {}
    source = tempfile.TemporaryFile()
    source.write(bytes(CHUNK_BYTES))
    source.flush()
    for line in sys.stdin:
        words = line.split()
        if words[:1] == ["open"] and len(words) == 5:
            conn = socket.socket()
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            conn.bind(("0.0.0.0", int(words[4])))
            conn.connect((words[2], int(words[3])))
            stop = threading.Event()
            threading.Thread(target=_send, args=(conn, stop, source), daemon=True).start()
            streams[words[1]] = stop
        elif words[:1] == ["close"] and len(words) == 2 and words[1] in streams:
            streams.pop(words[1]).set()
        print("ok", flush=True)
    return 0


# -- the pool (runs where the scenario is played) ----------------------------------------------


def _last(proc):
    """The last line an agent wrote to its standard error (it has ended)."""
    proc.wait(timeout=5)
    lines = proc.stderr.read().strip().splitlines()
    return lines[-1] if lines else f"exit status {proc.returncode}"


class StreamPool:
    """The agents of one testbed and the streams open through them."""

    def __init__(self, python=sys.executable):
        self.python = python
        self.agents = {}  # namespace -> Popen
        self.open = {}  # (link, direction) -> list of stream ids, slot order

    def start(self, namespaces):
        """Start the agents of ``namespaces`` all at once (a run does this before its first
        job, so that opening a stream later costs a line, not a Python start)."""
        started = []
        for ns in namespaces:
            if ns not in self.agents:
                self.agents[ns] = subprocess.Popen(
                    ["ip", "netns", "exec", ns, self.python, "-m", "emulator.kernel.streams",
                     "agent", str(SINK_PORT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True)
                started.append(ns)
        for ns in started:
            proc = self.agents[ns]
            if proc.stdout.readline().strip() != "ready":
                raise UserError(f"stream agent in {ns} did not start: {_last(proc)}")

    def _agent(self, ns):
        if ns not in self.agents:
            self.start([ns])
        return self.agents[ns]

    def _say(self, ns, line):
        proc = self._agent(ns)
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        if proc.stdout.readline().strip() != "ok":
            raise UserError(f"stream agent in {ns} failed: {_last(proc)}")

    def set_count(self, link, direction, count, src_ns, dst_ns, dst_address):
        """Open or close streams from namespace ``src_ns`` to ``dst_address`` (in
        ``dst_ns``) so that ``count`` run on this link direction."""
        ids = self.open.setdefault((link, direction), [])
        if len(ids) < count:
            self._agent(dst_ns)  # its sink
        while len(ids) < count:
            slot = len(ids)
            sid = f"{link}.{direction}.{slot}"
            self._say(src_ns, f"open {sid} {dst_address} {SINK_PORT} "
                              f"{stream_port(link, direction, slot)}")
            ids.append((src_ns, sid))
        while len(ids) > count:
            ns, sid = ids.pop()
            self._say(ns, f"close {sid}")

    def close(self):
        """End every agent (their streams with them)."""
        for proc in self.agents.values():
            try:
                proc.stdin.close()
            except OSError:
                pass
        for proc in self.agents.values():
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.agents.clear()
        self.open.clear()


if __name__ == "__main__":
    if sys.argv[1:2] == ["agent"] and len(sys.argv) == 3:
        sys.exit(agent(int(sys.argv[2])))
    print("usage: python -m emulator.kernel.streams agent PORT", file=sys.stderr)
    sys.exit(2)
