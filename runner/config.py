"""The sweep config: TOML in, validated typed records out, or one ConfigError that names the key.

Validation happens before anything runs or is written. Relative paths resolve against the config file's
folder, so a config means the same thing from any working directory.
"""

from __future__ import annotations

import difflib
import math
import os
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ifsweep.providers.batch.choose import TESTED_BATCH_PROVIDERS
from ifsweep.providers.coord.interfaces import ENV_VAR as COORDINATOR_ENV
from ifsweep.providers.coord.interfaces import CoordinatorSettings, parse_coordinator
from ifsweep.providers.records import BatchPolicy, EndpointSpec, Price

ScoringMode = Literal["paper", "reference"]
ProgressMode = Literal["auto", "rich", "plain", "off"]
OrderMode = Literal["seeded", "file"]

DEFAULT_CONCURRENCY = 64
DEFAULT_MODEL_CONCURRENCY = 32

_RUN_KEYS = {
    "output_dir": "the run directory; re-running the same config resumes into it",
    "max_usd": "hard budget for the whole sweep, in dollars",
    "concurrency": "global cap on calls in flight",
    "reask": "how often an unparseable judge reply is asked again",
    "retry_errors": "re-send calls whose stored record is an error",
    "flush_ms": "group-commit interval of the result shards",
    "progress": "auto | rich | plain | off",
    "stop_deadline_s": "how long in-flight calls may finish after Ctrl-C",
    "coordinator": "redis://host:port/db shared by processes that share limits and budget",
    "coordinator_timeout_s": "stop (resumably, exit 1) after the coordinator was unreachable this long",
    "order": "seeded (every prefix a stratified random sample of the plan) | file (as the data lists them)",
    "order_seed": "the seed of the seeded order (a whole number >= 0; recorded in the manifest)",
    "stop_when": "{ halfwidth = H } or { ranking = C, tie = T }, optionally metric = M: stop once settled",
}
_STOP_KEYS = {"halfwidth", "ranking", "tie", "confidence", "metric"}
DEFAULT_STOP_CONFIDENCE = 0.95
_BENCH_KEYS = {"name", "data", "limit", "scoring", "reask"}
_ENDPOINT_KEYS = {
    "id",
    "model",
    "api_base",
    "api_key_env",
    "rpm",
    "tpm",
    "max_concurrency",
    "max_usd",
    "context_window",
    "params",
    "price",
    "use_litellm",
    "timeout_s",
    "cache_dispatch",
    "batch",
    "server_id",
    "reasoning",
}
_PRICE_KEYS = {"input_per_mtok", "output_per_mtok"}
_CACHE_PRICE_KEYS = {"cached_input_per_mtok", "cache_write_per_mtok"}  # optional: default to input
_BATCH_PRICE_KEYS = {"batch_input_per_mtok", "batch_output_per_mtok"}
_BATCH_KEYS = {"max_requests", "max_age_s", "poll_s", "poll_max_s", "max_retries"}
_TOP_KEYS = {"run", "benchmarks", "models", "judge", "judges"}


class ConfigError(ValueError):
    """A config that cannot run. `str()` names the file, the key and what is expected."""

    def __init__(self, path: Path | str, key: str, message: str):
        super().__init__(f"{path}: {key}: {message}")
        self.path = str(path)
        self.key = key


@dataclass(frozen=True, slots=True)
class BenchmarkConfig:
    name: str
    data: Path | None
    limit: int | None
    scoring: ScoringMode
    reask: int
    options: Mapping[str, Any] = field(default_factory=dict)  # benchmark-specific: language, split, ...
    # The name rows, status, summaries and metrics give this table: `name`, or for a language other than
    # the benchmark's first `name-<language>` (FollowBench Chinese: "followbench-zh"). Unique in a config.
    label: str = ""

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", self.name)


@dataclass(frozen=True, slots=True)
class StopWhen:
    """`[run] stop_when`: stop a model once its headline metrics are known closely enough
    (`halfwidth`: every benchmark's anytime-valid interval at `confidence` is at most this wide on
    each side), or once its rank is settled (`ranking`: the confidence at which each neighbour must be
    separated from it, unless within `tie` of it). `metric`: a headline metric of every benchmark,
    whose per-unit contribution is watched instead of the share of satisfied constraints (checked
    against the benchmarks' catalog when the work is loaded: runner/engine/sweep.py)."""

    halfwidth: float | None = None
    ranking: float | None = None
    tie: float = 0.0
    confidence: float = DEFAULT_STOP_CONFIDENCE
    metric: str | None = None


@dataclass(frozen=True, slots=True)
class RunConfig:
    output_dir: Path
    max_usd: float | None = None  # the config's cap, which the manifest records
    # `ifsweep run --max-usd X`: the cap of this run in place of max_usd (the summary records it);
    # `cap_usd` is the one in force.
    max_usd_flag: float | None = None
    concurrency: int = DEFAULT_CONCURRENCY
    reask: int = 2
    retry_errors: bool = True
    flush_ms: float = 200.0
    progress: ProgressMode = "auto"
    stop_deadline_s: float = 30.0
    coordinator: CoordinatorSettings | None = None  # shared limits and budget (IFSWEEP_COORDINATOR wins)
    coordinator_timeout_s: float | None = None  # None: wait for an unreachable coordinator for ever
    order: OrderMode = "seeded"  # how pairs are walked: runner/engine/order.py
    order_seed: int = 0
    stop_when: StopWhen | None = None

    @property
    def cap_usd(self) -> float | None:
        return self.max_usd if self.max_usd_flag is None else self.max_usd_flag


@dataclass(frozen=True, slots=True)
class SweepConfig:
    path: Path
    run: RunConfig
    benchmarks: tuple[BenchmarkConfig, ...]
    models: tuple[EndpointSpec, ...]
    # The panel, in config order: `[[judges]]` tables, or the one `[judge]` (its shorthand). Every judge
    # judges every pair into a verdict record of its own; the first is the one reports show by default.
    judges: tuple[EndpointSpec, ...]
    raw: Mapping[str, Any]  # the parsed TOML, for the manifest's config hash

    @property
    def judge(self) -> EndpointSpec | None:
        """The first judge (the reports' default), or None without one."""
        return self.judges[0] if self.judges else None


def load_config(path: Path | str, *, check_env: bool = True) -> SweepConfig:
    path = Path(path)
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(path, "(file)", "no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(path, "(file)", f"cannot read: {e}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(path, "(syntax)", f"not valid TOML: {e}") from None
    return parse_config(raw, path, check_env=check_env)


def parse_config(raw: Mapping[str, Any], path: Path, *, check_env: bool = True) -> SweepConfig:
    _no_unknown(path, "", raw, _TOP_KEYS)
    base = path.resolve().parent
    run = _run(path, base, _table(path, "run", raw.get("run", {})))
    benches = _array(path, "benchmarks", raw.get("benchmarks"), required=True)
    models = _array(path, "models", raw.get("models"), required=True)
    bench_cfgs = tuple(_benchmark(path, base, i, t, run.reask) for i, t in enumerate(benches))
    # Rows are keyed by the table's report name and the instance id, so two tables of one name would
    # mix in the metrics. FollowBench's languages have names of their own.
    _once(
        path,
        [b.label for b in bench_cfgs],
        lambda i: f"benchmarks[{i}].name",
        lambda label, first: (
            f"benchmark {label!r} is already listed as benchmarks[{first}]; "
            "run a second configuration (another output_dir) for other options"
        ),
    )
    specs = tuple(_endpoint(path, f"models[{i}]", t, check_env) for i, t in enumerate(models))
    ids = _once(
        path,
        [s.label for s in specs],
        lambda i: f"models[{i}].id",
        lambda label, first: f"duplicate model id {label!r} (also models[{first}]); give each an `id`",
    )
    judges = _judges(path, raw, check_env, ids)
    return SweepConfig(path=path, run=run, benchmarks=bench_cfgs, models=specs, judges=judges, raw=dict(raw))


def _judges(
    path: Path, raw: Mapping[str, Any], check_env: bool, model_ids: Mapping[str, int]
) -> tuple[EndpointSpec, ...]:
    """`[judge]` (one judge, id "judge" unless given) or `[[judges]]` (a panel, each with its `id`)."""
    if "judge" in raw and "judges" in raw:
        raise ConfigError(path, "judges", "give either one [judge] table or [[judges]] tables, not both")
    if "judge" in raw:
        return (
            _endpoint(path, "judge", _table(path, "judge", raw["judge"]), check_env, default_label="judge"),
        )
    if isinstance(raw.get("judges"), dict):
        raise ConfigError(
            path, "judges", "one table: write [[judges]] (one table per judge, each with an id), or [judge]"
        )
    tables = _array(path, "judges", raw.get("judges"), required=False)
    out: list[EndpointSpec] = []
    for i, t in enumerate(tables):
        where = f"judges[{i}]"
        if isinstance(t, dict) and "id" not in t:
            # Verdicts, reports and `--judge` name a judge by its id: it must not follow the model string.
            raise ConfigError(path, f"{where}.id", "missing; give each judge an `id` (reports name it)")
        spec = _endpoint(path, where, t, check_env)
        if spec.label in ("all", "majority"):
            raise ConfigError(path, f"{where}.id", f"{spec.label!r} is reserved for `--judge {spec.label}`")
        out.append(spec)
    _once(
        path,
        [s.label for s in out],
        lambda i: f"judges[{i}].id",
        lambda label, first: f"duplicate judge id {label!r} (also judges[{first}])",
    )
    for i, spec in enumerate(out):
        if spec.label in model_ids:
            # Budgets, spend and the board are kept per label: a judge and a model may not share one.
            raise ConfigError(
                path,
                f"judges[{i}].id" if "judges" in raw else "judge.id",
                f"{spec.label!r} is also a model id (models[{model_ids[spec.label]}]); "
                "give the judge an id of its own",
            )
    return tuple(out)


def _once(
    path: Path, labels: Sequence[str], where: Callable[[int], str], repeated: Callable[[str, int], str]
) -> dict[str, int]:
    """Each label's index, when none is given twice; else a ConfigError at the second one (`where` its
    field, `repeated(label, first index)` the message)."""
    first: dict[str, int] = {}
    for i, label in enumerate(labels):
        if label in first:
            raise ConfigError(path, where(i), repeated(label, first[label]))
        first[label] = i
    return first


def check_output_dir(cfg: SweepConfig) -> None:
    """Refuse, before anything runs, a run directory that cannot be created or written: its nearest
    existing ancestor must be a writable directory."""
    out = cfg.run.output_dir
    probe = out
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        what = f"{probe} is not a directory" if probe != out else "it exists and is not a directory"
        raise ConfigError(cfg.path, "run.output_dir", f"cannot use {out}: {what}")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise ConfigError(cfg.path, "run.output_dir", f"cannot write to {probe} (permission denied)")


# ---------------------------------------------------------------------------------------------- pieces


def _run(path: Path, base: Path, t: Mapping[str, Any]) -> RunConfig:
    _no_unknown(path, "run", t, set(_RUN_KEYS))
    out = t.get("output_dir")
    output_dir = base / _str(path, "run.output_dir", out) if out is not None else base / "runs" / path.stem
    progress = t.get("progress", "auto")
    if progress not in ("auto", "rich", "plain", "off"):
        raise ConfigError(path, "run.progress", f"expected one of auto, rich, plain, off; got {progress!r}")
    return RunConfig(
        output_dir=output_dir,
        max_usd=_opt_pos_float(path, "run.max_usd", t.get("max_usd")),
        concurrency=_opt_pos_int(path, "run.concurrency", t.get("concurrency")) or DEFAULT_CONCURRENCY,
        reask=_nonneg_int(path, "run.reask", t.get("reask", 2)),
        retry_errors=_bool(path, "run.retry_errors", t.get("retry_errors", True)),
        flush_ms=_opt_pos_float(path, "run.flush_ms", t.get("flush_ms")) or 200.0,
        progress=progress,
        stop_deadline_s=_opt_pos_float(path, "run.stop_deadline_s", t.get("stop_deadline_s")) or 30.0,
        coordinator=_coordinator(path, t.get("coordinator")),
        coordinator_timeout_s=_opt_pos_float(
            path, "run.coordinator_timeout_s", t.get("coordinator_timeout_s")
        ),
        order=_order(path, t.get("order", "seeded")),
        order_seed=_nonneg_int(path, "run.order_seed", t.get("order_seed", 0)),
        stop_when=_stop_when(path, t["stop_when"]) if "stop_when" in t else None,
    )


def _order(path: Path, v: Any) -> OrderMode:
    if v == "seeded":
        return "seeded"
    if v == "file":
        return "file"
    raise ConfigError(path, "run.order", f"expected 'seeded' or 'file', got {v!r}")


def _stop_when(path: Path, v: Any) -> StopWhen:
    """`stop_when`: one of halfwidth or ranking, with the numbers each allows."""
    t = _table(path, "run.stop_when", v)
    _no_unknown(path, "run.stop_when", t, _STOP_KEYS)
    if ("halfwidth" in t) == ("ranking" in t):
        raise ConfigError(path, "run.stop_when", "give exactly one of halfwidth = H or ranking = C")
    if "halfwidth" in t:
        halfwidth = _opt_pos_float(path, "run.stop_when.halfwidth", t["halfwidth"])
        if "tie" in t:
            raise ConfigError(path, "run.stop_when.tie", "only with ranking = C")
    else:
        halfwidth = None
        if "confidence" in t:
            raise ConfigError(path, "run.stop_when.confidence", "with ranking, ranking is the confidence")
    ranking = _unit_interval(path, "run.stop_when.ranking", t["ranking"]) if "ranking" in t else None
    default = ranking or DEFAULT_STOP_CONFIDENCE
    confidence = _unit_interval(path, "run.stop_when.confidence", t.get("confidence", default))
    metric = _str(path, "run.stop_when.metric", t["metric"]) if "metric" in t else None
    return StopWhen(
        halfwidth=halfwidth,
        ranking=ranking,
        tie=_nonneg_float(path, "run.stop_when.tie", t.get("tie", 0.0)),
        confidence=confidence,
        metric=metric,
    )


def _unit_interval(path: Path, key: str, v: Any) -> float:
    """A confidence: strictly between 0 and 1."""
    if isinstance(v, bool) or not isinstance(v, int | float) or not 0 < v < 1:
        raise ConfigError(path, key, f"expected a number strictly between 0 and 1, got {v!r}")
    return float(v)


def _coordinator(path: Path, value: Any) -> CoordinatorSettings | None:
    """`run.coordinator`, or the environment variable, which wins so that one config serves runs
    with and without a coordinator (a Slurm or Kubernetes job sets it)."""
    env = os.environ.get(COORDINATOR_ENV, "").strip()
    where, text = (COORDINATOR_ENV, env) if env else ("run.coordinator", value)
    if text is None:
        return None
    try:
        return parse_coordinator(_str(path, where, text))
    except ValueError as e:
        raise ConfigError(path if where == "run.coordinator" else "(environment)", where, str(e)) from None


def _benchmark(path: Path, base: Path, i: int, t: Any, default_reask: int) -> BenchmarkConfig:
    from ifsweep import benchmarks  # the registry is cheap: modules load on first get()

    where = f"benchmarks[{i}]"
    t = _table(path, where, t)
    name = t.get("name")
    if name is None:
        raise ConfigError(path, f"{where}.name", f"missing; one of {', '.join(benchmarks.names())}")
    name = _str(path, f"{where}.name", name)
    if name not in benchmarks.names():
        hint = _closest(name, benchmarks.names())
        raise ConfigError(
            path, f"{where}.name", f"unknown benchmark {name!r}{hint}; known: {', '.join(benchmarks.names())}"
        )
    try:
        bench = benchmarks.get(name)
    except benchmarks.BenchmarkLoadError as e:
        raise ConfigError(path, f"{where}.name", str(e)) from None
    _no_unknown(path, where, t, _BENCH_KEYS | set(bench.options))
    options = {k: v for k, v in t.items() if k not in _BENCH_KEYS}
    try:
        bench.validate_options(options)
    except ValueError as e:
        raise ConfigError(path, where, str(e)) from None
    data = t.get("data")
    data_path = None
    if data is not None:
        data_path = (base / _str(path, f"{where}.data", data)).resolve()
        if not data_path.exists():
            raise ConfigError(path, f"{where}.data", f"{data_path} does not exist")
    scoring = t.get("scoring", "paper")
    if scoring not in ("paper", "reference"):
        raise ConfigError(path, f"{where}.scoring", f"expected 'paper' or 'reference', got {scoring!r}")
    return BenchmarkConfig(
        name=name,
        data=data_path,
        limit=_opt_pos_int(path, f"{where}.limit", t.get("limit")),
        scoring=scoring,
        reask=_nonneg_int(path, f"{where}.reask", t.get("reask", default_reask)),
        options=options,
        label=bench.report_name(data_path, options),
    )


def _endpoint(
    path: Path, where: str, t: Any, check_env: bool, default_label: str | None = None
) -> EndpointSpec:
    t = _table(path, where, t)
    _no_unknown(path, where, t, _ENDPOINT_KEYS)
    model = _model_string(path, where, t)
    label = _str(path, f"{where}.id", t.get("id", default_label or model))
    key_env = _key_env(path, where, t.get("api_key_env"), check_env)
    params = _table(path, f"{where}.params", t.get("params", {}))
    price = _price(path, f"{where}.price", t["price"]) if "price" in t else None
    if "max_tokens" in params:
        _opt_pos_int(path, f"{where}.params.max_tokens", params["max_tokens"])
    return EndpointSpec(
        label=label,
        model=model,
        api_base=_str(path, f"{where}.api_base", t["api_base"]) if "api_base" in t else None,
        api_key_env=key_env,
        rpm=_opt_pos_int(path, f"{where}.rpm", t.get("rpm")),
        tpm=_opt_pos_int(path, f"{where}.tpm", t.get("tpm")),
        max_concurrency=_opt_pos_int(path, f"{where}.max_concurrency", t.get("max_concurrency")),
        max_usd=_opt_pos_float(path, f"{where}.max_usd", t.get("max_usd")),
        context_window=_opt_pos_int(path, f"{where}.context_window", t.get("context_window")),
        params=dict(params),
        price=price,
        force_litellm=_bool(path, f"{where}.use_litellm", t.get("use_litellm", False)),
        timeout_s=_opt_pos_float(path, f"{where}.timeout_s", t.get("timeout_s")) or 120.0,
        cache_dispatch=(
            _bool(path, f"{where}.cache_dispatch", t["cache_dispatch"]) if "cache_dispatch" in t else None
        ),
        batch=_batch(path, f"{where}.batch", t.get("batch", False), model),
        server_id=_str(path, f"{where}.server_id", t["server_id"]) if "server_id" in t else None,
        reasoning=_bool(path, f"{where}.reasoning", t["reasoning"]) if "reasoning" in t else None,
    )


def _model_string(path: Path, where: str, t: Mapping[str, Any]) -> str:
    if "model" not in t:
        raise ConfigError(
            path, f"{where}.model", "missing; any LiteLLM model string, e.g. 'openai/gpt-4o-mini'"
        )
    model = _str(path, f"{where}.model", t["model"])
    if "/" not in model and not model.startswith(("gpt-", "o1", "o3", "o4", "claude", "gemini")):
        # LiteLLM would guess; we would rather the user says which provider.
        raise ConfigError(path, f"{where}.model", f"{model!r} names no provider; write e.g. 'openai/{model}'")
    return model


def _key_env(path: Path, where: str, v: Any, check_env: bool) -> str | None:
    """`api_key_env`: the name of the variable that holds the key, never the key itself."""
    if v is None:
        return None
    key_env = _str(path, f"{where}.api_key_env", v)
    if not key_env.replace("_", "").isalnum():
        raise ConfigError(
            path,
            f"{where}.api_key_env",
            "must be the NAME of an environment variable (letters, digits, _), never the key",
        )
    if check_env and not os.environ.get(key_env):
        raise ConfigError(
            path, f"{where}.api_key_env", f"environment variable {key_env} is not set (or is empty)"
        )
    return key_env


def _price(path: Path, where: str, v: Any) -> Price:
    pt = _table(path, where, v)
    _no_unknown(path, where, pt, _PRICE_KEYS | _CACHE_PRICE_KEYS | _BATCH_PRICE_KEYS)
    for k in _PRICE_KEYS:
        if k not in pt:
            raise ConfigError(path, f"{where}.{k}", "missing (dollars per million tokens)")
    extra = _CACHE_PRICE_KEYS | _BATCH_PRICE_KEYS
    optional = {k: _nonneg_float(path, f"{where}.{k}", pt[k]) for k in extra if k in pt}
    return Price(
        input_per_mtok=_nonneg_float(path, f"{where}.input_per_mtok", pt["input_per_mtok"]),
        output_per_mtok=_nonneg_float(path, f"{where}.output_per_mtok", pt["output_per_mtok"]),
        **optional,
    )


def _batch(path: Path, key: str, v: Any, model: str) -> BatchPolicy | None:
    """`batch = true | false`, or a table of the collector's thresholds (providers/records.BatchPolicy);
    refused for a provider whose Batch API is not tested (providers/batch/choose.py)."""
    if v is False:
        return None
    provider, sep, _ = model.partition("/")
    if not sep or provider not in TESTED_BATCH_PROVIDERS:
        supported = ", ".join(f"{p}/..." for p in TESTED_BATCH_PROVIDERS)
        raise ConfigError(
            path,
            key,
            f"batch mode is not supported for {model!r}: its provider's Batch API is untested here "
            f"(supported: {supported}); leave batch out to send its calls interactively",
        )
    if v is True:
        return BatchPolicy()
    t = _table(path, key, v)
    _no_unknown(path, key, t, _BATCH_KEYS)
    d = BatchPolicy()
    poll_s = _opt_pos_float(path, f"{key}.poll_s", t.get("poll_s")) or d.poll_s
    poll_max_s = _opt_pos_float(path, f"{key}.poll_max_s", t.get("poll_max_s")) or max(d.poll_max_s, poll_s)
    if poll_max_s < poll_s:
        raise ConfigError(path, f"{key}.poll_max_s", f"must be >= poll_s ({poll_s:g}), got {poll_max_s:g}")
    return BatchPolicy(
        max_requests=_opt_pos_int(path, f"{key}.max_requests", t.get("max_requests")) or d.max_requests,
        max_age_s=_opt_pos_float(path, f"{key}.max_age_s", t.get("max_age_s")) or d.max_age_s,
        poll_s=poll_s,
        poll_max_s=poll_max_s,
        max_retries=_nonneg_int(path, f"{key}.max_retries", t.get("max_retries", d.max_retries)),
    )


# ---------------------------------------------------------------------------------------------- checks


def _closest(word: str, choices: Any) -> str:
    match = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def _no_unknown(path: Path, where: str, t: Mapping[str, Any], allowed: set[str] | frozenset[str]) -> None:
    for k in t:
        if k not in allowed:
            key = f"{where}.{k}" if where else k
            raise ConfigError(
                path, key, f"unknown key{_closest(k, sorted(allowed))}; allowed: {', '.join(sorted(allowed))}"
            )


def _table(path: Path, key: str, v: Any) -> Mapping[str, Any]:
    if not isinstance(v, dict):
        raise ConfigError(path, key, f"expected a table, got {type(v).__name__}")
    return v


def _array(path: Path, key: str, v: Any, *, required: bool) -> list[Any]:
    if v is None:
        if required:
            raise ConfigError(path, key, f"missing; add at least one [[{key}]] table")
        return []
    if not isinstance(v, list) or not v:
        raise ConfigError(path, key, f"expected one or more [[{key}]] tables")
    return v


def _str(path: Path, key: str, v: Any) -> str:
    if not isinstance(v, str) or not v:
        raise ConfigError(path, key, f"expected a non-empty string, got {v!r}")
    return v


def _bool(path: Path, key: str, v: Any) -> bool:
    if not isinstance(v, bool):
        raise ConfigError(path, key, f"expected true or false, got {v!r}")
    return v


def _opt_pos_int(path: Path, key: str, v: Any) -> int | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
        raise ConfigError(path, key, f"expected a positive integer, got {v!r}")
    return v


def _nonneg_int(path: Path, key: str, v: Any) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise ConfigError(path, key, f"expected a whole number >= 0, got {v!r}")
    return v


def _opt_pos_float(path: Path, key: str, v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
        raise ConfigError(path, key, f"expected a positive number, got {v!r}")
    return float(v)


def _nonneg_float(path: Path, key: str, v: Any) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        raise ConfigError(path, key, f"expected a number >= 0, got {v!r}")
    return float(v)
