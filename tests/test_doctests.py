"""The examples in the modules' docstrings run and give what they show."""

import doctest
import importlib

import pytest

MODULES = ["emulator.flowmodel", "emulator.load", "emulator.measure", "emulator.pipeline",
           "emulator.report", "emulator.scenario", "emulator.selection", "emulator.timing"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name))
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
