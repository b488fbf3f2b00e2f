"""ifsweep: evaluate many LLMs on constraint-following benchmarks in one fast, budgeted, resumable sweep.

The repository's folders install under this one package: `ifsweep.runner`, `ifsweep.providers`,
`ifsweep.metrics`, `ifsweep.benchmarks`. Importing `ifsweep` loads none of them.
"""

from __future__ import annotations

__all__: list[str] = []
