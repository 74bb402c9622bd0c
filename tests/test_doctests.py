"""The examples in the modules' docstrings run and give what they show."""

import doctest
import importlib

import pytest

MODULES = ["emulator.network.sharing", "emulator.coordinator.load", "emulator.coordinator.measure", "emulator.coordinator.pipeline",
           "emulator.experiments.report", "emulator.network.scenario", "emulator.selection.maxmin", "emulator.shaping.timing",
           "emulator.scheduling.job", "emulator", "emulator.network.generate",
           "emulator.scheduling.trace_run", "emulator.workload.batsim",
           "emulator.scheduling.batsim_out", "emulator.workload.sacct", "emulator.network.cluster",
           "emulator.experiments.userjob", "emulator.shaping.served", "emulator.files",
           "emulator.workload.slurmtime", "emulator.coordinator.tasks"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
