"""What a stored result is keyed by (runner.store.keys): the endpoint that answered, and for verdicts the
instance. Real sweeps against two simulators on loopback, real run directories."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from sweeps import stored_records

from ifsweep import benchmarks
from ifsweep.providers.records import EndpointSpec
from ifsweep.runner.commands.cli import main
from ifsweep.runner.config import BenchmarkConfig
from ifsweep.runner.engine.pipeline import BenchJob, Pipeline
from ifsweep.runner.store import keys
from ifsweep.runner.store.shards import RunStore
from ifsweep.runner.store.verify import IncompleteVerdicts, Planned, check_verdicts, planned
from ifsweep.runner.watch.outcomes import Counters
from ifsweep.runner.watch.status import status_table
from ifsweep.simulator import SimConfig, SimulatorThread


@pytest.fixture
def sims() -> Iterator[tuple[SimulatorThread, SimulatorThread]]:
    with SimulatorThread(SimConfig(seed=5)) as a, SimulatorThread(SimConfig(seed=5)) as b:
        yield a, b


def _model(mid: str, model: str, base: str) -> str:
    return "\n".join(
        [
            "[[models]]",
            f'id = "{mid}"',
            f'model = "{model}"',
            f'api_base = "{base}"',
            "params = { temperature = 0, max_tokens = 64 }",
            "",
        ]
    )


def _config(out: Path, bench: str, data: Path, models: list[str], judge_base: str, limit: int = 3) -> str:
    head = ["[run]", f"output_dir = {json.dumps(str(out))}", 'progress = "off"', "reask = 0", ""]
    head += ["[[benchmarks]]", f'name = "{bench}"', f"data = {json.dumps(str(data))}", f"limit = {limit}", ""]
    judge = ["[judge]", 'id = "judge"', 'model = "openai/sim-judge"', f'api_base = "{judge_base}"', ""]
    return "\n".join([*head, *models, *judge])


def _fixture(name: str) -> Path:
    return benchmarks.get(name).fixture_dir()


# ------------------------------------------------------------------------------------------- endpoints


def test_one_model_string_on_two_servers_is_two_models(
    tmp_path: Path, sims: tuple[SimulatorThread, SimulatorThread]
) -> None:
    """Two checkpoints served under one name by two servers: the second, added to the run later, is asked
    for its own answers instead of being given the first server's."""
    a, b = sims
    cfg = tmp_path / "sweep.toml"
    first = _model("ckpt-a", "openai/sim-ckpt", a.base_url)
    cfg.write_text(_config(tmp_path / "run", "cfbench", _fixture("cfbench"), [first], a.base_url))
    assert main(["run", str(cfg)]) == 0
    assert a.stats.by_model["sim-ckpt"] == 3
    second = _model("ckpt-b", "openai/sim-ckpt", b.base_url)
    cfg.write_text(_config(tmp_path / "run", "cfbench", _fixture("cfbench"), [first, second], a.base_url))
    assert main(["run", str(cfg)]) == 0
    assert b.stats.by_model["sim-ckpt"] == 3, "the second server was never asked"
    assert a.stats.by_model["sim-ckpt"] == 3
    gens = stored_records(tmp_path / "run", {"generation"})
    assert Counter(g["model"] for g in gens) == {"ckpt-a": 3, "ckpt-b": 3}


def test_two_ids_on_one_endpoint_share_their_answers(
    tmp_path: Path, sims: tuple[SimulatorThread, SimulatorThread]
) -> None:
    a, _ = sims
    cfg = tmp_path / "sweep.toml"
    models = [_model("first", "openai/sim-same", a.base_url), _model("second", "openai/sim-same", a.base_url)]
    cfg.write_text(_config(tmp_path / "run", "cfbench", _fixture("cfbench"), models, a.base_url))
    assert main(["run", str(cfg)]) == 0
    assert a.stats.by_model["sim-same"] == 3  # one answer per instance, read by both ids
    verdicts = stored_records(tmp_path / "run", {"verdict"})
    assert Counter(v["model"] for v in verdicts) == {"first": 3, "second": 3}


def test_a_judge_on_another_server_is_asked_again(
    tmp_path: Path, sims: tuple[SimulatorThread, SimulatorThread]
) -> None:
    """Results copied into a new run directory are reused (docs/resume.md), but not a judge reply that
    came from another server answering to the same model name."""
    a, b = sims
    first, second = tmp_path / "first", tmp_path / "second"
    models = [_model("m", "openai/sim-m", a.base_url)]
    cfg1, cfg2 = tmp_path / "one.toml", tmp_path / "two.toml"
    cfg1.write_text(_config(first, "cfbench", _fixture("cfbench"), models, a.base_url))
    cfg2.write_text(_config(second, "cfbench", _fixture("cfbench"), models, b.base_url))
    assert main(["run", str(cfg1)]) == 0
    assert a.stats.by_model == {"sim-m": 3, "sim-judge": 3}
    second.mkdir()
    shutil.copytree(first / "shards", second / "shards")
    assert main(["run", str(cfg2)]) == 0
    assert a.stats.by_model == {"sim-m": 3, "sim-judge": 3}  # the answers were reused
    assert b.stats.by_model == {"sim-judge": 3}


def test_identity_leaves_out_the_id_and_the_key_variable() -> None:
    one = EndpointSpec(label="a", model="openai/x", api_base="http://h:1/v1/", api_key_env="KEY_A")
    two = EndpointSpec(label="b", model="openai/x", api_base="http://h:1/v1", api_key_env="KEY_B")
    assert keys.endpoint_identity(one) == keys.endpoint_identity(two)
    assert keys.endpoint_identity(one) == {
        "provider": "openai",
        "api_base": "http://h:1/v1",
        "model": "x",
        "path": "fast",
    }
    forced = EndpointSpec(label="c", model="openai/x", api_base="http://h:1/v1", force_litellm=True)
    assert keys.endpoint_identity(forced)["path"] == "litellm"
    other = EndpointSpec(label="d", model="hosted_vllm/x", api_base="http://h:1/v1")
    assert keys.endpoint_identity(other) != keys.endpoint_identity(one)


# ------------------------------------------------------------------------------------ shared prompts


def _cfbench_pair_data(shared: Path, tmp_path: Path) -> Path:
    """CFBench records 987-989 of the real file: 988 and 989 have the same prompt and different
    checklists."""
    records = json.loads((shared / "CFBench" / "data" / "cfbench_data.json").read_text(encoding="utf-8"))
    picked = [r for r in records if r["idx"] in (987, 988, 989)]
    assert [r["idx"] for r in picked] == [987, 988, 989]
    assert picked[1]["prompt"] == picked[2]["prompt"] and picked[1]["criteria"] != picked[2]["criteria"]
    path = tmp_path / "cfbench_data.json"
    path.write_text(json.dumps(picked, ensure_ascii=False), encoding="utf-8")
    return path


def test_instances_with_one_prompt_keep_a_verdict_each(
    tmp_path: Path, shared_benchmarks: Path, sims: tuple[SimulatorThread, SimulatorThread]
) -> None:
    a, _ = sims
    data = _cfbench_pair_data(shared_benchmarks, tmp_path)
    out = tmp_path / "run"
    cfg = tmp_path / "sweep.toml"
    models = [_model("alpha", "openai/sim-alpha", a.base_url), _model("beta", "openai/sim-beta", a.base_url)]
    cfg.write_text(_config(out, "cfbench", data, models, a.base_url))
    assert main(["run", str(cfg)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["status"], summary["planned"], summary["done"]) == ("complete", 6, 6)
    # One answer for the shared prompt (it is paid once), a judge call per checklist.
    assert a.stats.by_model == {"sim-alpha": 2, "sim-beta": 2, "sim-judge": 6}
    verdicts = stored_records(out, {"verdict"})
    assert sorted((v["model"], v["instance_id"]) for v in verdicts) == [
        (m, i) for m in ("alpha", "beta") for i in ("987", "988", "989")
    ]
    by = {(v["model"], v["instance_id"]): v for v in verdicts}
    assert by[("alpha", "988")]["gen_key"] == by[("alpha", "989")]["gen_key"]
    sizes = {i.instance_id: len(i.constraints) for i in benchmarks.get("cfbench").load(data, {})}
    for (_, instance_id), v in by.items():
        assert len(v["rows"]) == sizes[instance_id]  # each scored on its own checklist
    rows = {(r["model"], r["done"]) for r in status_table(out)}
    assert rows == {("alpha", 3), ("beta", 3)}
    # A resume sends nothing and still finds a verdict for each of the three.
    sent = a.stats.requests
    assert main(["run", str(cfg)]) == 0
    assert a.stats.requests == sent


# ---------------------------------------------------------------------------------- the verdict check


def test_check_verdicts_names_missing_shared_and_foreign_records(tmp_path: Path) -> None:
    bench = benchmarks.get("cfbench")
    insts = list(bench.load(_fixture("cfbench"), {}))[:3]
    job = BenchJob(BenchmarkConfig("cfbench", None, None, "paper", 0), bench, bench.template_version())
    spec = EndpointSpec(label="m", model="openai/sim-m", api_base="http://127.0.0.1:9/v1")
    with RunStore.open(tmp_path, writer_id="t") as store:
        pipeline = Pipeline(
            store=store, judges=(), retry_errors=True, counters={("m", "cfbench"): Counters()}
        )
        pairs = [planned(pipeline, spec, job, i) for i in insts]
        with pytest.raises(IncompleteVerdicts, match=r"(?s)3 of 3 planned .*no verdict record"):
            check_verdicts(store, lambda: pairs)

        def verdict(
            p: Planned, instance_id: str, rows: int, skipped: int = 0, basis: str = ""
        ) -> dict[str, object]:
            row = {"constraint_idx": 0, "status": "ok", "satisfied": True}
            return {
                "v": 2,
                "kind": "verdict",
                "key": p.key,
                "basis": basis or p.basis,
                "status": "ok",
                "model": "m",
                "benchmark": "cfbench",
                "instance_id": instance_id,
                "rows": [row] * rows,
                "skipped": skipped,
            }

        n = [len(i.constraints) for i in insts]
        store.append(verdict(pairs[0], insts[0].instance_id, n[0]))
        store.append(verdict(pairs[1], insts[2].instance_id, n[1]))  # someone else's record
        store.append(verdict(pairs[2], insts[2].instance_id, n[2] - 1))  # a row short
        with pytest.raises(IncompleteVerdicts) as info:
            check_verdicts(store, lambda: [*pairs, pairs[0]])
        assert info.value.problems == [
            f"m / cfbench / {insts[1].instance_id}: its verdict key holds the record of "
            f"('m', 'cfbench', '{insts[2].instance_id}')",
            f"m / cfbench / {insts[2].instance_id}: {n[2] - 1} rows for {n[2]} constraints",
            f"m / cfbench / {insts[0].instance_id}: shares its verdict key with m / cfbench / "
            f"{insts[0].instance_id}",
        ]
        store.append(verdict(pairs[1], insts[1].instance_id, n[1] - 1, skipped=1))
        store.append(verdict(pairs[2], insts[2].instance_id, n[2]))
        check_verdicts(store, lambda: pairs)  # rows plus the constraints left unscored account for every one
        # A verdict its slot holds from other scoring code (or another answer) is not the pair's.
        store.append(verdict(pairs[2], insts[2].instance_id, n[2], basis="0" * 32))
        with pytest.raises(IncompleteVerdicts, match="derived from other code or another answer"):
            check_verdicts(store, lambda: pairs)


def test_a_resumed_sweep_checks_each_stored_verdict_it_finds(
    tmp_path: Path, sims: tuple[SimulatorThread, SimulatorThread]
) -> None:
    # The check after a sweep reuses the keys the pipeline computed and the records it found
    # (runner/store/seen.py): a stored verdict a row short, or another pair's, still fails the run.
    a, _ = sims
    out = tmp_path / "run"
    cfg = tmp_path / "sweep.toml"
    models = [_model("alpha", "openai/sim-alpha", a.base_url)]
    cfg.write_text(_config(out, "cfbench", _fixture("cfbench"), models, a.base_url))
    assert main(["run", str(cfg)]) == 0
    verdicts = sorted(stored_records(out, {"verdict"}), key=lambda v: str(v["instance_id"]))
    short, foreign = verdicts[0], verdicts[1]
    with RunStore.open(out, writer_id="tamper") as store:
        store.append({**short, "rows": short["rows"][1:]})
        store.append({**foreign, "instance_id": verdicts[2]["instance_id"]})
    sent = a.stats.requests
    assert main(["run", str(cfg)]) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["status"] == "failed" and a.stats.requests == sent
    n, told = len(short["rows"]), summary["message"]
    assert f"alpha / cfbench / {short['instance_id']} (judge judge): {n - 1} rows for {n} constraints" in told
    other = verdicts[2]["instance_id"]
    assert (
        f"alpha / cfbench / {foreign['instance_id']} (judge judge): its verdict key holds the record of "
        in told
    )
    assert f"'{other}')" in told


# ------------------------------------------------------------------------------ older run directories


def test_an_older_run_directory_is_refused_not_rebought(
    tmp_path: Path, sims: tuple[SimulatorThread, SimulatorThread], capsys: pytest.CaptureFixture[str]
) -> None:
    a, _ = sims
    out = tmp_path / "run"
    cfg = tmp_path / "sweep.toml"
    cfg.write_text(
        _config(out, "cfbench", _fixture("cfbench"), [_model("m", "openai/sim-m", a.base_url)], a.base_url)
    )
    assert main(["run", str(cfg)]) == 0
    manifest = orjson.loads((out / "manifest.json").read_bytes())
    manifest["schema"] = 1  # as ifsweep wrote it before keys carried the endpoint and the instance
    (out / "manifest.json").write_bytes(orjson.dumps(manifest))
    sent = a.stats.requests
    capsys.readouterr()
    assert main(["run", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "older ifsweep (manifest schema 1)" in err and "another run.output_dir" in err
    assert a.stats.requests == sent
    assert main(["status", str(out)]) == 0  # still readable


def test_an_import_into_a_directory_of_older_records_is_refused(
    tmp_path: Path, shared_benchmarks: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "imported"
    with RunStore.open(out, writer_id="import") as store:
        store.append({"v": 1, "kind": "verdict", "key": "ab" * 16, "status": "ok", "rows": []})
    eval_file = shared_benchmarks / "CFBench" / "output" / "judge" / "gpt4o_eval.json"
    capsys.readouterr()
    assert main(["import", "cfbench", str(eval_file), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "record version 1" in err and "new directory" in err


def test_the_fast_path_identity_does_not_import_litellm() -> None:
    """A resume on an OpenAI-compatible server must not pay litellm's import to compute its keys."""
    code = (
        "import sys\n"
        "from ifsweep.providers.records import EndpointSpec\n"
        "from ifsweep.runner.store.keys import endpoint_identity\n"
        "spec = EndpointSpec(label='m', model='hosted_vllm/ckpt', api_base='http://127.0.0.1:9/v1')\n"
        "assert endpoint_identity(spec)['path'] == 'fast'\n"
        "print('litellm' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip() == "False"
