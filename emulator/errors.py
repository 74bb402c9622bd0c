"""Exceptions for bad input and failed runs.

Every user-facing problem is a subclass of :class:`UserError`; the command line prints its
message on one line and exits with status 2, with no traceback.
"""


class UserError(Exception):
    """A problem with what the user asked for or gave us (exit status 2)."""


class InputFileError(UserError, ValueError):
    """A malformed or contradictory input file.

    The message names the file, the line or field, and what is wrong.
    """

    def __init__(self, path, where, problem):
        self.path = str(path)
        self.where = where
        self.problem = problem
        location = f"{self.path}: {where}: " if where else f"{self.path}: "
        super().__init__(location + problem)


class SelectionError(UserError, ValueError):
    """Base class for impossible node-selection requests."""


class TooManyProcessesError(SelectionError):
    """The job asks for more nodes than the network has compute nodes."""


class PatternDoesNotFitError(SelectionError):
    """The pattern cannot be embedded in the network even at bandwidth 0."""


class UnknownPatternError(SelectionError, KeyError):
    """No built-in pattern has that name."""

    def __str__(self):
        return self.args[0]


class ProcessCountError(SelectionError):
    """The process count is not one the benchmark allows."""


class NodeFailure(RuntimeError):
    """A node rank died or stopped answering within the timeout."""

    def __init__(self, node, reason, *, nodes=None):
        self.node = node
        self.nodes = list(nodes) if nodes is not None else [node]
        self.reason = reason
        super().__init__(f"node {node} failed: {reason}")


class MachineFailure(RuntimeError):
    """A machine of a run over several (or the served model's owner) went silent or failed:
    its nodes' flows would never end, so the run ends (exit status 3)."""
