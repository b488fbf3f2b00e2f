"""The seeded stratified order (issue 34, item 1): every prefix of the plan is a stratified sample of
it, `limit` takes the first N sampling units of that order, the benchmarks interleave, and the order
is recorded in the manifest, where changing it on a run with results is refused (exit 2)."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from sweeps import toml_config

from ifsweep.runner.commands.cli import main
from ifsweep.runner.config import ConfigError, parse_config
from ifsweep.runner.engine.order import proportional_merge, seeded_units, units_of
from ifsweep.runner.engine.scheduler import all_pairs
from ifsweep.runner.engine.sweep import load_work
from ifsweep.simulator import SimConfig, SimulatorThread


def config(tmp_path: Path, benches: list[dict[str, Any]], judge: bool = False, **run: Any) -> Any:
    raw: dict[str, Any] = {
        "run": {"output_dir": str(tmp_path / "run"), **run},
        "benchmarks": benches,
        "models": [{"id": "m", "model": "openai/sim-m", "api_base": "http://127.0.0.1:9/v1"}],
    }
    if judge:
        raw["judge"] = {"model": "openai/sim-judge", "api_base": "http://127.0.0.1:9/v1"}
    return parse_config(raw, tmp_path / "s.toml", check_env=False)


@given(st.lists(st.integers(min_value=1, max_value=40), min_size=1, max_size=6), st.integers(0, 2**32))
def test_every_prefix_of_a_merge_holds_each_group_in_proportion(sizes: list[int], seed: int) -> None:
    merged = proportional_merge(sizes, random.Random(seed))
    assert Counter(merged) == dict(enumerate(sizes))
    total = sum(sizes)
    seen = [0] * len(sizes)
    for k, g in enumerate(merged, start=1):
        seen[g] += 1
        for h, n in enumerate(sizes):
            assert abs(seen[h] - k * n / total) <= 1.0 + 1e-9, (k, h, seen, sizes)


def test_a_limited_followbench_samples_every_category_with_whole_groups(
    tmp_path: Path, shared_benchmarks: Path
) -> None:
    fb = {"name": "followbench", "data": str(shared_benchmarks / "FollowBench"), "limit": 12}
    work = load_work(config(tmp_path, [fb]))
    ((_job, instances),) = work.jobs
    groups = Counter(inst.group_id for inst in instances)
    # 12 units of the seeded order: whole groups (every level of each), from every category, each in
    # proportion to its size to within one unit (file order: 12 instances of the first content group).
    assert len(groups) == 12 and set(groups.values()) == {5}
    population = {name: len(ids) for name, ids in work.strata[0].items()}
    drawn = Counter(inst.category for inst in instances if inst.level == 1)
    assert set(drawn) == set(population), (drawn, population)
    total = sum(population.values())
    assert all(abs(drawn[c] - 12 * n / total) <= 1 for c, n in population.items()), (drawn, population)
    assert sum(population.values()) > 12  # the strata are the whole selection's, before the limit


def test_a_limited_cfbench_samples_both_splits_in_proportion(tmp_path: Path, shared_benchmarks: Path) -> None:
    cf = {"name": "cfbench", "data": str(shared_benchmarks / "CFBench"), "limit": 40}
    work = load_work(config(tmp_path, [cf]))
    ((_job, instances),) = work.jobs
    splits = Counter(inst.split for inst in instances)
    population = {name: len(ids) for name, ids in work.strata[0].items()}
    total = sum(population.values())
    for split, n in population.items():
        assert abs(splits[split] - 40 * n / total) <= 1, (splits, population)


def test_the_benchmarks_interleave_and_every_model_walks_the_same_units(
    tmp_path: Path, shared_benchmarks: Path
) -> None:
    cf = {"name": "cfbench", "data": str(shared_benchmarks / "CFBench"), "limit": 30}
    fb = {"name": "followbench", "data": str(shared_benchmarks / "FollowBench"), "limit": 10}
    cfg = config(tmp_path, [fb, cf])
    cfg = type(cfg)(
        path=cfg.path, run=cfg.run, benchmarks=cfg.benchmarks, models=cfg.models * 1, judges=(), raw=cfg.raw
    )
    work = load_work(cfg)
    walked = [(job.cfg.label, inst.group_id) for job, inst in work.walk()]
    first_units = list(dict.fromkeys(walked))[:8]
    # 10 FollowBench units beside 30 CFBench ones: both within the first 8 units, each unit's
    # instances together.
    assert {b for b, _ in first_units} == {"followbench", "cfbench"}
    runs = [walked[0]]
    for pair in walked[1:]:
        if pair != runs[-1]:
            runs.append(pair)
    assert len(runs) == len(set(runs)) == 40
    assert [(job.cfg.label, inst.instance_id) for _, job, inst in all_pairs(work, cfg.models, None)] == [
        (job.cfg.label, inst.instance_id) for job, inst in work.walk()
    ]


def test_the_seed_decides_the_order_and_file_order_keeps_the_data_order(
    tmp_path: Path, shared_benchmarks: Path
) -> None:
    cf = {"name": "cfbench", "data": str(shared_benchmarks / "CFBench"), "limit": 20}

    def ids(**run: Any) -> list[str]:
        return [inst.instance_id for _, inst in load_work(config(tmp_path, [cf], **run)).walk()]

    assert ids(order_seed=3) == ids(order_seed=3)
    assert ids(order_seed=3) != ids(order_seed=4)
    everything = {**cf, "limit": None}
    del everything["limit"]
    in_file = [inst.instance_id for _, inst in load_work(config(tmp_path, [everything], order="file")).walk()]
    assert ids(order="file") == in_file[:20]


def test_units_keep_a_groups_instances_and_the_order_is_a_permutation(shared_benchmarks: Path) -> None:
    from ifsweep import benchmarks

    insts = list(benchmarks.get("followbench").load(shared_benchmarks / "FollowBench", {}))
    units = units_of(insts)
    ordered = seeded_units(units, 0, "followbench")
    assert sorted(u.unit_id for u in ordered) == sorted(u.unit_id for u in units)
    assert all(len({insts[m].group_id for m in u.members}) == 1 for u in units)
    assert all(u.stratum == insts[u.members[0]].category for u in units)  # levels span the group


@pytest.mark.parametrize(
    ("run", "key"),
    [
        ({"order": "random"}, "run.order"),
        ({"order_seed": -1}, "run.order_seed"),
        ({"stop_when": {"halfwidth": 0}}, "run.stop_when.halfwidth"),
        ({"stop_when": {"halfwidth": -0.1}}, "run.stop_when.halfwidth"),
        ({"stop_when": {"ranking": 1.0}}, "run.stop_when.ranking"),
        ({"stop_when": {"ranking": 0}}, "run.stop_when.ranking"),
        ({"stop_when": {"halfwidth": 0.05, "confidence": 1.5}}, "run.stop_when.confidence"),
        ({"stop_when": {"ranking": 0.9, "tie": -1}}, "run.stop_when.tie"),
        ({"stop_when": {"ranking": 0.9, "halfwidth": 0.1}}, "run.stop_when"),
        ({"stop_when": {"rank": 0.9}}, "run.stop_when.rank"),
    ],
)
def test_bad_order_and_stop_when_settings_name_the_field(
    tmp_path: Path, run: dict[str, Any], key: str
) -> None:
    with pytest.raises(ConfigError) as e:
        config(tmp_path, [{"name": "cfbench"}], **run)
    assert e.value.key == key, str(e.value)


def test_an_order_seed_change_on_a_run_with_results_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with SimulatorThread(SimConfig(seed=2)) as sim:
        run_dir, cfg = tmp_path / "run", tmp_path / "s.toml"
        cfg.write_text(toml_config(run_dir, sim.base_url, models=("alpha",), bench=("cfbench",), limit=3))
        assert main(["run", str(cfg)]) == 0
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["order"] == {"kind": "seeded", "seed": 0}
        strata = manifest["benchmarks"]["cfbench"]["strata"]
        assert {name: len(ids) for name, ids in strata.items()} == {"easy": 6, "hard": 6}
        sent = sim.stats.requests
        cfg.write_text(
            toml_config(
                run_dir,
                sim.base_url,
                models=("alpha",),
                bench=("cfbench",),
                limit=3,
                extra_run="order_seed = 7",
            )
        )
        capsys.readouterr()
        assert main(["run", str(cfg)]) == 2
        err = capsys.readouterr().err
        assert "run.order_seed changed from 0 to 7" in err, err
        assert sim.stats.requests == sent  # refused before anything was sent

        # A directory with a manifest but no result yet may take another order.
        fresh = tmp_path / "fresh"
        cfg.write_text(toml_config(fresh, sim.base_url, models=("alpha",), bench=("cfbench",), limit=3))
        assert main(["plan", str(cfg)]) == 0
        out = capsys.readouterr().out
        assert "order: seeded (seed 0)" in out and "cfbench: 3 of 12 units (limit)" in out
        assert "strata: easy 6, hard 6" in out


def test_an_order_change_before_any_result_is_taken(tmp_path: Path) -> None:
    from ifsweep import benchmarks
    from ifsweep.runner.engine.sweep import build_manifest, prepare_run_dir
    from ifsweep.runner.store.manifest import read_manifest, write_manifest

    cf = {"name": "cfbench", "data": str(benchmarks.get("cfbench").fixture_dir())}
    first = config(tmp_path, [cf])
    write_manifest(first.run.output_dir, build_manifest(first, load_work(first)))
    second = config(tmp_path, [cf], order_seed=9)
    prepare_run_dir(second.run.output_dir, second, load_work(second))
    recorded = read_manifest(second.run.output_dir)
    assert recorded is not None and recorded.order == {"kind": "seeded", "seed": 9}


def test_stop_when_names_an_unknown_metric_and_takes_a_known_one(
    tmp_path: Path,
) -> None:
    from ifsweep import benchmarks
    from ifsweep.runner.engine.sweep import check_ready

    cf = {"name": "cfbench", "data": str(benchmarks.get("cfbench").fixture_dir())}
    cfg = config(tmp_path, [cf], stop_when={"halfwidth": 0.05, "metric": "HSR"})
    with pytest.raises(ConfigError) as e:
        check_ready(cfg, load_work(cfg))
    assert e.value.key == "run.stop_when.metric" and "CSR, ISR, PSR" in str(e.value), str(e.value)
    # A headline metric of every benchmark is watched by its per-unit contribution (test_stop_when.py).
    cfg = config(tmp_path, [cf], judge=True, stop_when={"ranking": 0.95, "tie": 0.01, "metric": "CSR"})
    assert cfg.run.stop_when is not None and cfg.run.stop_when.confidence == 0.95
    check_ready(cfg, load_work(cfg))
    taken = config(tmp_path, [cf], judge=True, stop_when={"ranking": 0.95})
    check_ready(taken, load_work(taken))
