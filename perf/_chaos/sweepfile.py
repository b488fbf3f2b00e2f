"""The sweep file of one stage of a chaos run: TOML a user could have written, against the simulator."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from _chaos.scenario import Scenario
from ifsweep import benchmarks

KEY_ENV = "IFSWEEP_CHAOS_KEY"
MODEL_PRICE = "price = { input_per_mtok = 1.0, output_per_mtok = 2.0 }"
JUDGE_PRICE = "price = { input_per_mtok = 0.5, output_per_mtok = 1.5 }"
PRICES = {"model": (1.0, 2.0), "judge": (0.5, 1.5)}  # $/Mtok in, out; the Batch API charges half
BATCH = "batch = { max_requests = 40, max_age_s = 0.3, poll_s = 0.2, poll_max_s = 0.6 }"
TIMEOUT_S = 4.0  # a hang ends the call after this; the simulator's latency stays well below it
BIG_CAP = 1000.0
COORDINATOR_TIMEOUT_S = 4  # a coordinator gone this long stops the run (exit 1, resumable)


@dataclass(frozen=True, slots=True)
class Stage:
    """What one run of the sweep is configured with; edits and probes make new stages."""

    judges: tuple[str, ...]
    caps: tuple[tuple[str, float], ...] = ()  # (scope, dollars)
    max_tokens: int = 128
    limit_delta: int = 0
    scoring: str = "paper"
    judge_temperature: float = 0.0


def served(endpoint: str) -> str:
    """The model name the simulator sees for a model or judge id (its ledger is kept by it)."""
    return f"sim-{endpoint}"


def render(s: Scenario, stage: Stage, out: Path, api_base: str, coordinator: str | None) -> str:
    caps = dict(stage.caps)
    run = ["[run]", f'output_dir = "{out}"', 'progress = "off"', f"flush_ms = {s.flush_ms:g}"]
    run += [f"reask = {s.reask}", "concurrency = 8"]
    if "run" in caps:
        run.append(f"max_usd = {caps['run']!r}")
    if coordinator is not None:
        run += [f'coordinator = "{coordinator}"', f"coordinator_timeout_s = {COORDINATOR_TIMEOUT_S}"]
    lines = [*run, ""]
    for name in s.benches:
        lines += ["[[benchmarks]]", f'name = "{name}"', f'data = "{benchmarks.get(name).fixture_dir()}"']
        lines += [f"limit = {s.limit + stage.limit_delta}", f'scoring = "{stage.scoring}"', ""]
    for m in s.models:
        params = f"params = {{ temperature = 0, max_tokens = {stage.max_tokens} }}"
        lines += ["[[models]]", *_endpoint(s, m, caps, MODEL_PRICE, api_base), params, ""]
    for j in stage.judges:
        params = f"params = {{ temperature = {stage.judge_temperature:g} }}"
        lines += ["[[judges]]", *_endpoint(s, j, caps, JUDGE_PRICE, api_base), params]
        if s.cache_dispatch:
            lines.append("cache_dispatch = true")
        lines.append("")
    return "\n".join(lines)


def _endpoint(s: Scenario, ident: str, caps: dict[str, float], price: str, api_base: str) -> list[str]:
    lines = [
        f'id = "{ident}"',
        f'model = "openai/{served(ident)}"',
        f'api_base = "{api_base}"',
        f'api_key_env = "{KEY_ENV}"',
        f"timeout_s = {TIMEOUT_S}",
        price,
    ]
    if ident in caps:
        lines.append(f"max_usd = {caps[ident]!r}")
    if ident in s.batch:
        lines.append(BATCH)
    return lines


def raised(stage: Stage, factor: float) -> Stage:
    """The same stage with every cap multiplied by `factor` (raising a cap resumes; lowering is refused)."""
    return Stage(
        stage.judges,
        tuple((scope, usd * factor) for scope, usd in stage.caps),
        stage.max_tokens,
        stage.limit_delta,
        stage.scoring,
        stage.judge_temperature,
    )


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
