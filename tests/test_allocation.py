"""The batch allocation's nodes (Slurm, PBS) and the placement files, with faked
environments."""

import json
import os
import subprocess
import sys

import pytest

from emulator.errors import UserError
from emulator.network.allocation import allocation_hosts, placement_texts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLEAN = {k: v for k, v in os.environ.items()
         if not k.startswith(("SLURM_", "PBS_", "PMI_"))}


def nodesel(*args, env=None):
    return subprocess.run([sys.executable, "-m", "emulator", *args], capture_output=True,
                          text=True, cwd=ROOT, timeout=120, env=dict(CLEAN, **(env or {})))


def test_a_slurm_hostlist_is_expanded_with_its_tasks_per_node():
    source, hosts = allocation_hosts({"SLURM_JOB_NODELIST": "node[01-03,20],gpu7",
                                      "SLURM_TASKS_PER_NODE": "2(x3),1(x2)"})
    assert source == "SLURM_JOB_NODELIST"
    assert hosts == {"node01": 2, "node02": 2, "node03": 2, "node20": 1, "gpu7": 1}
    assert allocation_hosts({"SLURM_NODELIST": "a[1-2]"}) == ("SLURM_NODELIST", {"a1": 1, "a2": 1})
    assert allocation_hosts({}) is None


@pytest.mark.parametrize("env,fragment", [
    ({"SLURM_JOB_NODELIST": "node[01-"}, "SLURM_JOB_NODELIST='node[01-': not a Slurm hostlist"),
    ({"SLURM_JOB_NODELIST": "n[1-3]", "SLURM_TASKS_PER_NODE": "2(x2)"}, "gives 2 nodes"),
    ({"SLURM_JOB_NODELIST": "n1", "SLURM_TASKS_PER_NODE": "two"}, "SLURM_TASKS_PER_NODE='two'"),
])
def test_a_bad_slurm_environment_is_named(env, fragment):
    with pytest.raises(UserError, match=fragment.replace("[", r"\[").replace("(", r"\(")):
        allocation_hosts(env)


def test_a_pbs_node_file_counts_each_host_once_per_slot(tmp_path):
    path = tmp_path / "nodes"
    path.write_text("cn2\ncn2\ncn1\n\ncn2\n")
    assert allocation_hosts({"PBS_NODEFILE": str(path)}) == ("PBS_NODEFILE", {"cn2": 3, "cn1": 1})
    with pytest.raises(UserError, match="no such file"):
        allocation_hosts({"PBS_NODEFILE": str(tmp_path / "missing")})


def test_a_placement_is_written_for_mpich_open_mpi_and_slurm():
    texts = placement_texts(["node02", "node02", "node01", "node02"])
    assert texts["machinefile"] == "node02:2\nnode01:1\nnode02:1\n"
    assert texts["rankfile"] == ("rank 0=node02 slot=0\nrank 1=node02 slot=1\n"
                                 "rank 2=node01 slot=0\nrank 3=node02 slot=2\n")
    assert texts["nodelist"] == "node[01-02]\n"


def test_cluster_show_takes_the_allocation_and_says_so():
    proc = nodesel("cluster", "show", "--json", env={"SLURM_JOB_NODELIST": "cn[1-3]"})
    assert proc.returncode == 0, proc.stderr
    names = [n["id"] for n in json.loads(proc.stdout)["nodes"] if n["kind"] == "compute"]
    assert names == ["cn1", "cn2", "cn3"] and "SLURM_JOB_NODELIST" in proc.stderr
    assert "cn1" not in nodesel("cluster", "show").stdout  # outside: the default cluster
    bad = nodesel("cluster", "show", env={"SLURM_JOB_NODELIST": "cn[1-"})
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


def test_select_keeps_to_the_allocation_and_writes_the_placement(tmp_path):
    net = tmp_path / "g.json"
    names = [f"cn{i}" for i in range(1, 7)]
    # the fastest pairs are among cn5 and cn6, which the job was not given
    links = [{"source": a, "target": b,
              "bandwidth_mbps": 90.0 if {a, b} <= {"cn5", "cn6"} else 10.0 * (i + j)}
             for i, a in enumerate(names) for j, b in enumerate(names) if i < j]
    net.write_text(json.dumps({"nodes": [{"id": n} for n in names], "links": links}))
    out = tmp_path / "place"
    out.mkdir()
    proc = nodesel("select", "--network", str(net), "--pattern", "cg", "--nprocs", "4",
                   "--out", str(out), env={"SLURM_JOB_NODELIST": "cn[1-4]"})
    assert proc.returncode == 0, proc.stderr
    best = json.loads(proc.stdout)["candidates"][0]
    assert sorted(best["nodes"]) == ["cn1", "cn2", "cn3", "cn4"]
    ranks = [best["mapping"][str(r)] for r in range(4)]
    assert (out / "machinefile").read_text() == "".join(f"{h}:1\n" for h in ranks)
    assert (out / "rankfile").read_text().splitlines()[0] == f"rank 0={ranks[0]} slot=0"
    assert (out / "nodelist").read_text() == "cn[1-4]\n"
    unfree = nodesel("select", "--network", str(net), "--pattern", "cg", "--nprocs", "4",
                     env={"SLURM_JOB_NODELIST": "other[1-4]"})
    assert unfree.returncode == 2 and "none of the allocation's nodes" in unfree.stderr
