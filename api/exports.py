"""The names of the library API that runner/commands/library.py defines and `ifsweep` re-exports.

One list for both: library.py's `__all__` and the lazy table of api/__init__.py. A module of its own (no
imports) so that library.py can read it without an import cycle through the `ifsweep` package.
"""

from __future__ import annotations

LIBRARY_NAMES = (
    "ConfigSource",
    "Estimate",
    "StatusRow",
    "SweepResult",
    "agreement",
    "arun",
    "plan",
    "report",
    "run",
    "scores",
    "status",
    "verdicts",
)
