"""The version of what turns a benchmark's answers and judge replies into verdicts, derived from that
code itself: a hash of its source, never a number someone must remember to bump.

It covers every module that can change a verdict: the shared modules of `ifsweep.benchmarks` (the
records, the echo filter, file reading, option checks) and every module and text of the package the
benchmark's class is defined in (its loader, prompts, rule checks, parsers, importer), except what no
verdict reads: the registry and the pinned releases, `_metrics` (only reports read it) and `_simulated`
(only the simulator does). A verdict record stores the version it was derived with; when the code
changes, a resume re-derives the verdicts from the stored replies (runner/engine/pipeline.py).
"""

from __future__ import annotations

import functools
import hashlib
import sys
from pathlib import Path

__all__ = ["scoring_version"]

_SHARED = Path(__file__).resolve().parent
_NOT_READ_BY_VERDICTS = frozenset({"registry.py", "releases.py", "_metrics.py", "_simulated.py"})
_SOURCES = ("*.py", "*.txt")  # code, and the prompt texts shipped beside it


def scoring_version(bench: object) -> str:
    """12 hex digits of sha256 over the source `bench`'s verdicts are derived by (see the module); read
    once per process and module, as the code a process runs is the code it imported."""
    return _of_module(type(bench).__module__)


@functools.cache
def _of_module(name: str) -> str:
    module = sys.modules[name]
    package = module.__package__
    if package and package != __package__ and getattr(sys.modules[package], "__file__", None):
        own = tuple(_files(Path(str(sys.modules[package].__file__)).resolve().parent, recursive=True))
    else:  # a benchmark defined in a module outside any package of its own: that module alone
        own = (Path(str(module.__file__)).resolve(),)
    return _digest((*_files(_SHARED, recursive=False), *own))


def _files(folder: Path, *, recursive: bool) -> list[Path]:
    found = [
        p for pattern in _SOURCES for p in (folder.rglob(pattern) if recursive else folder.glob(pattern))
    ]
    return sorted(p for p in found if p.name not in _NOT_READ_BY_VERDICTS and "__pycache__" not in p.parts)


def _digest(files: tuple[Path, ...]) -> str:
    # Each file by its name and its bytes: a module renamed or moved is a change too.
    h = hashlib.sha256()
    for path in files:
        h.update(f"{path.parent.name}/{path.name}".encode() + b"\x00" + path.read_bytes() + b"\x00")
    return h.hexdigest()[:12]
