"""``python -m emulator``: the ``nodesel`` command."""

import sys

from .cli import main

sys.exit(main())
