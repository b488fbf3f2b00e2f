"""RUN_DIR/manifest.json: what a run's results mean, and whether a new config may resume into it.

Keys already make resume exact (a changed prompt is a new key), but a run directory mixing two
templates, two judges or two data versions would report numbers nobody can interpret. The manifest
records those choices; `compare` refuses a resume that would change them, and allows what only adds
work or capacity (new models or benchmarks, a higher budget, other concurrency and rate limits).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from ifsweep.runner.store.atomic import atomic_write
from ifsweep.runner.store.keys import KEY_SCHEMA
from ifsweep.runner.store.shards import decode_record, parse_line, shard_files

__all__ = [
    "MANIFEST_NAME",
    "MANIFEST_SCHEMA",
    "BenchmarkEntry",
    "Compatibility",
    "EarlierPlan",
    "Manifest",
    "ManifestError",
    "ModelEntry",
    "carry_plans",
    "compare",
    "newest_tables",
    "older_records",
    "planned_instances",
    "read_manifest",
    "relabel_legacy_judge",
    "write_manifest",
]

MANIFEST_NAME = "manifest.json"
# The id a manifest written before judge panels gives its one judge (a `[judge]` table's default id).
LEGACY_JUDGE = "judge"
# 2: result keys carry the endpoint and the instance (runner.store.keys.KEY_SCHEMA); models record their
# endpoint.
MANIFEST_SCHEMA = 2
# What a benchmark's template_version hashes. 1 (a manifest without the field): the prompt texts and a
# hand-kept parser version; 2: the prompt texts alone, each verdict recording the version of the code
# that derived it (benchmarks/versions.py). Versions of two schemes are not compared: a run recorded
# under 1 resumes, and its verdicts are derived again from the stored replies where the code changed.
TEMPLATE_SCHEME = 2


class ManifestError(ValueError):
    """A manifest file that cannot be read; the message names the file and the field."""


@dataclass(frozen=True, slots=True)
class BenchmarkEntry:
    data_hash: str
    template_version: str
    scoring: str
    # Anything else that changes what a verdict means (reask count, language, split, ...).
    settings: Mapping[str, Any] = field(default_factory=dict)
    # The instance ids the newest config selects, in order (after `limit`): what status counts as
    # planned and reports score. None in manifests written before it was kept (and never compared:
    # a lowered `limit` leaves the earlier verdicts valid, only outside the plan).
    instances: tuple[str, ...] | None = None
    template_scheme: int = TEMPLATE_SCHEME
    # The sampling units' ids per stratum (runner/engine/order.py) of everything selected before
    # `limit`: what a partial run's estimates are post-stratified by. None where not kept.
    strata: Mapping[str, tuple[str, ...]] | None = None
    # Where the newest run read the data (the config's `data`, or the verified download): the viewer
    # looks there first, and takes it while its hash is data_hash. None where written before it was kept.
    data_path: str | None = None


@dataclass(frozen=True, slots=True)
class ModelEntry:
    model: str  # the provider model string
    params: Mapping[str, Any] = field(default_factory=dict)  # decoding params that shape the answers
    # Where the answers come from (runner.store.keys.endpoint_identity): provider, api_base, model, path.
    endpoint: Mapping[str, Any] = field(default_factory=dict)
    # What its requests carry besides model and messages (providers/send/params.sent_params: a reasoning
    # model's max_completion_tokens and no sampling parameter), which result keys hash. None in manifests
    # written before it was kept: their keys hashed `params`. Never compared: another request is another
    # key, and a resume sends it.
    sent: Mapping[str, Any] | None = None

    @property
    def keyed_params(self) -> Mapping[str, Any]:
        """The params its result keys hash (runner.store.keys): what was sent."""
        return self.params if self.sent is None else self.sent


@dataclass(frozen=True, slots=True)
class EarlierPlan:
    """The instances an earlier config selected for models the newest config no longer runs on that
    benchmark (a model dropped, a benchmark left out): their verdicts are read against the plan they
    were made for, not the newest one (runner/store/current.py)."""

    models: tuple[str, ...]
    instances: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Manifest:
    ifsweep_version: str
    config_hash: str
    benchmarks: Mapping[str, BenchmarkEntry]
    models: Mapping[str, ModelEntry]  # by config id (label)
    judge: ModelEntry | None  # the first configured judge (what older readers know of the panel)
    budget_usd: float | None = None
    limits: Mapping[str, float] = field(default_factory=dict)  # concurrency, rpm, ... (free to change)
    schema: int = MANIFEST_SCHEMA
    # Every judge that ever judged into the run, by id: one may be added, or left out of the config
    # (its verdicts stay), but never changed under the same id.
    judges: Mapping[str, ModelEntry] = field(default_factory=dict)
    judge_order: tuple[str, ...] = ()  # the configured panel's ids, in config order
    model_order: tuple[str, ...] = ()  # the configured models' ids, in config order (reports list them so)
    # The newest config's benchmark tables, in config order; None in manifests written before it was
    # kept (then every table with `instances` counts as the newest config's).
    benchmark_order: tuple[str, ...] | None = None
    # Per benchmark table, the plans of models an earlier config ran it with and the newest does not.
    earlier_plans: Mapping[str, tuple[EarlierPlan, ...]] = field(default_factory=dict)
    # How the plan is walked: {"kind": "seeded", "seed": N} or {"kind": "file"}. None: written before
    # it was kept (never compared, so such a run resumes).
    order: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if self.judge is not None and not self.judges:  # built the way manifests were before panels
            object.__setattr__(self, "judges", {LEGACY_JUDGE: self.judge})

    @property
    def scoring_modes(self) -> tuple[str, ...]:
        return tuple(sorted({b.scoring for b in self.benchmarks.values()}))

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": self.schema,
            "ifsweep_version": self.ifsweep_version,
            "config_hash": self.config_hash,
            "benchmarks": {
                name: {
                    "data_hash": b.data_hash,
                    "template_version": b.template_version,
                    "template_scheme": b.template_scheme,
                    "scoring": b.scoring,
                    "settings": dict(b.settings),
                    **({} if b.instances is None else {"instances": list(b.instances)}),
                    **({} if b.strata is None else {"strata": {k: list(v) for k, v in b.strata.items()}}),
                    **({} if b.data_path is None else {"data_path": b.data_path}),
                }
                for name, b in sorted(self.benchmarks.items())
            },
            "models": {mid: _model_dict(m) for mid, m in sorted(self.models.items())},
            "judge": None if self.judge is None else _model_dict(self.judge),
            "judges": {jid: _model_dict(m) for jid, m in sorted(self.judges.items())},
            "judge_order": list(self.judge_order),
            "model_order": list(self.model_order),
            **({} if self.benchmark_order is None else {"benchmark_order": list(self.benchmark_order)}),
            "earlier_plans": {
                name: [{"models": list(p.models), "instances": list(p.instances)} for p in plans]
                for name, plans in sorted(self.earlier_plans.items())
            },
            "scoring_modes": list(self.scoring_modes),
            "budget_usd": self.budget_usd,
            "limits": dict(sorted(self.limits.items())),
            **({} if self.order is None else {"order": dict(self.order)}),
        }

    @classmethod
    def from_dict(cls, d: object, source: str = "manifest") -> Manifest:
        r = _Reader(source)
        top = r.table(d, "")
        schema = r.get(top, "", "schema", int)
        if schema < MANIFEST_SCHEMA:
            raise ManifestError(
                f"{source}: this run directory was written by an older ifsweep (manifest schema {schema}). "
                "Its results are stored under keys that left out the endpoint and the instance; this "
                "version would not find them, would pay for every call again and would report each "
                "instance twice. Start a new run (set another run.output_dir); `ifsweep report` and "
                "`ifsweep status` still read this directory as it is."
            )
        if schema != MANIFEST_SCHEMA:
            raise ManifestError(
                f"{source}: field 'schema': this ifsweep reads version {MANIFEST_SCHEMA}, got {schema}; "
                "a newer ifsweep wrote this run directory"
            )
        benches = {
            name: r.benchmark(raw, f"benchmarks.{name}")
            for name, raw in r.table(top.get("benchmarks"), "benchmarks").items()
        }
        models = {
            mid: r.model(raw, f"models.{mid}") for mid, raw in r.table(top.get("models"), "models").items()
        }
        judge_raw = top.get("judge")
        if "judges" in top:
            judges = {
                jid: r.model(raw, f"judges.{jid}")
                for jid, raw in r.table(top.get("judges"), "judges").items()
            }
            order = r.ids(top, "judge_order")
        else:
            # Written before judge panels: one judge, recorded without its id (so no panel is named:
            # readers take the judge its verdicts carry).
            judges = {} if judge_raw is None else {LEGACY_JUDGE: r.model(judge_raw, "judge")}
            order = []
        budget = top.get("budget_usd")
        if budget is not None and (isinstance(budget, bool) or not isinstance(budget, int | float)):
            raise ManifestError(f"{source}: field 'budget_usd': expected a number or null, got {budget!r}")
        limits = r.table(top.get("limits", {}), "limits")
        return cls(
            ifsweep_version=r.get(top, "", "ifsweep_version", str),
            config_hash=r.get(top, "", "config_hash", str),
            benchmarks=benches,
            models=models,
            judge=None if judge_raw is None else r.model(judge_raw, "judge"),
            budget_usd=None if budget is None else float(budget),
            limits=limits,
            schema=schema,
            judges=judges,
            judge_order=tuple(order),
            model_order=tuple(r.ids(top, "model_order")),  # absent where written before it was kept
            benchmark_order=tuple(r.ids(top, "benchmark_order")) if "benchmark_order" in top else None,
            earlier_plans=r.earlier(top.get("earlier_plans", {})),
            order=r.table(top["order"], "order") if "order" in top else None,
        )


def _model_dict(m: ModelEntry) -> dict[str, Any]:
    sent = {} if m.sent is None else {"sent": dict(m.sent)}
    return {"model": m.model, "params": dict(m.params), "endpoint": dict(m.endpoint), **sent}


def planned_instances(run_dir: Path) -> dict[str, frozenset[str]]:
    """Per benchmark table, the instance ids the newest config selected; only tables whose manifest
    entry says (none for a run without a manifest, or one written before they were kept)."""
    try:
        manifest = read_manifest(run_dir)
    except ManifestError:
        return {}
    if manifest is None:
        return {}
    return {
        name: frozenset(b.instances) for name, b in manifest.benchmarks.items() if b.instances is not None
    }


@dataclass(frozen=True, slots=True)
class _Reader:
    source: str

    def table(self, v: object, where: str) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise ManifestError(f"{self.source}: field '{where or '(top)'}': expected an object, got {v!r}")
        return v

    def benchmark(self, raw: object, where: str) -> BenchmarkEntry:
        b = self.table(raw, where)
        instances = b.get("instances")
        if instances is not None and (
            not isinstance(instances, list) or not all(isinstance(i, str) for i in instances)
        ):
            raise ManifestError(f"{self.source}: field '{where}.instances': expected a list of instance ids")
        return BenchmarkEntry(
            data_hash=self.get(b, where, "data_hash", str),
            template_version=self.get(b, where, "template_version", str),
            scoring=self.get(b, where, "scoring", str),
            settings=self.table(b.get("settings", {}), f"{where}.settings"),
            instances=None if instances is None else tuple(instances),
            template_scheme=self.get(b, where, "template_scheme", int) if "template_scheme" in b else 1,
            strata=self.strata(b.get("strata"), f"{where}.strata"),
            data_path=self.get(b, where, "data_path", str) if "data_path" in b else None,
        )

    def strata(self, v: object, where: str) -> dict[str, tuple[str, ...]] | None:
        if v is None:
            return None
        t = self.table(v, where)
        for name, ids in t.items():
            if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
                raise ManifestError(f"{self.source}: field '{where}.{name}': expected a list of unit ids")
        return {name: tuple(ids) for name, ids in t.items()}

    def get(self, d: Mapping[str, Any], where: str, name: str, typ: type) -> Any:
        v = d.get(name)
        if not isinstance(v, typ) or isinstance(v, bool) != (typ is bool):
            path = f"{where}.{name}" if where else name
            raise ManifestError(f"{self.source}: field '{path}': expected {typ.__name__}, got {v!r}")
        return v

    def ids(self, d: Mapping[str, Any], name: str, where: str = "") -> list[str]:
        """A list of config ids (empty when the field is absent)."""
        v = d.get(name, [])
        if not isinstance(v, list) or not all(isinstance(i, str) for i in v):
            path = f"{where}.{name}" if where else name
            raise ManifestError(f"{self.source}: field '{path}': expected a list of ids, got {v!r}")
        return v

    def earlier(self, raw: object) -> dict[str, tuple[EarlierPlan, ...]]:
        out: dict[str, tuple[EarlierPlan, ...]] = {}
        for name, plans in self.table(raw, "earlier_plans").items():
            where = f"earlier_plans.{name}"
            if not isinstance(plans, list):
                raise ManifestError(f"{self.source}: field '{where}': expected a list of plans")
            out[name] = tuple(
                EarlierPlan(
                    tuple(self.ids(self.table(p, f"{where}[{i}]"), "models", f"{where}[{i}]")),
                    tuple(self.ids(p, "instances", f"{where}[{i}]")),
                )
                for i, p in enumerate(plans)
            )
        return out

    def model(self, raw: object, where: str) -> ModelEntry:
        m = self.table(raw, where)
        return ModelEntry(
            model=self.get(m, where, "model", str),
            params=self.table(m.get("params", {}), where),
            endpoint=self.table(m.get("endpoint", {}), f"{where}.endpoint"),
            sent=self.table(m["sent"], f"{where}.sent") if "sent" in m else None,
        )


@dataclass(frozen=True, slots=True)
class Compatibility:
    ok: bool
    problems: list[str]

    def message(self) -> str:
        if self.ok:
            return "compatible"
        lines = "\n".join(f"  - {p}" for p in self.problems)
        return (
            "this config cannot resume into the existing run:\n"
            f"{lines}\n"
            "Results under different settings cannot be mixed in one run. Start a new run instead (set a new "
            "run.output_dir), or restore the old settings to resume this one."
        )


def compare(old: Manifest, new: Manifest, *, has_results: bool = True) -> Compatibility:
    """May a run recorded as `old` be resumed with `new`? Lists every incompatible change.
    `has_results`: whether the run directory holds results yet (before any, the order may change)."""
    problems: list[str] = []
    if has_results and old.order is not None and new.order is not None and old.order != new.order:
        # What is done is a sample of the old order's prefix: walking on in another order would leave
        # the done units a sample of neither, and the partial-run estimates would be wrong.
        problems.append(_order_change(old.order, new.order))
    for name, ob in sorted(old.benchmarks.items()):
        nb = new.benchmarks.get(name)
        if nb is None:
            continue  # a benchmark left out is just not run this time
        if nb.template_version != ob.template_version and nb.template_scheme == ob.template_scheme:
            problems.append(
                f"benchmark '{name}': template version changed from {ob.template_version!r} "
                f"to {nb.template_version!r}"
            )
        if nb.data_hash != ob.data_hash:
            problems.append(
                f"benchmark '{name}': data changed (hash {ob.data_hash[:12]} -> {nb.data_hash[:12]})"
            )
        if nb.scoring != ob.scoring:
            problems.append(f"benchmark '{name}': scoring changed from {ob.scoring!r} to {nb.scoring!r}")
        if _canon(nb.settings) != _canon(ob.settings):
            problems.append(f"benchmark '{name}': settings changed: {_diff(ob.settings, nb.settings)}")
    for mid, om in sorted(old.models.items()):
        if (nm := new.models.get(mid)) is not None:
            problems += _entry_changes(f"model '{mid}'", om, nm)
    # Judges: one may join or leave the panel (each has verdicts of its own, apart in every report);
    # an id that comes back must mean the same judge, or its old and new verdicts would mix.
    for jid, oj in sorted(old.judges.items()):
        if (nj := new.judges.get(jid)) is not None:
            problems += _entry_changes(f"judge '{jid}'", oj, nj, "; give the new judge another id")
    if old.budget_usd is not None and (new.budget_usd is None or new.budget_usd < old.budget_usd):
        # A budget only grows: a lower cap might already be spent, and no cap would lift the guard.
        problems.append(
            f"budget lowered or removed ({old.budget_usd} -> {new.budget_usd}); a run's budget can only grow"
        )
    return Compatibility(ok=not problems, problems=problems)


def _order_change(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    """The order's change, named by the field a user sets."""
    if old.get("kind") == new.get("kind"):
        what = f"run.order_seed changed from {old.get('seed')!r} to {new.get('seed')!r}"
    else:
        what = f"run.order changed from {old.get('kind')!r} to {new.get('kind')!r}"
    return f"{what}: the results so far are a sample of the old order, and estimates need one order"


def _entry_changes(who: str, old: ModelEntry, new: ModelEntry, hint: str = "") -> list[str]:
    """What differs between a model's (or judge's) recorded entry and its new one, for `compare`."""
    problems: list[str] = []
    if new.model != old.model:
        problems.append(f"{who}: provider model changed from {old.model!r} to {new.model!r}{hint}")
    elif _canon(new.endpoint) != _canon(old.endpoint):
        problems.append(f"{who}: endpoint changed: {_diff(old.endpoint, new.endpoint)}")
    if _canon(new.params) != _canon(old.params):
        problems.append(f"{who}: params changed: {_diff(old.params, new.params)}")
    return problems


def newest_tables(m: Manifest) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The benchmark tables and models the newest config runs (every model on every table). A manifest
    written before `benchmark_order` was kept: every table that records its instances, and before
    `model_order`: every model it names."""
    benches = m.benchmark_order
    if benches is None:
        benches = tuple(name for name, b in m.benchmarks.items() if b.instances is not None)
    return benches, m.model_order or tuple(m.models)


def carry_plans(old: Manifest, new: Manifest) -> Manifest:
    """`new` with the plans of (benchmark, model) pairs `old` ran and `new` does not (a model dropped,
    a table left out) kept in `earlier_plans`, so their verdicts stay read against their own plan."""
    new_benches, new_models = newest_tables(new)
    now = {(b, m) for b in new_benches for m in new_models}
    kept: dict[tuple[str, tuple[str, ...]], list[str]] = {}
    for bench, plans in old.earlier_plans.items():
        for p in plans:
            for model in p.models:
                if (bench, model) not in now:
                    kept.setdefault((bench, p.instances), []).append(model)
    old_benches, old_models = newest_tables(old)
    for bench in old_benches:
        entry = old.benchmarks.get(bench)
        if entry is None or entry.instances is None:
            continue
        for model in old_models:
            if (bench, model) not in now:
                kept.setdefault((bench, entry.instances), []).append(model)
    earlier: dict[str, list[EarlierPlan]] = {}
    for (bench, instances), models in kept.items():
        earlier.setdefault(bench, []).append(EarlierPlan(tuple(dict.fromkeys(models)), instances))
    return dataclasses.replace(new, earlier_plans={b: tuple(p) for b, p in earlier.items()})


def relabel_legacy_judge(old: Manifest, new: Manifest) -> Manifest:
    """`old` with its one judge under the id `new` gives the same judge, when `old` was written before
    judge panels (its judge is filed under LEGACY_JUDGE, not its config id): so a resumed run keeps one
    entry per judge, not a second one under a name the config never used."""
    if (
        old.judge_order
        or set(old.judges) != {LEGACY_JUDGE}
        or LEGACY_JUDGE in new.judges
        or old.judge is None
    ):
        return old
    same = [jid for jid, m in new.judges.items() if _same_judge(m, old.judge)]
    if not same:
        return old
    judges = {k: v for k, v in old.judges.items() if k != LEGACY_JUDGE} | {same[0]: old.judge}
    return dataclasses.replace(old, judges=judges, judge_order=(same[0],))


def _same_judge(a: ModelEntry, b: ModelEntry) -> bool:
    return (
        a.model == b.model
        and _canon(a.endpoint) == _canon(b.endpoint)
        and _canon(a.params) == _canon(b.params)
    )


def _canon(v: Mapping[str, Any]) -> bytes:
    return orjson.dumps(dict(v), option=orjson.OPT_SORT_KEYS)


def _diff(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    parts = []
    for k in sorted(set(old) | set(new)):
        if k not in new:
            parts.append(f"{k} removed (was {old[k]!r})")
        elif k not in old:
            parts.append(f"{k} added ({new[k]!r})")
        elif _canon({"v": old[k]}) != _canon({"v": new[k]}):
            parts.append(f"{k} {old[k]!r} -> {new[k]!r}")
    return ", ".join(parts)


def write_manifest(run_dir: Path, manifest: Manifest) -> Path:
    """Replace RUN_DIR/manifest.json atomically: a crash leaves the old file or the new, never a mix;
    a full disk raises DiskFullError and leaves no temporary file."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / MANIFEST_NAME
    atomic_write(path, orjson.dumps(manifest.to_dict(), option=orjson.OPT_INDENT_2) + b"\n")
    return path


def read_manifest(run_dir: Path) -> Manifest | None:
    """The run's manifest, or None when the directory has none yet."""
    path = Path(run_dir) / MANIFEST_NAME
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        raw = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        raise ManifestError(f"{path}: not valid JSON: {e}") from None
    return Manifest.from_dict(raw, str(path))


def older_records(run_dir: Path) -> str | None:
    """Why RUN_DIR cannot take new results, when a shard holds records of an older key scheme (an
    import directory has no manifest to say so); None when every shard starts with a current record.
    Reads one line per shard: a writer that resumed appends after its own older lines."""
    for _, _, path in shard_files(run_dir):
        with open(path, "rb") as f:
            line = f.readline().rstrip(b"\n")
        if type(parse_line(line)) is not tuple:
            continue  # a damaged first line: the store reports it when opened
        version = decode_record(line).get("v")
        if not isinstance(version, int) or version < KEY_SCHEMA:
            return (
                f"{path} holds results of an older ifsweep (record version {version}), stored under keys "
                "that left out the endpoint and the instance: new results would not find them and "
                "reports would count each instance twice. Write to a new directory instead."
            )
    return None
