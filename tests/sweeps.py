"""Builders of sweep configs for tests (TOML text a user could have written), and the reader of what a
sweep stored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ifsweep import benchmarks
from ifsweep.runner.store.shards import RunStore, record_key


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


def verdict_record(
    i: int, model: str, values: list[bool | None], status: str = "ok", *, ts: float = 2.0, again: int = 0
) -> dict[str, Any]:
    """A verdict record as the sweep writes one: `model`'s on instance i{i}, a row per value (None:
    unparsed). `again`: another key (another generation's verdict, say) for the same slot."""
    more = {"again": again} if again else {}
    return {
        "v": 1,
        "kind": "verdict",
        "key": record_key({"verdict": i, "m": model, **more}),
        "status": status,
        "model": model,
        "judge": "j",
        "benchmark": "fb",
        "instance_id": f"i{i}",
        "group_id": f"g{i // 2}",
        "level": i % 5 + 1,
        "category": "content",
        "split": None,
        "gen_key": record_key({"generation": i, "m": model, **more}),
        "scoring": "paper",
        "rows": [
            {
                "constraint_idx": c,
                "instruction_idx": None,
                "constraint_type": "format",
                "priority": None,
                "satisfied": v,
                "source": "judge",
                "status": "error" if status == "error" else ("ok" if v is not None else "unparsed"),
            }
            for c, v in enumerate(values)
        ],
        "ts": ts,
    }


PANEL_PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}


def panel_sweep(out: Path, base: str, judges: tuple[tuple[str, str], ...], *, limit: int) -> dict[str, Any]:
    """A library config: models a, b and c on CFBench's and InFoBench's fixtures, judged by a panel of
    (id, simulator model) judges (the audit's and the flawed judges' tests)."""
    return {
        "run": {"output_dir": str(out), "progress": "off", "concurrency": 8},
        "benchmarks": [
            {"name": b, "data": str(benchmarks.get(b).fixture_dir()), "limit": limit}
            for b in ("cfbench", "infobench")
        ],
        "models": [
            {
                "id": m,
                "model": f"openai/sim-{m}",
                "api_base": base,
                "price": PANEL_PRICE,
                "params": {"max_tokens": 64},
            }
            for m in ("a", "b", "c")
        ],
        "judges": [
            {"id": j, "model": f"openai/{name}", "api_base": base, "price": PANEL_PRICE} for j, name in judges
        ],
    }
