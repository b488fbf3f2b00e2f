"""Builders of sweep configs for tests (TOML text a user could have written), and the reader of what a
sweep stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ifsweep import benchmarks
from ifsweep.runner.store.shards import RunStore


def toml_config(
    out: Path,
    api_base: str,
    *,
    models: tuple[str, ...] = ("alpha", "beta"),
    bench: tuple[str, ...] = ("followbench", "cfbench"),
    data: dict[str, Path] | None = None,
    limit: int | None = None,
    extra_run: str = "",
    extra_model: str = "",
    judge: bool = True,
) -> str:
    lines = ["[run]", f'output_dir = "{out}"', 'progress = "off"', extra_run, ""]
    for name in bench:
        d = (data or {}).get(name) or benchmarks.get(name).fixture_dir()
        lines += ["[[benchmarks]]", f'name = "{name}"', f'data = "{d}"']
        if limit is not None:
            lines.append(f"limit = {limit}")
        lines.append("")
    for m in models:
        lines += [
            "[[models]]",
            f'id = "{m}"',
            f'model = "openai/sim-{m}"',
            f'api_base = "{api_base}"',
            "params = { temperature = 0, max_tokens = 128 }",
            extra_model,
            "",
        ]
    if judge:
        lines += ["[judge]", 'id = "judge"', 'model = "openai/sim-judge"', f'api_base = "{api_base}"', ""]
    return "\n".join(lines)


def stored_records(run_dir: Path, kinds: set[str]) -> list[dict[str, Any]]:
    """Every valid record of those kinds in RUN_DIR's shards, read as a separate writer would."""
    store = RunStore.open(run_dir, writer_id="test_reader")
    try:
        return list(store.iter_records(kinds))
    finally:
        store.close()
