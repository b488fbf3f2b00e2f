"""RUN_DIR/manifest.json: atomic replace, round trip, and which config changes may resume a run."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import orjson
import pytest

from ifsweep.runner.store.manifest import (
    BenchmarkEntry,
    Manifest,
    ManifestError,
    ModelEntry,
    compare,
    read_manifest,
    relabel_legacy_judge,
    write_manifest,
)


def manifest(**changes: object) -> Manifest:
    base = Manifest(
        ifsweep_version="0.1.0",
        config_hash="c" * 64,
        benchmarks={
            "followbench": BenchmarkEntry("d1" * 16, "fb-v1", "paper", {"reask": 2}),
            "infobench": BenchmarkEntry("d2" * 16, "ib-v1", "reference"),
        },
        models={
            "small": ModelEntry("openai/gpt-4o-mini", {"temperature": 0.0, "max_tokens": 512}),
            "big": ModelEntry("openai/gpt-4o", {"temperature": 0.0}),
        },
        judge=ModelEntry("openai/gpt-4o", {"temperature": 0.0}),
        budget_usd=10.0,
        limits={"concurrency": 64},
    )
    if "judge" in changes and "judges" not in changes:  # the one judge, under the id [judge] gives it
        judge = changes["judge"]
        changes |= {"judges": {} if judge is None else {"judge": judge}, "judge_order": ("judge",)}
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def test_write_read_round_trip_and_atomic_replace(tmp_path: Path) -> None:
    assert read_manifest(tmp_path) is None
    m = manifest()
    path = write_manifest(tmp_path, m)
    assert path == tmp_path / "manifest.json"
    back = read_manifest(tmp_path)
    assert back == m
    assert back is not None and back.scoring_modes == ("paper", "reference")
    raw = orjson.loads(path.read_bytes())
    assert raw["schema"] == 2 and raw["judge"] == {
        "model": "openai/gpt-4o",
        "params": {"temperature": 0.0},
        "endpoint": {},
    }
    inode = os.stat(path).st_ino
    m2 = manifest(budget_usd=20.0)
    write_manifest(tmp_path, m2)
    assert read_manifest(tmp_path) == m2
    assert os.stat(path).st_ino != inode  # replaced by rename, never rewritten in place
    assert sorted(p.name for p in tmp_path.iterdir()) == ["manifest.json"]  # no temporary left


def test_compatible_changes() -> None:
    old = manifest()
    more = manifest(
        models={**old.models, "new": ModelEntry("openai/o3")},
        benchmarks={**old.benchmarks, "cfbench": BenchmarkEntry("d3", "cf-v1", "paper")},
        budget_usd=50.0,
        limits={"concurrency": 256, "rpm": 1000},
        config_hash="other",
    )
    result = compare(old, more)
    assert result.ok and result.problems == [] and result.message() == "compatible"
    fewer = manifest(
        models={"small": old.models["small"]}, benchmarks={"infobench": old.benchmarks["infobench"]}
    )
    assert compare(old, fewer).ok


def test_incompatible_changes_each_named() -> None:
    old = manifest()
    fb = old.benchmarks["followbench"]
    new = manifest(
        benchmarks={
            "followbench": dataclasses.replace(fb, template_version="fb-v2", settings={"reask": 3}),
            "infobench": dataclasses.replace(
                old.benchmarks["infobench"], data_hash="ff" * 16, scoring="paper"
            ),
        },
        models={
            **old.models,
            "small": ModelEntry("openai/gpt-4o-mini", {"temperature": 0.7, "max_tokens": 512}),
        },
        judge=ModelEntry("anthropic/claude-sonnet-4-5"),
        budget_usd=5.0,
    )
    result = compare(old, new)
    assert not result.ok
    text = "\n".join(result.problems)
    assert "benchmark 'followbench': template version changed from 'fb-v1' to 'fb-v2'" in text
    assert "benchmark 'followbench': settings changed: reask 2 -> 3" in text
    assert "benchmark 'infobench': data changed" in text
    assert "benchmark 'infobench': scoring changed from 'reference' to 'paper'" in text
    assert "model 'small': params changed: temperature 0.0 -> 0.7" in text
    assert (
        "judge 'judge': provider model changed from 'openai/gpt-4o' to 'anthropic/claude-sonnet-4-5'" in text
    )
    assert "judge 'judge': params changed: temperature removed (was 0.0)" in text
    assert "budget lowered" in text
    assert len(result.problems) == 8
    assert "new run" in result.message() and "output_dir" in result.message()
    # A judge may leave the panel (its verdicts stay, apart) or join it: neither mixes anything.
    assert compare(old, manifest(judge=None)).ok
    added = manifest(judges={"judge": old.judges["judge"], "cheap": ModelEntry("openai/gpt-4o-mini")})
    assert compare(old, added).ok


def test_bad_manifest_files_name_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text("{not json")
    with pytest.raises(ManifestError, match=r"manifest\.json: not valid JSON"):
        read_manifest(tmp_path)
    good = manifest().to_dict()
    for mutate, field in [
        (lambda d: d.update(schema=99), "schema"),
        (
            lambda d: d["benchmarks"]["followbench"].update(template_version=3),
            "benchmarks.followbench.template_version",
        ),
        (lambda d: d["models"].update(small="gpt"), "models.small"),
        (lambda d: d.update(budget_usd="lots"), "budget_usd"),
    ]:
        d = orjson.loads(orjson.dumps(good))
        mutate(d)
        path.write_bytes(orjson.dumps(d))
        with pytest.raises(ManifestError, match=re.escape(f"manifest.json: field '{field}'")):
            read_manifest(tmp_path)


def _endpoint(base: str) -> dict[str, str]:
    return {"provider": "hosted_vllm", "api_base": base, "model": "ckpt", "path": "fast"}


def test_a_changed_endpoint_is_refused() -> None:
    # The same model string served elsewhere gives other answers: resuming would give one model id two
    # generations, hence two verdicts, for each instance.
    old = manifest(models={"m": ModelEntry("hosted_vllm/ckpt", {}, _endpoint("http://a:8000/v1"))})
    new = manifest(models={"m": ModelEntry("hosted_vllm/ckpt", {}, _endpoint("http://b:8000/v1"))})
    problems = compare(old, new).problems
    assert problems == ["model 'm': endpoint changed: api_base 'http://a:8000/v1' -> 'http://b:8000/v1'"]
    judge_old = manifest(judge=ModelEntry("hosted_vllm/ckpt", {}, _endpoint("http://a:8000/v1")))
    judge_new = manifest(judge=ModelEntry("hosted_vllm/ckpt", {}, _endpoint("http://b:8000/v1")))
    assert compare(judge_old, judge_new).problems == [
        "judge 'judge': endpoint changed: api_base 'http://a:8000/v1' -> 'http://b:8000/v1'"
    ]


def test_a_judge_and_a_model_list_every_change_alike() -> None:
    # Endpoint and params both changed: compare lists both, for a judge as for a model.
    before = ModelEntry("hosted_vllm/ckpt", {"temperature": 0.0}, _endpoint("http://a:8000/v1"))
    after = ModelEntry("hosted_vllm/ckpt", {"temperature": 0.7}, _endpoint("http://b:8000/v1"))
    for who, old, new in (
        ("model 'm'", manifest(models={"m": before}), manifest(models={"m": after})),
        ("judge 'judge'", manifest(judge=before), manifest(judge=after)),
    ):
        assert compare(old, new).problems == [
            f"{who}: endpoint changed: api_base 'http://a:8000/v1' -> 'http://b:8000/v1'",
            f"{who}: params changed: temperature 0.0 -> 0.7",
        ]


def test_an_older_schema_is_refused_with_the_reason_and_the_way_out(tmp_path: Path) -> None:
    d = manifest().to_dict()
    d["schema"] = 1
    (tmp_path / "manifest.json").write_bytes(orjson.dumps(d))
    with pytest.raises(ManifestError) as info:
        read_manifest(tmp_path)
    text = str(info.value)
    assert "written by an older ifsweep (manifest schema 1)" in text
    assert "pay for every call again" in text and "another run.output_dir" in text


def test_a_manifest_from_before_judge_panels_names_its_judge_by_the_config_id(tmp_path: Path) -> None:
    old = manifest()
    raw = old.to_dict()
    del raw["judges"], raw["judge_order"]  # as written before panels: one judge, no id
    legacy = Manifest.from_dict(raw)
    assert legacy.judges == {"judge": old.judge} and legacy.judge_order == ()  # no panel named
    assert old.judge is not None
    new = manifest(judges={"big-judge": old.judge}, judge_order=("big-judge",))
    renamed = relabel_legacy_judge(legacy, new)
    assert renamed.judges == {"big-judge": old.judge} and compare(renamed, new).ok
    other = manifest(judges={"big-judge": ModelEntry("openai/o3")}, judge_order=("big-judge",))
    assert relabel_legacy_judge(legacy, other) is legacy  # another judge: the old one keeps its entry
