"""Taking the nodes' cgroups down, on a hierarchy laid out in a folder: groups kept busy by
exiting processes for a moment are retried, and one that stays busy is named."""

import errno
import os

import pytest

from emulator.kernel import cgroups


def fake_run(tmp_path, nodes=("n1", "n2")):
    root = tmp_path / "cpu"
    base = root / "nodesel-1"
    for n in nodes:
        (base / n).mkdir(parents=True)
        (base / n / "cgroup.procs").write_text("4242\n" if n == "n1" else "")
    (base / "cgroup.procs").write_text("")
    (root / "cgroup.procs").write_text("")
    return root, base


def busy_for(times, calls):
    """os.rmdir as the kernel's on a group (its files go with it): EBUSY ``times`` times for
    n1's group, then removed."""
    real_rmdir = os.rmdir

    def rmdir(path):
        calls.append(os.path.basename(path))
        if os.path.basename(path) == "n1" and calls.count("n1") <= times:
            raise OSError(errno.EBUSY, os.strerror(errno.EBUSY), path)
        for name in os.listdir(path):
            os.unlink(os.path.join(path, name))
        real_rmdir(path)
    return rmdir


def test_a_group_busy_for_a_moment_is_moved_again_and_removed(tmp_path, monkeypatch):
    root, base = fake_run(tmp_path)
    calls = []
    monkeypatch.setattr(cgroups.os, "rmdir", busy_for(3, calls))
    cgroups.CpuGroups(["n1", "n2"], 8, run="nodesel-1", root=str(root), version="v1").down()
    assert not base.exists()
    assert calls.count("n1") == 4 and calls[-1] == "nodesel-1"
    assert (root / "cgroup.procs").read_text() == "4242"  # its process went to the root


def test_a_group_that_stays_busy_is_named_with_what_is_in_it(tmp_path, monkeypatch):
    root, base = fake_run(tmp_path)
    monkeypatch.setattr(cgroups.os, "rmdir", busy_for(10 ** 6, []))
    with pytest.raises(OSError, match=r"processes \[4242\] still in it.*nodesel-1/n1"):
        cgroups._remove_tree(str(root), str(base), patience_seconds=0.2)


def test_on_cgroup_v2_a_node_gets_cpu_max_and_its_groups_go(tmp_path, monkeypatch):
    """cgroup v2's files as the kernel documents them: the run's group enables the cpu
    controller for its children, each node's ``cpu.max`` is "quota period"."""
    root = tmp_path / "unified"
    root.mkdir()
    (root / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    (root / "cgroup.procs").write_text("")
    monkeypatch.setattr(cgroups, "V1_ROOT", str(tmp_path / "no-v1"))
    monkeypatch.setattr(cgroups, "V2_ROOT", str(root))
    assert cgroups.hierarchy() == ("v2", str(root))
    groups = cgroups.CpuGroups(["n1", "n/2"], 8, run="nodesel-1")
    base = groups.up()
    assert (root / "nodesel-1" / "cgroup.subtree_control").read_text() == "+cpu"
    assert (root / "nodesel-1" / "n1" / "cpu.max").read_text() == "2000 16000"
    assert (root / "nodesel-1" / "n_2" / "cpu.max").read_text() == "2000 16000"
    # the coordinator: no quota, the largest weight (the nodes keep the default 100); the
    # run's group the largest weight beside the machine's other processes
    assert (root / "nodesel-1" / "coordinator" / "cpu.weight").read_text() == "10000"
    assert (root / "nodesel-1" / "cpu.weight").read_text() == "10000"
    assert not (root / "nodesel-1" / "coordinator" / "cpu.max").exists()
    for n in ("n1", "n_2", "coordinator"):
        (root / "nodesel-1" / n / "cgroup.procs").write_text("")
    cgroups.join(base, "n1", 4242)
    assert (root / "nodesel-1" / "n1" / "cgroup.procs").read_text() == "4242"
    monkeypatch.setattr(cgroups.os, "rmdir", busy_for(0, []))
    assert groups.down() and not (root / "nodesel-1").exists()
    assert (root / "cgroup.procs").read_text() == "4242"
    assert not groups.down()


def test_without_a_cpu_controller_there_is_no_hierarchy(tmp_path, monkeypatch):
    (tmp_path / "cgroup.controllers").write_text("cpuset io memory pids\n")
    monkeypatch.setattr(cgroups, "V1_ROOT", str(tmp_path / "no-v1"))
    monkeypatch.setattr(cgroups, "V2_ROOT", str(tmp_path))
    assert cgroups.hierarchy() is None


def test_a_node_named_as_the_coordinators_group_is_refused(tmp_path):
    from emulator.errors import UserError

    with pytest.raises(UserError, match="may not be named 'coordinator'"):
        cgroups.CpuGroups(["n1", "coordinator"], 8, root=str(tmp_path), version="v1")


def test_pinning_binds_every_thread_of_a_node_and_what_it_starts_to_one_core():
    """A node's rank has threads before it joins its group (MPI's, the serving loop's): all
    of them, and a process it starts after, run on the node's core alone."""
    import subprocess
    import sys

    core = cgroups.core_of(1)
    code = (
        "import os, sys, threading, time\n"
        "from emulator.kernel import cgroups\n"
        "threading.Thread(target=time.sleep, args=(30,), daemon=True).start()\n"
        f"cgroups.pin({core})\n"
        "child = os.fork()\n"
        "if child == 0:\n"
        "    time.sleep(30); os._exit(0)\n"
        "tasks = [(os.getpid(), t) for t in os.listdir('/proc/self/task')]\n"
        "tasks += [(child, t) for t in os.listdir(f'/proc/{child}/task')]\n"
        "for pid, t in tasks:\n"
        "    print(sorted(os.sched_getaffinity(int(t))))\n"
        "os.kill(child, 9)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split("\n")
    masks = [line for line in out if line]
    assert len(masks) == 3 and set(masks) == {f"[{core}]"}, masks
