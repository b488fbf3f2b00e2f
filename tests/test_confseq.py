"""Anytime-valid confidence sequences and the post-stratified estimates of a partial run (issue 34,
items 2 and 3): pure functions, checked against populations whose true values are known."""

from __future__ import annotations

import random

import numpy as np
import pytest

from ifsweep.metrics.sampling.confseq import SignTest, bernstein_cs, difference_cs, paired, separated
from ifsweep.metrics.sampling.stratified import poststratified_weights, rao_wu_weights, stratified_ratio


def population(seed: int, n: int = 300) -> list[float]:
    rng = random.Random(seed)
    p = rng.uniform(0.1, 0.9)
    return [float(rng.random() < p) for _ in range(n)]


def test_the_sequence_holds_the_population_mean_at_every_sample_size() -> None:
    misses = 0
    for seed in range(60):
        pop = population(seed)
        truth = sum(pop) / len(pop)
        draws = random.Random(1000 + seed).sample(pop, len(pop))
        for n in range(1, len(pop) + 1, 7):
            cs = bernstein_cs(draws[:n], len(pop), 0.05)
            if not cs.low <= truth <= cs.high:
                misses += 1
                break
    # Anytime-valid at 95%: a population missed at any checked size in at most 5% of seeds (with
    # sampling noise: 60 seeds).
    assert misses <= 6, misses


def test_the_sequence_narrows_and_is_a_point_once_every_unit_is_drawn() -> None:
    pop = population(3)
    draws = random.Random(4).sample(pop, len(pop))
    widths = [bernstein_cs(draws[:n], len(pop), 0.05).halfwidth for n in (10, 50, 150, 299)]
    assert widths == sorted(widths, reverse=True) and widths[-1] < 0.1
    full = bernstein_cs(draws, len(pop), 0.05)
    assert full.low == full.high == pytest.approx(sum(pop) / len(pop))
    assert bernstein_cs([], 10, 0.05).halfwidth == 0.5


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="alpha"):
        bernstein_cs([0.5], 10, 1.0)
    with pytest.raises(ValueError, match="outside"):
        bernstein_cs([1.5], 10, 0.05)
    with pytest.raises(ValueError, match="draws from a population"):
        bernstein_cs([0.5] * 3, 2, 0.05)


def test_a_paired_difference_separates_models_apart_and_ties_models_alike() -> None:
    rng = random.Random(5)
    good = [float(rng.random() < 0.8) for _ in range(400)]
    bad = [float(rng.random() < 0.3) for _ in range(400)]
    diff = difference_cs(good[:200], bad[:150], 400, 0.05)
    assert diff.n == 150 and separated(diff, 0.0) == "above"
    assert separated(difference_cs(bad, good, 400, 0.05), 0.0) == "below"
    same = [0.5] * 300
    assert separated(difference_cs(same, same, 400, 0.05), 0.2) == "tie"
    assert separated(difference_cs(good[:5], bad[:5], 400, 0.05), 0.0) is None


def test_post_stratified_weights_add_up_to_the_plan_and_a_full_run_is_exact() -> None:
    sizes = {"easy": 6, "hard": 4}
    strata = ["easy", "easy", "hard"]
    assert poststratified_weights(strata, sizes).tolist() == [3.0, 3.0, 4.0]
    values = np.array([[1.0], [0.0], [1.0], [1.0], [0.0], [0.0], [1.0], [1.0], [0.0], [1.0]])
    full = ["easy"] * 6 + ["hard"] * 4
    est = stratified_ratio(values, np.ones_like(values), full, sizes, resamples=200)
    assert est.estimate[0] == pytest.approx(0.6)
    assert est.low[0] == pytest.approx(0.6) and est.high[0] == pytest.approx(0.6)
    assert est.label == "estimate from 10 of 10 planned units"
    reps = rao_wu_weights(np.random.default_rng(0), strata, sizes, 50)
    assert reps.shape == (50, 3) and np.allclose(reps[:, 2], 4.0)  # one unit: fixed weight
    with pytest.raises(ValueError, match="does not have"):
        poststratified_weights(["medium"], sizes)


def test_post_stratified_intervals_cover_the_population_value() -> None:
    rng = np.random.default_rng(7)
    sizes = {"a": 200, "b": 100}
    pop = {"a": (rng.random(200) < 0.8).astype(float), "b": (rng.random(100) < 0.3).astype(float)}
    truth = (pop["a"].sum() + pop["b"].sum()) / 300
    hits = 0
    for seed in range(100):
        draw = np.random.default_rng(seed)
        ia, ib = draw.choice(200, 60, replace=False), draw.choice(100, 30, replace=False)
        num = np.concatenate([pop["a"][ia], pop["b"][ib]])[:, None]
        est = stratified_ratio(num, np.ones_like(num), ["a"] * 60 + ["b"] * 30, sizes, resamples=400)
        hits += bool(est.low[0] <= truth <= est.high[0])
    assert hits >= 88, hits


def paired_population(rng: random.Random, n: int, qa: float, qb: float) -> list[float]:
    """Differences of two models' unit scores (shares of 2-6 constraints each), as a sweep pairs them."""
    out = []
    for _ in range(n):
        k = rng.randint(2, 6)
        out.append(
            sum(rng.random() < qa for _ in range(k)) / k - sum(rng.random() < qb for _ in range(k)) / k
        )
    return out


def test_the_sign_test_rarely_orders_a_pair_against_its_population_mean() -> None:
    # Pairs of equal or nearly equal quality, looked at after every draw: a decided sign that
    # disagrees with the population's own mean difference is an error, <= alpha / 2 = 2.5% per pair.
    rng = random.Random(11)
    wrong = decided = 0
    for seed in range(300):
        pop = paired_population(rng, 200, 0.6, 0.6 + 0.02 * (seed % 3))
        mean = sum(pop) / len(pop)
        test = SignTest(len(pop), 0.05)
        for d in rng.sample(pop, len(pop)):
            side = test.add(d)
        decided += side is not None
        wrong += side is not None and (side == "above") != (mean > 0)
    assert wrong <= 0.025 * 300, (wrong, decided)
    assert decided >= 100  # it does decide: a test that never decides is never wrong
    # All differences 0: nothing to bet on, never decided.
    same = SignTest(50, 0.05)
    assert [same.add(0.0) for _ in range(50)] == [None] * 50
    # A difference too small to bet on is known once every unit is drawn (the population mean is).
    close = SignTest(50, 0.05)
    assert [close.add(d) for d in [0.0] * 20 + [-0.01] + [0.0] * 28 + [0.02]] == [None] * 49 + ["above"]


def test_the_sign_test_separates_sooner_than_the_interval_excludes_zero() -> None:
    rng = random.Random(12)
    sign_at, interval_at = [], []
    for _ in range(20):
        a_minus_b = paired_population(rng, 400, 0.68, 0.62)
        test, first = SignTest(400, 0.05), None
        for t, d in enumerate(a_minus_b, 1):
            if test.add(d) is not None and first is None:
                first = t
        sign_at.append(first or 400)
        pd = paired([0.5 + d / 2 for d in a_minus_b], [0.5 - d / 2 for d in a_minus_b], 400, 0.05)
        assert pd.sign.side == test.side  # the same differences, the same test
        cs = next(
            (t for t in range(10, 401, 10) if difference_cs(a_minus_b[:t], [0.0] * t, 400, 0.05).low > 0), 400
        )
        interval_at.append(cs)
    sign_at.sort()
    interval_at.sort()
    assert sign_at[10] <= 0.8 * interval_at[10], (sign_at, interval_at)


def test_bad_sign_test_input_is_refused() -> None:
    with pytest.raises(ValueError, match="alpha"):
        SignTest(10, 0.0)
    with pytest.raises(ValueError, match="outside"):
        SignTest(10, 0.05).add(1.5)
    test = SignTest(1, 0.05)
    test.add(0.5)
    with pytest.raises(ValueError, match="draws from a population"):
        test.add(0.5)
