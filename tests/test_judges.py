"""A panel of judges against the simulator: a verdict per judge from one generation, agreement figures
that equal a textbook computation on the same stored verdicts, a judge added to a finished run that
sends no generation, a removed judge kept out of reports unless asked, and two judges of opposite
verdicts whose figures never pool."""

from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from collections.abc import Iterator, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from sweeps import stored_records

import ifsweep
from ifsweep import benchmarks, metrics
from ifsweep.runner.commands.cli import main
from ifsweep.simulator import SimConfig, SimulatorThread

PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
MODELS = ("a", "b", "c", "d")
BENCHES = ("cfbench", "infobench")
LIMIT = 8


def config(out: Path, base: str, judges: Sequence[tuple[str, str]], **extra: Any) -> dict[str, Any]:
    """Simulated models over the CFBench and InFoBench samples, judged by `judges` ((id, model name))."""
    return {
        "run": {"output_dir": str(out), "progress": "off", "concurrency": 8},
        "benchmarks": [
            {"name": b, "data": str(benchmarks.get(b).fixture_dir()), "limit": LIMIT, "reask": 1}
            for b in BENCHES
        ],
        "models": [
            {
                "id": m,
                "model": f"openai/sim-{m}",
                "api_base": base,
                "price": PRICE,
                "params": {"max_tokens": 64},
            }
            for m in MODELS
        ],
        "judges": [
            {"id": jid, "model": f"openai/{name}", "api_base": base, "price": PRICE, **extra.get(jid, {})}
            for jid, name in judges
        ],
    }


@pytest.fixture
def sim() -> Iterator[SimulatorThread]:
    with SimulatorThread(SimConfig(seed=7)) as s:
        yield s


# ------------------------------------------------------------------ the textbook, on stored verdicts

Unit = tuple[str, str, str, int]  # benchmark, model, instance, constraint


def stored_votes(run: Path) -> tuple[dict[str, dict[Unit, bool | None]], dict[Unit, str]]:
    """Per judge, each judge-decided constraint's verdict as stored (None: not ok), and each unit's
    constraint type: straight from the verdict records in the shards."""
    votes: dict[str, dict[Unit, bool | None]] = defaultdict(dict)
    types: dict[Unit, str] = {}
    for rec in stored_records(run, {"verdict"}):
        for row in rec["rows"]:
            if row["source"] != "judge":
                continue
            unit = (rec["benchmark"], rec["model"], rec["instance_id"], row["constraint_idx"])
            votes[rec["judge"]][unit] = row["satisfied"] if row["status"] == "ok" else None
            types[unit] = row["constraint_type"] or "(none)"
    return votes, types


def cohen(a: list[bool], b: list[bool]) -> float:
    n = len(a)
    table = {
        (x, y): sum(1 for p, q in zip(a, b, strict=True) if (p, q) == (x, y)) for x in (0, 1) for y in (0, 1)
    }
    po = (table[(1, 1)] + table[(0, 0)]) / n
    pe = sum(((table[(c, 0)] + table[(c, 1)]) / n) * ((table[(0, c)] + table[(1, c)]) / n) for c in (0, 1))
    return (po - pe) / (1 - pe)


def fleiss(units: list[list[bool]]) -> float:
    k = len(units[0])
    n_ij = [[sum(1 for v in u if v == c) for c in (False, True)] for u in units]
    p_i = [(sum(x * x for x in row) - k) / (k * (k - 1)) for row in n_ij]
    p_bar = sum(p_i) / len(units)
    p_j = [sum(row[c] for row in n_ij) / (len(units) * k) for c in (0, 1)]
    pe = sum(p * p for p in p_j)
    return (p_bar - pe) / (1 - pe)


def krippendorff(units: list[list[bool]]) -> float:
    o = {(c, k): 0.0 for c in (False, True) for k in (False, True)}
    for values in units:
        m = len(values)
        if m < 2:
            continue
        for i in range(m):
            for j in range(m):
                if i != j:
                    o[(values[i], values[j])] += 1 / (m - 1)
    n_c = {c: o[(c, False)] + o[(c, True)] for c in (False, True)}
    n = n_c[False] + n_c[True]
    disagree = o[(False, True)] + o[(True, False)]
    expected = n_c[False] * n_c[True] + n_c[True] * n_c[False]
    return 1 - (n - 1) * disagree / expected


def textbook(run: Path, judges: list[str]) -> dict[tuple[str, str, str, tuple[str, ...]], float]:
    votes, types = stored_votes(run)
    out = {}
    groups: dict[tuple[str, str], list[Unit]] = defaultdict(list)
    for unit in sorted(types):
        groups[(unit[0], "all")].append(unit)
        groups[(unit[0], types[unit])].append(unit)
    for (bench, ctype), units in groups.items():
        for a, b in combinations(judges, 2):
            both = [u for u in units if votes[a].get(u) is not None and votes[b].get(u) is not None]
            va = [bool(votes[a][u]) for u in both]
            vb = [bool(votes[b][u]) for u in both]
            if both:
                out[(bench, ctype, "raw", (a, b))] = sum(x == y for x, y in zip(va, vb, strict=True)) / len(
                    both
                )
                if len(set(va)) + len(set(vb)) > 2:  # otherwise kappa is undefined
                    out[(bench, ctype, "cohen_kappa", (a, b))] = cohen(va, vb)
        every = [u for u in units if all(votes[j].get(u) is not None for j in judges)]
        rated = [[bool(votes[j][u]) for j in judges] for u in every]
        if len(judges) > 2 and every:
            out[(bench, ctype, "raw", tuple(judges))] = sum(len(set(r)) == 1 for r in rated) / len(rated)
            if len({v for r in rated for v in r}) == 2:
                out[(bench, ctype, "fleiss_kappa", tuple(judges))] = fleiss(rated)
        pairable = [[bool(votes[j][u]) for j in judges if votes[j].get(u) is not None] for u in units]
        pairable = [p for p in pairable if len(p) >= 2]
        if len({v for p in pairable for v in p}) == 2:
            out[(bench, ctype, "krippendorff_alpha", tuple(judges))] = krippendorff(pairable)
    return out


def tau_b(x: list[float], y: list[float]) -> float:
    """Kendall's tau-b by counting pairs one by one."""
    conc = disc = tie_x = tie_y = pairs = 0
    for i in range(len(x)):
        for j in range(i + 1, len(x)):
            pairs += 1
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0:
                tie_x += 1
            if dy == 0:
                tie_y += 1
            if dx * dy > 0:
                conc += 1
            elif dx * dy < 0:
                disc += 1
    return (conc - disc) / math.sqrt((pairs - tie_x) * (pairs - tie_y))


def check_agreement(run: Path, judges: list[str]) -> metrics.Agreement:
    found = ifsweep.agreement(run, resamples=300, seed=3)
    assert list(found.judges) == judges
    want = textbook(run, judges)
    got = {(s.benchmark, s.constraint_type, s.statistic, s.judges): s for s in found.stats}
    assert want, "the textbook found nothing to compare"
    for key, value in want.items():
        assert key in got, key
        assert got[key].value is not None, key
        assert math.isclose(got[key].value, value, rel_tol=0, abs_tol=1e-9), (key, got[key].value, value)
    for key, s in got.items():
        if key not in want:  # undefined where the textbook formula divides by zero
            assert s.value is None, key
        elif s.ci_low is not None and s.ci_high is not None:
            assert s.ci_low <= s.ci_high
    # The bootstrap is seeded: the same seed gives the same intervals, another seed other ones.
    again = ifsweep.agreement(run, resamples=300, seed=3)
    assert again.stats == found.stats
    # Leaderboard sensitivity: tau-b over each judge's scores of the ranking metric, counted pair by pair.
    scores = ifsweep.scores(run, judge="all")
    for r in found.ranks:
        part = scores.filter((pl.col("benchmark") == r.benchmark) & (pl.col("metric") == r.metric))
        part = part.filter(pl.col("slice") == "all")
        by = {j: dict(part.filter(pl.col("judge") == j).select("model", "value").iter_rows()) for j in judges}
        models = sorted(set(by[r.judge_a]) & set(by[r.judge_b]))
        assert r.models == len(models) == len(MODELS)
        xs, ys = [by[r.judge_a][m] for m in models], [by[r.judge_b][m] for m in models]
        assert r.tau is not None and math.isclose(r.tau, tau_b(xs, ys), rel_tol=0, abs_tol=1e-12)
        rank_a = {m: 1 + sum(v > by[r.judge_a][m] for v in xs) for m in models}
        rank_b = {m: 1 + sum(v > by[r.judge_b][m] for v in ys) for m in models}
        assert r.max_change == max(abs(rank_a[m] - rank_b[m]) for m in models)
    return found


def test_two_judges_agreement_equals_the_textbook(sim: SimulatorThread, tmp_path: Path) -> None:
    out = tmp_path / "run"
    judges = [("j0", "sim-judge"), ("j1", "sim-judge-flip0.3")]
    result = ifsweep.run(config(out, sim.base_url, judges))
    assert result.status == "complete", result.message
    verdicts = stored_records(out, {"verdict"})
    # Every pair has one verdict per judge, and the generations were bought once for both.
    assert len(verdicts) == 2 * len(MODELS) * len(BENCHES) * LIMIT
    assert sum(1 for _ in stored_records(out, {"generation"})) == len(MODELS) * len(BENCHES) * LIMIT
    found = check_agreement(out, ["j0", "j1"])
    raw = {s.benchmark: s.value for s in found.stats if s.statistic == "raw" and s.constraint_type == "all"}
    # Flipping 30% of the verdicts leaves about 70% agreement.
    assert all(v is not None and 0.55 < v < 0.85 for v in raw.values()), raw
    assert not any(s.statistic == "fleiss_kappa" for s in found.stats)  # three or more judges only


def test_three_judges_with_unparsed_verdicts(sim: SimulatorThread, tmp_path: Path) -> None:
    out = tmp_path / "run"
    judges = [("j0", "sim-judge"), ("j1", "sim-judge-flip0.1"), ("j2", "sim-judge-flip0.4-garble0.15")]
    result = ifsweep.run(config(out, sim.base_url, judges))
    assert result.status == "complete", result.message
    votes, _ = stored_votes(out)
    assert any(v is None for v in votes["j2"].values())  # garbled replies: unparsed, missing in alpha
    assert not any(v is None for v in votes["j0"].values())
    found = check_agreement(out, ["j0", "j1", "j2"])
    assert {"raw", "cohen_kappa", "fleiss_kappa", "krippendorff_alpha"} <= {s.statistic for s in found.stats}
    kappa = {
        s.judges: s.value
        for s in found.stats
        if s.statistic == "cohen_kappa" and s.benchmark == "cfbench" and s.constraint_type == "all"
    }
    kappa = {k: v for k, v in kappa.items() if v is not None}
    # The judge that flips least agrees most with the plain one.
    assert kappa[("j0", "j1")] > kappa[("j0", "j2")]


def test_adding_a_judge_sends_no_generation_and_removing_one_keeps_its_verdicts(
    sim: SimulatorThread, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    first = config(out, sim.base_url, [("j0", "sim-judge")])
    assert ifsweep.run(first).status == "complete"
    before = ifsweep.report(out, "json")

    sim.stats.reset()
    both = config(out, sim.base_url, [("j0", "sim-judge"), ("cheap", "sim-judge-flip0.2")])
    result = ifsweep.run(both)
    assert result.status == "complete", result.message
    # Counted at the server: only the new judge's calls went out, no generation and no call of j0.
    assert set(sim.stats.by_model) == {"sim-judge-flip0.2"}, sim.stats.by_model
    assert sim.stats.requests > 0
    # The first judge stays the default of reports: its figures are what they were.
    assert ifsweep.report(out, "json") == before

    # Left out of the config, the new judge's verdicts stay: reports leave it out unless asked.
    sim.stats.reset()
    assert ifsweep.run(first).status == "complete"
    assert sim.stats.requests == 0
    assert {r["judge"] for r in stored_records(out, {"verdict"})} == {"j0", "cheap"}
    shown = json.loads(ifsweep.report(out, "json"))
    assert {r["judge"] for r in shown} == {"j0"}
    assert {r["judge"] for r in json.loads(ifsweep.report(out, "json", judge="cheap"))} == {"cheap"}
    assert {r["judge"] for r in json.loads(ifsweep.report(out, "json", judge="all"))} == {"j0", "cheap"}
    # A judge id that comes back with another model is refused: its verdicts would mix.
    changed = config(out, sim.base_url, [("j0", "sim-judge"), ("cheap", "sim-judge-flip0.5")])
    with pytest.raises(Exception, match="judge 'cheap': provider model changed"):
        ifsweep.run(changed)


def test_opposite_judges_never_pool(sim: SimulatorThread, tmp_path: Path) -> None:
    out = tmp_path / "run"
    judges = [("yes", "sim-judge"), ("no", "sim-judge-flip1")]
    assert ifsweep.run(config(out, sim.base_url, judges)).status == "complete"
    votes, _ = stored_votes(out)
    assert votes["yes"].keys() == votes["no"].keys()
    assert all(votes["no"][u] is (not votes["yes"][u]) for u in votes["yes"])  # exactly opposite
    scores = ifsweep.scores(out, judge="all")
    drfr = scores.filter((pl.col("metric") == "DRFR") & (pl.col("slice") == "all"))
    for model in MODELS:
        mine = drfr.filter(pl.col("model") == model)
        by = {r["judge"]: r for r in mine.iter_rows(named=True)}
        assert set(by) == {"yes", "no"}
        # A constraint-weighted mean over opposite verdicts: the two judges' figures sum to 1, each over
        # its own instances only (pooled, both would be 0.5 over twice the constraints).
        assert math.isclose(by["yes"]["value"] + by["no"]["value"], 1.0, abs_tol=1e-12)
        mine_units = sum(1 for u in votes["yes"] if u[0] == "infobench" and u[1] == model)
        assert by["yes"]["n"] == by["no"]["n"] == mine_units  # constraints of one judge, not of both
        assert by["yes"]["value"] != 0.5
    for judge in ("yes", "no"):
        alone = ifsweep.scores(out, judge=judge)
        assert set(alone.get_column("judge").to_list()) == {judge}
        assert alone.drop("judge").equals(scores.filter(pl.col("judge") == judge).drop("judge"))
    # The majority of two opposite judges is always a tie: nothing it decides counts.
    majority = ifsweep.scores(out, judge="majority")
    coverage = majority.filter((pl.col("metric") == "coverage") & (pl.col("benchmark") == "infobench"))
    assert set(coverage.get_column("judge").to_list()) == {"majority"}
    assert coverage.get_column("value").to_list() == [0.0] * len(MODELS)


def test_majority_rule() -> None:
    base = {
        "run": "r",
        "benchmark": "cfbench",
        "model": "m",
        "scoring": "paper",
        "instance_id": "i",
        "group_id": None,
        "level": None,
        "category": None,
        "split": "easy",
        "instruction_idx": 0,
        "constraint_type": "t",
        "priority": "primary",
        "source": "judge",
    }
    votes = {  # constraint -> each judge's (satisfied, status)
        0: [(True, "ok"), (True, "ok"), (False, "ok")],  # 2 to 1: yes
        1: [(True, "ok"), (None, "unparsed"), (False, "ok")],  # a tie: unparsed
        2: [(False, "ok"), (None, "unparsed"), (None, "error")],  # one vote: no
        3: [(None, "error"), (None, "unparsed"), (None, "error")],  # nobody voted, an error: error
        4: [(None, "unparsed"), (None, "unparsed"), (None, "unparsed")],  # nobody voted: unparsed
    }
    rows = [
        base | {"judge": f"j{k}", "constraint_idx": idx, "satisfied": v, "status": st}
        for idx, vs in votes.items()
        for k, (v, st) in enumerate(vs)
    ]
    rows.append(
        base | {"judge": "j0", "constraint_idx": 5, "satisfied": True, "status": "ok", "source": "rule"}
    )
    rows.append(
        base | {"judge": "j1", "constraint_idx": 5, "satisfied": True, "status": "ok", "source": "rule"}
    )
    frame = pl.DataFrame(rows, schema=metrics.VERDICT_SCHEMA)
    got = metrics.majority_rows(frame, ["j0", "j1", "j2"]).collect().sort("constraint_idx")
    assert got.get_column("judge").to_list() == ["majority"] * 6
    assert got.get_column("satisfied").to_list() == [True, None, False, None, None, True]
    assert got.get_column("status").to_list() == ["ok", "unparsed", "ok", "error", "unparsed", "ok"]


def test_kendall_tau_b_and_ranks() -> None:
    assert metrics.kendall_tau_b([1, 2, 3, 4], [4, 3, 2, 1]) == -1.0
    # Pairs: 4 concordant, one tied in x only, one in y only -> 4 / sqrt(5 * 5).
    assert math.isclose(metrics.kendall_tau_b([1, 1, 2, 3], [1, 2, 2, 3]) or 0, 0.8, abs_tol=1e-12)
    xs, ys = [0.3, 0.5, 0.5, 0.9, 0.1, 0.5], [0.2, 0.6, 0.4, 0.4, 0.1, 0.9]
    assert math.isclose(metrics.kendall_tau_b(xs, ys) or 0, tau_b(xs, ys), abs_tol=1e-12)
    assert metrics.kendall_tau_b([1, 1], [1, 2]) is None
    from ifsweep.metrics.agreement import competition_ranks

    assert competition_ranks({"a": 0.9, "b": 0.5, "c": 0.5, "d": 0.1}) == {"a": 1, "b": 2, "c": 2, "d": 4}


def test_cli_report_judge_and_agreement(
    sim: SimulatorThread, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    judges = [("j0", "sim-judge"), ("j1", "sim-judge-flip0.3")]
    assert ifsweep.run(config(out, sim.base_url, judges)).status == "complete"
    assert main(["agreement", str(out), "--format", "json", "--resamples", "50"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["judges"] == ["j0", "j1"] and doc["agreement"] and doc["rank_changes"]
    assert main(["agreement", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Cohen's kappa" in text and "Krippendorff's alpha" in text and "tau-b" in text
    assert main(["report", str(out), "--judge", "all"]) == 0
    text = capsys.readouterr().out
    assert "judge: j0" in text and "judge: j1" in text
    assert main(["report", str(out), "--judge", "majority", "--format", "json"]) == 0
    assert {r["judge"] for r in json.loads(capsys.readouterr().out)} == {"majority"}
    assert main(["report", str(out), "--judge", "nobody"]) == 2
    assert "no verdicts of that judge" in capsys.readouterr().err
    assert main(["report", str(out), "--judge", "all", "--format", "html"]) == 2
    page = tmp_path / "r.html"
    assert main(["report", str(out), "--format", "html", "--out", str(page)]) == 0
    html = page.read_text()
    assert '<section id="judges">' in html and "Cohen&#x27;s kappa" in html
    assert main(["status", str(out)]) == 0
    status = capsys.readouterr().out
    assert "judged" in status and "j0" in status and "j1" in status


def test_plan_and_budget_cap_per_judge(sim: SimulatorThread, tmp_path: Path) -> None:
    out = tmp_path / "run"
    cap = 0.004
    judges = [("j0", "sim-judge"), ("pricey", "sim-judge-flip0.2")]
    cfg = config(out, sim.base_url, judges, pricey={"max_usd": cap, "params": {"max_tokens": 64}})
    rows = ifsweep.plan(cfg)
    for r in rows:
        assert [s.judge for s in r.judges] == ["j0", "pricey"]
        assert r.judge_calls == sum(s.calls for s in r.judges) and r.judges[0].calls == r.judges[1].calls
        assert r.judges[1].cost_high is not None and r.judges[1].cost_high < (r.judges[0].cost_high or 0)
    from ifsweep.runner.commands.planning import render_estimate

    text = render_estimate(rows)
    assert text.splitlines()[-2].split()[0] == "j0" and text.splitlines()[-1].split()[0] == "pricey"

    result = ifsweep.run(cfg)
    # The pricey judge stops at its own cap; the other judge and the models go on to the end.
    assert result.status == "budget_exhausted" and "judge pricey" in result.message, result.message
    pairs = len(MODELS) * len(BENCHES) * LIMIT
    by_judge = defaultdict(int)
    for rec in stored_records(out, {"verdict"}):
        by_judge[rec["judge"]] += 1
    assert by_judge["j0"] == pairs and 0 < by_judge["pricey"] < pairs
    summary = json.loads((out / "summary.json").read_text())
    mine = {j["judge"]: j for j in summary["by_judge"]}
    assert mine["j0"]["done"] == pairs and mine["pricey"]["done"] == by_judge["pricey"]
    assert 0 < mine["pricey"]["spent_usd"] <= cap
    # A higher cap resumes only the pricey judge's missing verdicts: no generation is bought again.
    sim.stats.reset()
    cfg["judges"][1]["max_usd"] = 10.0
    assert ifsweep.run(cfg).status == "complete"
    assert set(sim.stats.by_model) == {"sim-judge-flip0.2"}


@pytest.mark.parametrize(
    ("change", "key", "words"),
    [
        (lambda c: c | {"judge": c["judges"][0]}, "judges", "not both"),
        (lambda c: c | {"judges": [c["judges"][0], c["judges"][0]]}, "judges[1].id", "duplicate judge id"),
        (
            lambda c: c | {"judges": [{k: v for k, v in c["judges"][0].items() if k != "id"}]},
            "judges[0].id",
            "missing",
        ),
        (lambda c: c | {"judges": [c["judges"][0] | {"id": "majority"}]}, "judges[0].id", "reserved"),
        (lambda c: c | {"judges": [c["judges"][0] | {"id": "a"}]}, "judges[0].id", "also a model id"),
        (lambda c: c | {"judges": c["judges"][0]}, "judges", "write [[judges]]"),
        (lambda c: c | {"judges": [c["judges"][0] | {"max_usd": -1}]}, "judges[0].max_usd", "positive"),
    ],
)
def test_judges_config_mistakes_name_the_key(tmp_path: Path, change: Any, key: str, words: str) -> None:
    cfg = change(config(tmp_path / "run", "http://127.0.0.1:9/v1", [("j0", "sim-judge")]))
    with pytest.raises(ifsweep.ConfigError) as err:
        ifsweep.plan(cfg)
    assert err.value.key == key and words in str(err.value), str(err.value)


def test_the_last_judge_out_of_budget_stops_the_sweep(sim: SimulatorThread, tmp_path: Path) -> None:
    out = tmp_path / "run"
    cfg = config(
        out, sim.base_url, [("j0", "sim-judge")], j0={"max_usd": 0.002, "params": {"max_tokens": 64}}
    )
    result = ifsweep.run(cfg)
    assert result.status == "budget_exhausted" and "judge j0" in result.message, result
    # No judge is left to judge them: the models stop instead of buying answers nobody can judge now.
    pairs = len(MODELS) * len(BENCHES) * LIMIT
    assert len(stored_records(out, {"generation"})) < pairs


def test_bootstrap_intervals_match_an_independent_resampling(sim: SimulatorThread, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert ifsweep.run(
        config(out, sim.base_url, [("j0", "sim-judge"), ("j1", "sim-judge-flip0.3")])
    ).status == ("complete")
    votes, _ = stored_votes(out)
    found = ifsweep.agreement(out, resamples=4000, seed=1)
    for bench in BENCHES:
        # Resample instances (each with all its units) with another generator, and take percentiles.
        by_instance: dict[tuple[str, str], list[bool]] = defaultdict(list)
        for u, v in votes["j0"].items():
            if u[0] == bench and v is not None and votes["j1"].get(u) is not None:
                by_instance[(u[1], u[2])].append(v == votes["j1"][u])
        groups = list(by_instance.values())
        rng = random.Random(99)
        draws = []
        for _ in range(4000):
            picked = [groups[rng.randrange(len(groups))] for _ in groups]
            draws.append(sum(sum(g) for g in picked) / sum(len(g) for g in picked))
        draws.sort()
        low, high = draws[int(0.025 * 4000)], draws[int(0.975 * 4000) - 1]
        ours = next(
            s
            for s in found.stats
            if s.benchmark == bench and s.statistic == "raw" and s.constraint_type == "all"
        )
        assert ours.ci_low is not None and ours.ci_high is not None and ours.value is not None
        assert ours.ci_low < ours.value < ours.ci_high
        # Two bootstraps of the same instances agree up to their own sampling noise.
        assert abs(ours.ci_low - low) < 0.02 and abs(ours.ci_high - high) < 0.02, (ours, low, high)


def test_a_panel_is_walked_at_n_times_its_slowest_judge() -> None:
    from ifsweep.runner.watch.eta import Capacity
    from ifsweep.runner.watch.reading import panel_capacity

    fast, slow = Capacity(4.0, 1000.0, 0.5, "rpm"), Capacity(1.0, 5000.0, 2.0, "concurrency")
    # Each judge makes half the calls: two judges manage twice the slower one's pace, and a pair waits
    # for the slower reply.
    assert panel_capacity([fast, slow]) == Capacity(2.0, 2000.0, 2.0, "concurrency")
    assert panel_capacity([fast, None]) is None


def test_a_run_from_before_panels_reads_and_resumes(sim: SimulatorThread, tmp_path: Path) -> None:
    out = tmp_path / "run"
    cfg = config(out, sim.base_url, [("sim-judge", "sim-judge")])
    assert ifsweep.run(cfg).status == "complete"
    path = out / "manifest.json"
    raw = json.loads(path.read_text())
    del raw["judges"], raw["judge_order"]  # as written before panels: the judge without its id
    path.write_text(json.dumps(raw))
    rows = ifsweep.status(out)
    assert len(rows) == len(MODELS) * len(BENCHES) and all(r.done == LIMIT for r in rows)
    assert {r["judge"] for r in json.loads(ifsweep.report(out, "json"))} == {"sim-judge"}
    sim.stats.reset()
    assert ifsweep.run(cfg).status == "complete" and sim.stats.requests == 0
    assert set(json.loads(path.read_text())["judges"]) == {"sim-judge"}  # filed under its id now
