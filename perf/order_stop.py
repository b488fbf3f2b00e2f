"""Issue 34's figures, side by side in one run, on synthetic verdicts of known truth:

1. coverage of the confidence sequences (metrics/confseq.py) at every stopping point, over SEEDS
   populations: the share of seeds whose interval held the population mean at every n at once; and
   the sign test's wrong-direction rate over SEEDS near-equal paired populations, looked at after
   every draw;
2. a stop at 30% of the plan: how often the partial run's 95% interval holds the full run's value,
   in the seeded stratified order (runner/engine/order.py, post-stratified, metrics/stratified.py)
   and in file order (the strata one after another, read as if the prefix were a random sample);
3. `stop_when = { ranking = 0.95 }` replayed over 10 models of spread quality on a plan shaped like
   CFBench + FollowBench (1000 single-instance units and 85 groups of 5): the share of the full plan's
   cost (instances sent) it spends, and whether every pair it separates is ordered as in the full run.

Figures 1-3 are synthetic: the per-unit scores are drawn here (unit difficulty shared by the models,
so their differences are paired, as in a sweep). Figure 4 runs the sweep itself, `ifsweep run`
against the built-in simulator, whose models have known quality (simulator/text.py, model_quality):
per spread of qualities (SPREADS: printed), 10 models on CFBench + FollowBench (the real data in
../shared/benchmarks, whole, or each limited to --limit units), once in full and once with
`stop_when = { ranking = 0.95 }`, and prints the stopped sweep's share of the full run's pairs and
dollars, the full run's watched means and neighbour gaps, the units each model used, and how many
model pairs the stopped run separated and ordered as the full run does.
`python perf/order_stop.py [--seeds 200] [--more-seeds 1000] [--limit N] [--no-sim | --sim-only]
[--spread even|old|both]`;
`--only-stop [--more-seeds N] [--first-seed S]`: the 30% stop's figure alone, over seeds S ... S + N - 1.
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from dataclasses import dataclass
from itertools import combinations, pairwise
from pathlib import Path
from typing import Any

import numpy as np

from ifsweep.metrics.sampling.confseq import SignTest, bernstein_path, paired, rank_settled
from ifsweep.metrics.sampling.stratified import stratified_ratio
from ifsweep.runner.engine.order import Unit, seeded_units

STRATA = {"content": (0.85, 120), "format": (0.6, 90), "style": (0.45, 60), "mixed": (0.25, 30)}


def cs_coverage(seeds: int, n: int = 400) -> float:
    held = 0
    for seed in range(seeds):
        rng = random.Random(seed)
        p = rng.uniform(0.05, 0.95)
        # Scores in [0, 1] like a unit's share of satisfied constraints (0, 1/4, ..., 1).
        pop = [sum(rng.random() < p for _ in range(4)) / 4 for _ in range(n)]
        truth = sum(pop) / n
        path = bernstein_path(rng.sample(pop, n), n, 0.05)
        held += all(iv.low - 1e-12 <= truth <= iv.high + 1e-12 for iv in path)
    return held / seeds


def sign_errors(seeds: int, n: int = 300) -> tuple[float, float]:
    """The sign test (confseq.SignTest) at 95%, looked at after every draw, over `seeds` paired
    populations of two models 0-0.05 apart (unit scores shares of 2-6 constraints): the share of
    seeds it ordered against the population's mean difference (bound: 2.5%), and the share it ordered."""
    wrong = decided = 0
    for seed in range(seeds):
        rng = random.Random(seed)
        qa, gap = rng.uniform(0.3, 0.9), rng.uniform(-0.05, 0.05)
        pop = []
        for _ in range(n):
            k = rng.randint(2, 6)
            pop.append(
                sum(rng.random() < qa for _ in range(k)) / k
                - sum(rng.random() < qa + gap for _ in range(k)) / k
            )
        mean, test, side = sum(pop) / n, SignTest(n, 0.05), None
        for d in rng.sample(pop, n):
            side = test.add(d)
        decided += side is not None
        wrong += side is not None and (side == "above") != (mean > 0)
    return wrong / seeds, decided / seeds


def _population(seed: int) -> tuple[list[Unit], dict[str, float]]:
    rng = random.Random(seed)
    units, scores = [], {}
    for name, (p, size) in STRATA.items():  # file order: each stratum in turn, as FollowBench's data
        for i in range(size):
            uid = f"{name}:{i}"
            units.append(Unit(uid, name, (len(units),)))
            scores[uid] = sum(rng.random() < p for _ in range(5)) / 5
    return units, scores


@dataclass(frozen=True, slots=True)
class StopFigure:
    """The 30% stop over some seeds: intervals holding the full run's value, and their mean width."""

    seeds: int
    seeded: int  # seeds whose seeded-order interval held it
    file: int  # seeds whose file-order interval held it
    seeded_width: float
    file_width: float


def stop_coverage(seeds: int, share: float = 0.3, first: int = 0) -> StopFigure:
    """Seeds `first` ... `first + seeds - 1`: each estimate by `stratified_ratio`, the estimator and
    interval the report's estimates use (metrics/sampling/stratified.py: unit_weights and
    replicate_interval serve both)."""
    seeded = file = 0
    width = [0.0, 0.0]
    sizes = {name: size for name, (_, size) in STRATA.items()}
    for seed in range(first, first + seeds):
        units, scores = _population(seed)
        truth = sum(scores.values()) / len(scores)
        k = round(share * len(units))
        done = seeded_units(units, seed, "synthetic")[:k]
        num = np.array([[scores[u.unit_id]] for u in done])
        est = stratified_ratio(num, np.ones_like(num), [u.stratum for u in done], sizes, resamples=2000)
        seeded += bool(est.low[0] <= truth <= est.high[0])
        width[0] += float(est.high[0] - est.low[0])
        prefix = units[:k]  # today's order, estimated as if the prefix were a simple random sample
        num = np.array([[scores[u.unit_id]] for u in prefix])
        est = stratified_ratio(num, np.ones_like(num), ["all"] * k, {"all": len(units)}, resamples=2000)
        file += bool(est.low[0] <= truth <= est.high[0])
        width[1] += float(est.high[0] - est.low[0])
    return StopFigure(seeds, seeded, file, width[0] / seeds, width[1] / seeds)


def print_stop(fig: StopFigure, first: int = 0) -> None:
    """The 30% stop's figure: coverage with its standard error and mean width, both orders."""
    print(
        f"stop at 30% of the plan, 95% intervals holding the full run's value "
        f"(seeds {first}-{first + fig.seeds - 1}):"
    )
    print(
        f"  seeded stratified order, post-stratified: {_share(fig.seeded / fig.seeds, fig.seeds)}, "
        f"mean width {fig.seeded_width:.4f}"
    )
    print(
        f"  file order (strata in turn):              {_share(fig.file / fig.seeds, fig.seeds)}, "
        f"mean width {fig.file_width:.4f}"
    )


def ranking_replay(seed: int, check_every: int = 20) -> tuple[float, int, int, int]:
    """(cost share, pairs separated at the stop, of which ordered as in the full run, pairs)."""
    rng = random.Random(seed)
    sizes = [1] * 1000 + [5] * 85  # CFBench instances, FollowBench groups
    order = rng.sample(range(len(sizes)), len(sizes))
    difficulty = [rng.gauss(0, 1.0) for _ in sizes]
    quality = [-1.2 + 0.3 * m for m in range(10)]  # spread quality, as the simulator's model names
    full = {
        f"m{m}": [1 / (1 + np.exp(-(q - difficulty[u] + rng.gauss(0, 0.5)))) for u in order]
        for m, q in enumerate(quality)
    }
    n_units = len(order)
    walked = dict.fromkeys(full, 0)
    settled: set[str] = set()
    step = 0
    while len(settled) < len(full) and step < n_units:
        step = min(step + check_every, n_units)
        for m in full:
            if m not in settled:
                walked[m] = step
        now = rank_settled({m: full[m][: walked[m]] for m in full}, n_units, 0.95)
        settled |= {m for m, ok in now.items() if ok}
    cost = sum(sum(sizes[u] for u in order[: walked[m]]) for m in full)
    plan = len(full) * sum(sizes)
    means = {m: sum(v) / n_units for m, v in full.items()}
    apart = agree = 0
    for a, b in combinations(full, 2):
        side = paired(full[a][: walked[a]], full[b][: walked[b]], n_units, 0.05).verdict(0.0)
        if side in ("above", "below"):
            apart += 1
            agree += (side == "above") == (means[a] > means[b])
    return cost / plan, apart, agree, 45


# 10 simulated models of spread quality (simulator/text.py, model_quality of "sim-<name>"). "even":
# names found by their hash to give 0.35 ... 0.95 in even steps (the simulator's whole range, so the
# closest neighbours are 0.06 apart); "old": the spread issue 34's first figure used (0.39 ... 0.95,
# neighbours 0.05 apart).
SPREADS = {
    "even": ("q92", "q29", "q89", "q19", "q48", "q247", "q32", "q40", "q6", "q211"),
    "old": ("chi", "kappa", "omega", "rho", "m28", "beta", "m12", "eta", "nu", "alpha"),
}
SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
PRICE = "price = { input_per_mtok = 1.0, output_per_mtok = 2.0 }"


def _sim_config(out: Path, base: str, models: tuple[str, ...], limit: int | None, stop: str) -> str:
    lines = ["[run]", f'output_dir = "{out}"', 'progress = "off"', "concurrency = 16", stop, ""]
    for name, folder in (("cfbench", "CFBench"), ("followbench", "FollowBench")):
        lines += ["[[benchmarks]]", f'name = "{name}"', f'data = "{SHARED / folder}"']
        lines += [f"limit = {limit}", ""] if limit is not None else [""]
    for m in models:
        lines += ["[[models]]", f'id = "{m}"', f'model = "openai/sim-{m}"', f'api_base = "{base}"', PRICE, ""]
    lines += ["[judge]", 'id = "judge"', 'model = "openai/sim-judge"', f'api_base = "{base}"', PRICE, ""]
    return "\n".join(lines)


def _watched_means(run_dir: Path) -> dict[str, dict[str, float]]:
    """Per benchmark and model, the full run's mean unit score as stop_when watches it (the watch's
    own instance_score and unit_score over the stored verdicts, then the mean over units)."""
    import ifsweep
    from ifsweep.runner.engine.stopping import instance_score, unit_score

    rows = ifsweep.verdicts(run_dir)
    units: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    for key, part in rows.group_by(["benchmark", "model", "group_id", "instance_id"]):
        bench, model, group, _ = (str(k) for k in key)
        units.setdefault((bench, model, group), []).append(instance_score({"rows": part.to_dicts()}))
    means: dict[str, dict[str, list[float]]] = {}
    for (bench, model, _), parts in units.items():
        means.setdefault(bench, {}).setdefault(model, []).append(unit_score(parts))
    return {b: {m: sum(v) / len(v) for m, v in ms.items()} for b, ms in means.items()}


def _sim_pair(sim: Any, tmp: Path, name: str, limit: int | None) -> None:
    """One spread: the full sweep and the one `stop_when` stops, side by side."""
    from ifsweep.runner.commands.cli import main
    from ifsweep.simulator.text import model_quality

    models = SPREADS[name]
    runs = {}
    for kind, stop in (("full", ""), ("stop", "stop_when = { ranking = 0.95 }")):
        cfg = tmp / f"{name}-{kind}.toml"
        cfg.write_text(_sim_config(tmp / f"{name}-{kind}", sim.base_url, models, limit, stop))
        t = time.perf_counter()
        code = main(["run", str(cfg)])
        summary = json.loads((tmp / f"{name}-{kind}" / "summary.json").read_text())
        runs[kind] = (code, summary, time.perf_counter() - t)
    (_, full, t_full), (code, stop, t_stop) = runs["full"], runs["stop"]
    told = stop.get("stop_when", {})
    print(f"simulator, spread {name!r}: qualities {[model_quality('sim-' + m) for m in models]}")
    print(f"  full run:   {full['status']}, {full['done']} pairs, ${full['spent_usd']:.4f}, {t_full:.0f} s")
    print(
        f"  stop_when = {{ ranking = 0.95 }}: {stop['status']} (exit {code}), {stop['done']} pairs "
        f"({stop['done'] / full['done']:.1%} of the full run's), ${stop['spent_usd']:.4f} "
        f"({stop['spent_usd'] / full['spent_usd']:.1%} of its cost; its own estimate of the full plan "
        f"${told.get('full_plan_usd_estimate', float('nan')):.4f}), {t_stop:.0f} s"
    )
    settled = [m["model"] for m in told.get("models", []) if m["settled"]]
    print(f"  settled: {len(settled)} of {len(models)} models")
    truth = _watched_means(tmp / f"{name}-full")
    lanes = {(b["benchmark"], m["model"]): b for m in told.get("models", []) for b in m["benchmarks"]}
    for bench, means in truth.items():
        order = sorted(means, key=lambda m: -means[m])
        gaps = [means[a] - means[b] for a, b in pairwise(order)]
        print(f"  {bench}: full run's mean unit scores {' > '.join(f'{m} {means[m]:.3f}' for m in order)}")
        print(f"    neighbour gaps {' '.join(f'{g:.3f}' for g in gaps)}")
        used = [lanes[(bench, m)]["units"] for m in order]
        print(
            f"    units each model used before it settled (of {lanes[(bench, order[0])]['planned']}): {used}"
        )
        claimed = [(hi, lo) for b, hi, lo in told.get("separated", []) if b == bench]
        right = sum(means[hi] > means[lo] for hi, lo in claimed)
        mine = {m: lanes[(bench, m)]["mean"] for m in order}
        same = sum(mine[a] > mine[b] for a, b in combinations(order, 2))
        print(
            f"    pairs the stopped run separated: {len(claimed)} of 45, {right} of them ordered as the "
            f"full run orders them; all 45 pairs by the stopped run's means: {same} ordered as the full run"
        )


def simulator_figures(limit: int | None, spreads: list[str]) -> None:
    """Figure 4: per spread, the full sweep and the one `stop_when` stops, on one simulator."""
    from ifsweep.simulator import SimConfig, SimulatorThread

    with tempfile.TemporaryDirectory() as tmp, SimulatorThread(SimConfig(seed=2)) as sim:
        for name in spreads:
            _sim_pair(sim, Path(tmp), name, limit)


def _share(hits: float, seeds: int) -> str:
    se = (hits * (1 - hits) / seeds) ** 0.5
    return f"{hits:.1%} (se {se:.1%})"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument(
        "--more-seeds", type=int, default=1000, help="the 30%% stop's coverage again, over more seeds"
    )
    ap.add_argument("--replays", type=int, default=5)
    ap.add_argument("--limit", type=int, default=None, help="units of each benchmark in the simulator runs")
    ap.add_argument("--no-sim", action="store_true", help="leave out the simulator runs (figure 4)")
    ap.add_argument("--sim-only", action="store_true", help="only the simulator runs (figure 4)")
    ap.add_argument("--spread", choices=["even", "old", "both"], default="both", help="figure 4's qualities")
    ap.add_argument(
        "--only-stop", action="store_true", help="only the 30%% stop's figure, over --more-seeds seeds"
    )
    ap.add_argument("--first-seed", type=int, default=0, help="the first seed of --only-stop's run")
    args = ap.parse_args()
    t0 = time.perf_counter()
    spreads = ["even", "old"] if args.spread == "both" else [args.spread]
    if args.sim_only:
        simulator_figures(args.limit, spreads)
        print(f"({time.perf_counter() - t0:.0f} s)")
        return
    if args.only_stop:
        print_stop(stop_coverage(args.more_seeds, first=args.first_seed), args.first_seed)
        print(f"({time.perf_counter() - t0:.0f} s)")
        return
    cov = cs_coverage(args.seeds)
    print(f"confidence sequences, 95%: held at every n in {cov:.1%} of {args.seeds} seeds")
    wrong, decided = sign_errors(args.seeds)
    print(
        f"sign test, 95%, pairs 0-0.05 apart looked at after every draw: ordered {decided:.1%} of "
        f"{args.seeds} seeds, against the population's sign in {wrong:.1%} (bound 2.5%)"
    )
    print_stop(stop_coverage(args.seeds))
    if args.more_seeds:
        print_stop(stop_coverage(args.more_seeds))
    print("stop_when = { ranking = 0.95 }, 10 models, 1000 + 85x5 units (synthetic replay):")
    for r in range(args.replays):
        share, apart, agree, pairs = ranking_replay(r)
        print(
            f"  replay {r}: {share:.1%} of the full plan's cost; {apart} of {pairs} pairs separated, "
            f"{agree} of them ordered as in the full run"
        )
    if not args.no_sim:
        simulator_figures(args.limit, spreads)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
