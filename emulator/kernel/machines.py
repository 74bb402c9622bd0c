"""A testbed of fake machines on one machine (root): hosts to spread one emulated cluster over.

``up`` makes H namespaces on a bridge, as the shaping testbed (:mod:`.testbed`) makes its
nodes' but unshaped, and writes an MPICH hostfile (each machine's address with ``slots``
ranks) and a launcher for Hydra::

    sudo nodesel testbed up --machines 3 --name nselh
    mpiexec -launcher ssh -launcher-exec hostfiles/nselh-launcher -f hostfiles/nselh.hosts \\
        -n 13 nodesel flows --cluster hostfiles/racks12.toml --flows F
    sudo nodesel testbed down --name nselh

The launcher runs each Hydra proxy as a machine of its own: in its network namespace and in
new UTS (the machine's name as hostname), IPC, PID and mount namespaces, with a private
``/dev/shm`` and its own ``/proc``; the ranks a proxy starts share them. So MPICH's shared
memory and nodesel's shared model stay within a machine, UCX (which decides by itself what
is on the same machine) cannot map another machine's segments, and a PID means the same
only on its own machine. When the proxy ends, its PID namespace goes with it.
"""

from . import iproute
from .testbed import Testbed

# The machines' links are not shaped (the emulated cluster's network is the model's): a
# port this fast for the segment size of the veths
UNSHAPED_MBPS = 10000.0


class MachinesTestbed(Testbed):
    """``layout.nodes`` fake machines (named by the layout's node names), each a namespace
    on the layout's bridge; ``down`` is the shaping testbed's."""

    def up(self, *, slots: int = 1, out_dir: str = None) -> dict:
        """Create the bridge and the machines; write the hostfile (``slots`` ranks a machine)
        and the launcher to ``out_dir``. Returns their paths."""
        L = self.layout
        if isinstance(slots, bool) or not isinstance(slots, int) or slots < 1:
            raise iproute.InvalidTestbedValue(f"--slots must be a positive integer, got "
                                              f"{slots!r}")
        self._begin(UNSHAPED_MBPS, out_dir, machines=True, slots=slots)
        try:
            self._make_hosts(L.node_names(), UNSHAPED_MBPS)
            files = self._write_files(out_dir, hosts=L.node_names(), slots=slots,
                                      machine=True) if out_dir else {}
        except BaseException:
            self.down()
            raise
        return files
