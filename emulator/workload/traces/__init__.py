"""Traces shipped with the project, by built-in name.

``nasa``: the NASA Ames iPSC/860 log of October-December 1993 from the Parallel Workloads
Archive (cleaned version 3.1): 18,239 jobs on 128 processors, with user, group and executable
ids, no wait and no requested times (its submit times are start times, so as given it is
lightly loaded). Acknowledgement: Bill Nitzberg, NASA Ames; conversion to the Standard
Workload Format by Dror Feitelson. https://www.cs.huji.ac.il/labs/parallel/workload/
"""

import os

HERE = os.path.dirname(os.path.abspath(__file__))
BUILTIN = {"nasa": os.path.join(HERE, "NASA-iPSC-1993-3.1-cln.swf.gz")}


def resolve_trace(name):
    """The path of a built-in trace name (``nasa``), else ``name`` itself. A file that
    happens to be called ``nasa`` is reached as ``./nasa``."""
    return BUILTIN.get(name, name)
