"""Errors the CLI reports as one line with exit code 2 (the user can fix them)."""


class UsageError(Exception):
    """Bad command-line input: a wrong option value, a path that is not a run directory."""
