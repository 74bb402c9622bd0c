"""The nodes of the batch allocation a command runs in, and a placement in the files that
launchers read.

Slurm gives an allocation as ``SLURM_JOB_NODELIST`` in its hostlist syntax (``node[01-16,20]``,
expanded by python-hostlist) with ``SLURM_TASKS_PER_NODE`` (``2(x3),1``); PBS/Torque as
``PBS_NODEFILE``, a file naming each host once per slot. A placement (hosts in rank order) is
written as an MPICH machinefile (``host:ranks``), an Open MPI rankfile (``rank i=host
slot=k``) and a Slurm node list (``srun --nodelist``).
"""

import os

import hostlist

from ..errors import InputFileError, UserError
from ..files import read_input_text, write_text_atomic


def allocation_hosts(environ=None):
    """``(source, {host: slots})`` of the allocation in ``environ`` (default: this process's
    environment), hosts in the allocation's order; None outside an allocation."""
    env = os.environ if environ is None else environ
    nodelist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST")
    if nodelist:
        source = "SLURM_JOB_NODELIST" if env.get("SLURM_JOB_NODELIST") else "SLURM_NODELIST"
        try:
            hosts = hostlist.expand_hostlist(nodelist)
        except hostlist.BadHostlist as e:
            raise UserError(f"{source}={nodelist!r}: not a Slurm hostlist ({e})") from None
        slots = [1] * len(hosts)
        tasks = env.get("SLURM_TASKS_PER_NODE")
        if tasks:
            try:
                slots = hostlist.parse_slurm_tasks_per_node(tasks)
            except hostlist.BadHostlist as e:
                raise UserError(f"SLURM_TASKS_PER_NODE={tasks!r}: {e}") from None
            if len(slots) != len(hosts):
                raise UserError(f"SLURM_TASKS_PER_NODE={tasks!r} gives {len(slots)} nodes, "
                                f"{source} {len(hosts)}")
        if not hosts:
            raise UserError(f"{source} is empty")
        return source, dict(zip(hosts, slots))
    path = env.get("PBS_NODEFILE")
    if path:
        if not os.path.exists(path):
            raise InputFileError(path, "", "no such file (named by PBS_NODEFILE)")
        hosts = {}
        for line in read_input_text(path, "PBS node file").splitlines():
            host = line.strip()
            if host:
                hosts[host] = hosts.get(host, 0) + 1
        if not hosts:
            raise InputFileError(path, "", "no hosts listed (named by PBS_NODEFILE)")
        return "PBS_NODEFILE", hosts
    return None


def placement_texts(hosts):
    """The three files of a placement: ``hosts`` in rank order (a host may repeat)."""
    runs = []  # consecutive ranks on one host: MPICH's host:n
    for h in hosts:
        if runs and runs[-1][0] == h:
            runs[-1][1] += 1
        else:
            runs.append([h, 1])
    used = {}
    rank_lines = []
    for rank, h in enumerate(hosts):
        rank_lines.append(f"rank {rank}={h} slot={used.get(h, 0)}\n")
        used[h] = used.get(h, 0) + 1
    return {"machinefile": "".join(f"{h}:{n}\n" for h, n in runs),
            "rankfile": "".join(rank_lines),
            "nodelist": hostlist.collect_hostlist(list(dict.fromkeys(hosts))) + "\n"}


def write_placement(out_dir, hosts):
    """Write ``machinefile``, ``rankfile`` and ``nodelist`` into ``out_dir``; their paths."""
    paths = {}
    for name, text in placement_texts(hosts).items():
        paths[name] = os.path.join(out_dir, name)
        write_text_atomic(paths[name], text)
    return paths
