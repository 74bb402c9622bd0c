"""The job attributes that predictors categorise by, as a trace records them.

Letters follow Li et al.: ``G`` group, ``U`` user, ``Q`` queue, ``E`` executable, ``N`` the
processors requested. A trace field that is -1 for every job is not available.
"""

ATTRIBUTES = {"G": "group", "U": "user", "Q": "queue", "E": "executable", "N": "procs"}
NOMINAL = "GUQE"


def available(jobs):
    """The attribute letters the jobs carry, in the order G, U, Q, E, N."""
    have = [a for a in NOMINAL if any(getattr(j, ATTRIBUTES[a]) != -1 for j in jobs)]
    return "".join(have) + "N"


def has_requested(jobs):
    """True if some job has a requested time."""
    return any(j.requested is not None for j in jobs)


def node_bucket(procs, node_range):
    """Smith's node range: with a range size of r, 1..r is bucket 0, r+1..2r bucket 1."""
    return (procs - 1) // node_range


def category_key(job, attrs, node_range=None):
    """The category of ``job`` under a template of nominal ``attrs`` (letters) and, if
    ``node_range`` is set, its processor count in ranges of that size."""
    key = tuple(getattr(job, ATTRIBUTES[a]) for a in attrs)
    if node_range is not None:
        key += (node_bucket(job.procs, node_range),)
    return key
