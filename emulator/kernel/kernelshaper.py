"""Kernel shaping for a run on the namespace testbed: the coordinator's scenario clock, in tc.

Runs in the coordinator. A background thread applies each scenario change to the testbed's
HTB classes when its time comes on the current job's clock. When a job runs on another clock
(the experiment replays one scenario time for every method) or on the dedicated network,
:meth:`KernelShaper.use` first brings every pair there, then the thread follows the new
clock.
"""

import math
import threading
import time

from ..network import cluster as clusters
from .tcplayer import ScenarioPlayer
from .testbed import Layout, Testbed


class KernelShaper:
    def __init__(self, testbed, cluster, timeline, time_scale, capacity_mbps):
        self.names = clusters.node_names(cluster)
        self.player = ScenarioPlayer(cluster, timeline, testbed.set_pair, self.names)
        self.time_scale = time_scale
        self.capacity_mbps = capacity_mbps
        self.epoch, self.dedicated = None, False
        self.errors = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._follow, name="kernel-shaper", daemon=True)
        self._thread.start()

    @classmethod
    def from_settings(cls, settings):
        info = settings.extra["testbed"]  # see testbed.shaping_info
        testbed = Testbed(Layout(info["name"], info["nodes"], info["subnet"]),
                          state_dir=info["state_dir"])
        return cls(testbed, settings.cluster, settings.timeline, settings.time_scale,
                   info["capacity_mbps"])

    def scenario_time(self):
        return (time.time() - self.epoch) * self.time_scale

    def use(self, epoch, dedicated=False):
        """Shape for a job on clock ``epoch`` (or the dedicated network) from now on."""
        with self._lock:
            if (epoch, dedicated) == (self.epoch, self.dedicated):
                return
            self.epoch, self.dedicated = epoch, dedicated
            if dedicated:
                self.player.apply_rates({(a, b): self.capacity_mbps for a in self.names
                                         for b in self.names if a != b})
            else:
                self.player.apply(self.scenario_time())
        self._wake.set()

    def _follow(self):
        while not self._stop:
            with self._lock:
                delay, due, clock = math.inf, None, (self.epoch, self.dedicated)
                if self.epoch is not None and not self.dedicated:
                    now = self.scenario_time()
                    due = self.player.next_event(now)
                    if due is not None:
                        delay = (due - now) / self.time_scale
            if self._wake.wait(timeout=None if math.isinf(delay) else max(0.0, delay)):
                self._wake.clear()
                continue
            with self._lock:
                if (self.epoch, self.dedicated) == clock and due is not None:
                    try:
                        self.player.apply(max(due, self.scenario_time()))
                    except Exception as e:  # reported by close(); the run goes on
                        self.errors.append(str(e))

    def close(self):
        self._stop = True
        self._wake.set()
        self._thread.join(timeout=5)
