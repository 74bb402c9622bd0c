"""``python -m emulator``: the ``nodesel`` command."""

from .cli import entry

entry()
