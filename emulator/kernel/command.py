"""The one place that runs system commands: an argv list, no shell, every status checked."""

import shlex
import shutil
import subprocess

from ..errors import UserError


class CommandError(UserError):
    """A command that failed; carries its argv, exit status and standard error."""

    def __init__(self, argv, returncode, stderr):
        self.argv, self.returncode, self.stderr = list(argv), returncode, stderr.strip()
        super().__init__(f"command failed (exit {returncode}): {shlex.join(self.argv)}: "
                         f"{self.stderr or 'no error output'}")


def run(argv, *, timeout_seconds=30.0):
    """Run ``argv`` (a list of strings) without a shell; return its standard output.

    Raises :class:`CommandError` for a non-zero exit status, a missing program or a
    timeout.
    """
    if not isinstance(argv, (list, tuple)) or not argv or not all(isinstance(a, str) for a in argv):
        raise TypeError(f"argv must be a non-empty list of strings, got {argv!r}")
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_seconds,
                              check=False)
    except FileNotFoundError:
        raise CommandError(argv, 127, f"{argv[0]}: not found") from None
    except subprocess.TimeoutExpired:
        raise CommandError(argv, -1, f"no exit within {timeout_seconds:g} s") from None
    if proc.returncode != 0:
        raise CommandError(argv, proc.returncode, proc.stderr)
    return proc.stdout


def have(program):
    return shutil.which(program) is not None
