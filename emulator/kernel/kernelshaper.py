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

from .tcplayer import player_for
from .treebed import open_testbed_of


class KernelShaper:
    def __init__(self, testbed, cluster, timeline, time_scale):
        self.testbed = testbed
        self.player = player_for(cluster, timeline, testbed)
        if getattr(testbed, "background", "rates") == "real":
            # agents and the scenario's first streams before any job: opening dozens of
            # streams takes seconds, which must not land on a job's clock
            testbed.start_streams()
            self.player.apply(0.0)
        self.time_scale = time_scale
        self.epoch, self.dedicated = None, False
        self.errors = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._follow, name="kernel-shaper", daemon=True)
        self._thread.start()

    @classmethod
    def from_settings(cls, settings):
        testbed = open_testbed_of(settings.extra["testbed"])  # see testbed.shaping_info
        # under dilation K the scenario clock runs K times slower (the testbed's rates are
        # already 1/K of the cluster's)
        return cls(testbed, settings.cluster, settings.timeline,
                   settings.time_scale / settings.dilation)

    def scenario_time(self):
        return (time.time() - self.epoch) * self.time_scale

    def use(self, epoch, dedicated=False):
        """Shape for a job on clock ``epoch`` (or the dedicated network) from now on."""
        with self._lock:
            if (epoch, dedicated) == (self.epoch, self.dedicated):
                return
            self.epoch, self.dedicated = epoch, dedicated
            if dedicated:
                self.player.apply_rates(self.player.dedicated_rates())
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
        stop_streams = getattr(self.testbed, "stop_streams", None)
        if stop_streams is not None:  # real background streams end with the run
            stop_streams()
