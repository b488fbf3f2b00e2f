"""The one reading of a run (runner/store/current.py): plans per (benchmark, model), done and failed
along them, the judges and what became of dropped ones, complete or partial. Pure over a manifest and
current verdicts here; the readers' agreement over real runs is tests/test_one_reading.py's."""

from __future__ import annotations

from pathlib import Path

from ifsweep.runner.store.current import Verdict, plans_of, reading_of
from ifsweep.runner.store.manifest import BenchmarkEntry, Manifest, ModelEntry, carry_plans
from ifsweep.runner.store.shards import DamageReport


def manifest(
    models: tuple[str, ...],
    instances: dict[str, tuple[str, ...]],
    judges: tuple[str, ...] = ("j1",),
    known: tuple[str, ...] = (),
) -> Manifest:
    entry = ModelEntry(model="openai/x")
    return Manifest(
        ifsweep_version="t",
        config_hash="h",
        benchmarks={
            b: BenchmarkEntry(data_hash="d", template_version="t", scoring="s", instances=ids)
            for b, ids in instances.items()
        },
        models={m: entry for m in models},
        judge=None,
        judges={j: entry for j in (*judges, *known)},
        judge_order=judges,
        model_order=models,
        benchmark_order=tuple(instances),
    )


def ok(bench: str, model: str, iid: str, judge: str | None = "j1", failed: bool = False) -> Verdict:
    return (bench, model, judge, iid, failed)


def test_an_import_keeps_its_own_plan_beside_a_configured_model() -> None:
    m = manifest(("alpha",), {"cfbench": ("1", "2")})
    found = [ok("cfbench", "alpha", "1"), ok("cfbench", "alpha", "2")]
    found += [ok("cfbench", "moonshot", str(i), "imported-judge") for i in range(20)]
    r = reading_of(Path("run"), m, found)
    imp = r.of("cfbench", "moonshot")
    assert imp is not None and (imp.planned, imp.done, imp.beyond, imp.origin) == (20, 20, 0, "found")
    assert r.selects("cfbench", "moonshot", "19") and not r.selects("cfbench", "alpha", "19")
    assert r.complete
    assert [(j.judge, j.role) for j in r.judges] == [("j1", "panel"), ("imported-judge", "unlisted")]


def test_a_lowered_limit_leaves_the_rest_beyond_the_plan() -> None:
    m = manifest(("alpha",), {"fb": ("1", "2")})
    r = reading_of(Path("run"), m, [ok("fb", "alpha", str(i)) for i in range(1, 6)])
    p = r.of("fb", "alpha")
    assert p is not None and (p.planned, p.done, p.beyond) == (2, 2, 3) and r.complete


def test_a_partial_run_is_not_complete_and_says_how_far() -> None:
    m = manifest(("alpha", "beta"), {"fb": ("1", "2", "3", "4")})
    r = reading_of(Path("run"), m, [ok("fb", "alpha", "1"), ok("fb", "beta", "1"), ok("fb", "beta", "2")])
    assert not r.complete
    assert [(p.model, p.done, p.planned) for p in r.progress] == [("alpha", 1, 4), ("beta", 2, 4)]


def test_a_dropped_judge_in_error_does_not_hold_the_run_back() -> None:
    m = manifest(("alpha",), {"fb": ("1",)}, judges=("j1",), known=("j2",))
    r = reading_of(Path("run"), m, [ok("fb", "alpha", "1"), ok("fb", "alpha", "1", "j2", failed=True)])
    assert r.complete
    assert not r.needs("fb", "alpha", "j2") and r.needs("fb", "alpha", "j1")
    assert [(j.judge, j.role, j.failed) for j in r.judges] == [("j1", "panel", 0), ("j2", "dropped", 1)]


def test_an_added_judge_is_waited_for() -> None:
    m = manifest(("alpha",), {"fb": ("1", "2")}, judges=("j1", "j2"))
    r = reading_of(
        Path("run"), m, [ok("fb", "alpha", "1"), ok("fb", "alpha", "2"), ok("fb", "alpha", "1", "j2")]
    )
    p = r.of("fb", "alpha")
    assert p is not None and (p.done, p.planned) == (1, 2) and not r.complete


def test_an_error_verdict_fails_the_instance() -> None:
    m = manifest(("alpha",), {"fb": ("1", "2")})
    r = reading_of(Path("run"), m, [ok("fb", "alpha", "1"), ok("fb", "alpha", "2", failed=True)])
    p = r.of("fb", "alpha")
    assert p is not None and (p.done, p.failed) == (1, 1) and not r.complete


def test_a_damaged_line_makes_the_run_incomplete() -> None:
    m = manifest(("alpha",), {"fb": ("1",)})
    torn = DamageReport(Path("shards/main.jsonl"), 3, "torn")
    assert not reading_of(Path("run"), m, [ok("fb", "alpha", "1")], damaged=[torn]).complete


def test_a_dropped_model_keeps_the_plan_it_ran_under() -> None:
    first = manifest(("alpha", "beta"), {"fb": ("1", "2", "3")})
    second = carry_plans(first, manifest(("alpha",), {"fb": ("1",)}))
    plans = plans_of(second)
    assert plans[("fb", "alpha")].instances == {"1"} and plans[("fb", "alpha")].origin == "config"
    assert plans[("fb", "beta")].instances == {"1", "2", "3"} and plans[("fb", "beta")].origin == "earlier"
    # It survives a further change, and a model that comes back takes the newest plan.
    third = carry_plans(second, manifest(("alpha",), {"fb": ("1", "2")}))
    assert plans_of(third)[("fb", "beta")].instances == {"1", "2", "3"}
    back = carry_plans(third, manifest(("alpha", "beta"), {"fb": ("1",)}))
    assert plans_of(back)[("fb", "beta")].origin == "config" and not back.earlier_plans


def test_the_plans_survive_the_manifest_file() -> None:
    m = carry_plans(manifest(("a", "b"), {"fb": ("1", "2")}), manifest(("a",), {"fb": ("1",)}))
    again = Manifest.from_dict(m.to_dict())
    assert plans_of(again) == plans_of(m)
    assert again.benchmark_order == ("fb",)


def test_no_manifest_keeps_every_verdict() -> None:
    r = reading_of(Path("run"), None, [ok("fb", "x", "1", None), ok("fb", "x", "2", None, failed=True)])
    p = r.of("fb", "x")
    assert p is not None and (p.planned, p.done, p.failed) == (2, 1, 1)
