"""Estimates of a planned population from the units a partial run has done: post-stratified by the
strata's planned sizes, with a bootstrap within strata that carries the finite-population correction
(docs/metrics.md: the estimator, its interval and what they assume).

A statistic here is a ratio of unit sums, sum(w * num) / sum(w * den) per column, which is how every
leaf statistic of the engine is made (metrics/bootstrap.py evaluates any Structure under unit
weights, so these weights serve it as they are). A unit done in stratum h of planned size N_h, where
n_h units are done, weighs N_h / n_h. The interval is the Rao-Wu rescaling bootstrap (Rao and Wu,
JASA 1988; Rao, Wu and Yue, Survey Methodology 1992): per stratum, n_h - 1 of its n_h units are drawn
with replacement, and unit i's weight becomes (N_h / n_h) * (1 - lam_h + lam_h * n_h / (n_h - 1) *
m_i), with m_i its draws and lam_h = sqrt(1 - n_h / N_h): for a mean, the replicate variance is the
stratified estimator's variance with its finite-population correction. A stratum done in full
(lam_h = 0) adds no variance; strata with one unit done cannot estimate their own, so they are
resampled as one pooled stratum (`variance_groups`: collapsed strata); a stratum with none done is
not estimated. The interval is the studentized bootstrap within strata (`studentized_interval`:
t* = (theta* - theta) / se*, se the linearized stratified standard error of the units'
contributions, se* the same of each replicate's draws; docs/metrics.md says why and what it assumes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import numpy.typing as npt

__all__ = [
    "Replicates",
    "StratifiedEstimate",
    "linearized_variance",
    "poststratified_weights",
    "rao_wu",
    "rao_wu_weights",
    "ratio_contributions",
    "replicate_interval",
    "sample_gaps",
    "stratified_ratio",
    "studentized_interval",
    "unit_weights",
]

FloatArray = npt.NDArray[np.float64]
Groups = tuple[tuple[npt.NDArray[np.int64], float], ...]  # variance groups: members, 1 - n / N


@dataclass(frozen=True, slots=True)
class StratifiedEstimate:
    """Per column: the estimate and its interval. `done` / `planned` count units;
    `unseen`: planned strata without a done unit (left out of the estimate); `single`: strata with
    one unit done (their sampling variance cannot be estimated)."""

    estimate: FloatArray
    low: FloatArray
    high: FloatArray
    done: int
    planned: int
    unseen: tuple[str, ...]
    single: tuple[str, ...]

    @property
    def label(self) -> str:
        return f"estimate from {self.done} of {self.planned} planned units"


def _counts(strata: Sequence[str], sizes: Mapping[str, int]) -> dict[str, int]:
    done: dict[str, int] = {}
    for h in strata:
        if h not in sizes:
            raise ValueError(f"unit of stratum {h!r}, which the plan does not have")
        done[h] = done.get(h, 0) + 1
    for h, n in done.items():
        if n > sizes[h]:
            raise ValueError(f"stratum {h!r}: {n} units done of {sizes[h]} planned")
    return done


def poststratified_weights(strata: Sequence[str], sizes: Mapping[str, int]) -> FloatArray:
    """Each done unit's weight N_h / n_h (`strata[i]`: unit i's stratum; `sizes`: planned units)."""
    done = _counts(strata, sizes)
    return np.array([sizes[h] / done[h] for h in strata], dtype=np.float64)


@dataclass(frozen=True, slots=True)
class Replicates:
    """The Rao-Wu bootstrap of a stratified sample (module docstring): `weights` (resamples x units),
    and what the studentized interval needs of it: each replicate's draws (resamples x units, small
    counts as uint16; 0 for a unit outside the variance groups) and each variance group's members and
    1 - n / N."""

    weights: FloatArray
    draws: npt.NDArray[np.uint16]
    groups: Groups


def rao_wu(
    rng: np.random.Generator, strata: Sequence[str], sizes: Mapping[str, int], resamples: int
) -> Replicates:
    """`resamples` replicates of the Rao-Wu rescaling bootstrap (module docstring)."""
    done = _counts(strata, sizes)
    base = poststratified_weights(strata, sizes)
    out = np.tile(base, (resamples, 1))
    every = np.zeros((resamples, len(strata)), dtype=np.uint16)
    names = sorted(done)
    at = {h: k for k, h in enumerate(names)}
    codes = np.array([at[h] for h in strata], dtype=np.int64)
    groups = []
    for group in variance_groups(done, sizes):
        members = np.flatnonzero(np.isin(codes, [at[h] for h in group]))
        n, planned = members.size, sum(sizes[h] for h in group)
        lam = np.sqrt(1 - n / planned)
        # n - 1 draws with replacement, counted per unit (a uniform multinomial, as a bincount: a
        # tenth of rng.multinomial's time on a few hundred units).
        picks = rng.integers(0, n, size=(resamples, n - 1)) + (np.arange(resamples) * n)[:, None]
        draws = np.bincount(picks.ravel(), minlength=resamples * n).reshape(resamples, n)
        out[:, members] = base[members] * (1 - lam + lam * n / (n - 1) * draws)
        every[:, members] = np.minimum(draws, np.iinfo(np.uint16).max)  # a count past 65535: n > 65536
        groups.append((members, 1 - n / planned))
    return Replicates(out, every, tuple(groups))


def rao_wu_weights(
    rng: np.random.Generator, strata: Sequence[str], sizes: Mapping[str, int], resamples: int
) -> FloatArray:
    """`resamples` x units replicate weights of the Rao-Wu rescaling bootstrap (module docstring)."""
    return rao_wu(rng, strata, sizes, resamples).weights


def variance_groups(done: Mapping[str, int], sizes: Mapping[str, int]) -> list[list[str]]:
    """The strata the bootstrap resamples within: each stratum with 2+ units done on its own, and the
    thin ones (one unit done of several planned) pooled into one (the collapsed-strata estimator,
    Cochran 1977, 5A.12: it overstates the variance by the spread of the pooled strata's means, so
    the interval errs wide rather than leaving those strata out). A stratum done in full adds no
    variance; a lone thin stratum cannot be pooled and is left out (`StratifiedEstimate.single`)."""
    groups = [[h] for h, n in sorted(done.items()) if n >= 2 and n < sizes[h]]
    thin = [h for h, n in sorted(done.items()) if n == 1 and sizes[h] > 1]
    if len(thin) >= 2:
        groups.append(thin)
    return groups


def stratified_ratio(
    num: FloatArray,
    den: FloatArray,
    strata: Sequence[str],
    sizes: Mapping[str, int],
    *,
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> StratifiedEstimate:
    """The post-stratified estimate of sum(num) / sum(den) over the planned population, per column
    (`num`, `den`: units x columns, the done units' sums), with its interval."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    w, replicates = unit_weights(np.random.default_rng(seed), strata, sizes, resamples)
    estimate = _ratio(w @ num, w @ den)
    reps = _ratio(replicates.weights @ num, replicates.weights @ den)
    contrib = ratio_contributions(w, num, den)
    low, high = studentized_interval(estimate, reps, contrib, replicates.draws, replicates.groups, confidence)
    unseen, single = sample_gaps(strata, sizes)
    return StratifiedEstimate(
        estimate=estimate,
        low=low,
        high=high,
        done=len(strata),
        planned=sum(sizes.values()),
        unseen=unseen,
        single=single,
    )


def sample_gaps(strata: Sequence[str], sizes: Mapping[str, int]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """What an estimate from these done units cannot speak for: the planned strata without a done unit
    (left out of the estimate), and a thin stratum the interval leaves out (one unit done of several,
    with no other thin stratum to pool with: `variance_groups`)."""
    done = _counts(strata, sizes)
    thin = tuple(sorted(h for h, n in done.items() if n == 1 and sizes[h] > 1))
    return tuple(sorted(h for h in sizes if h not in done)), thin if len(thin) == 1 else ()


def unit_weights(
    rng: np.random.Generator, strata: Sequence[str], sizes: Mapping[str, int], resamples: int
) -> tuple[FloatArray, Replicates]:
    """The done units' post-stratified weights and their Rao-Wu replicates: what `stratified_ratio`
    and the report's estimates (metrics/sampling/estimates.py) weigh units by."""
    return poststratified_weights(strata, sizes), rao_wu(rng, strata, sizes, resamples)


def replicate_interval(
    estimate: FloatArray, reps: FloatArray, units: int, strata: int, confidence: float
) -> tuple[FloatArray, FloatArray]:
    """estimate -+ t_{n-H} sd(replicates), per column (`units` done in `strata` strata): the interval
    for a figure without linearized contributions (`studentized_interval` is the one estimates use)."""
    if reps.shape[0] < 2:
        return estimate.copy(), estimate.copy()
    with np.errstate(invalid="ignore"):
        spread = _t_quantile(confidence, units - strata) * np.nanstd(reps, axis=0, ddof=1)
    return estimate - spread, estimate + spread


def linearized_variance(
    contrib: FloatArray, groups: Sequence[tuple[npt.NDArray[np.int64], float]]
) -> FloatArray:
    """Per column, the stratified variance of a sum of per-unit contributions (units x columns):
    sum over variance groups of (1 - n_g / N_g) n_g s_g^2, s_g^2 the group's sample variance."""
    v = np.zeros(contrib.shape[1])
    for members, fpc in groups:
        e = contrib[members]
        v += fpc * members.size * np.var(e, axis=0, ddof=1)
    return v


def studentized_interval(
    estimate: FloatArray,
    reps: FloatArray,
    contrib: FloatArray,
    draws: npt.NDArray[np.uint16],
    groups: Groups,
    confidence: float,
) -> tuple[FloatArray, FloatArray]:
    """The bootstrap-t interval within strata, per column: estimate - q*_{hi} se, estimate - q*_{lo} se,
    q* the quantiles of t* = (theta* - theta) / se* over the replicates (`reps`: theta* per replicate
    and column; `draws`, `groups`: their Replicates'). `contrib` (units x columns): each unit's
    linearized contribution to the estimate (theta - its limit ~ their sum), whose stratified variance
    is se^2 (`linearized_variance`), and under a replicate's draws se*^2: the same variance of the
    drawn units (docs/metrics.md)."""
    se = np.sqrt(linearized_variance(contrib, groups))
    var_star = _replicate_variance(contrib, draws, groups, reps.shape[0])
    # A replicate whose draws show no spread (a stratum of one or two successes, every draw missing
    # them) would have se* = 0 and t* infinite: its se* is the least any replicate of the column
    # showed, so t* stays large but finite and the interval reaches as far as that spread says.
    positive = np.where(var_star > 0, var_star, np.inf).min(axis=0)
    var_star = np.where(var_star > 0, var_star, np.where(np.isfinite(positive), positive, 0.0)[None, :])
    moved = reps != estimate[None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(moved, (reps - estimate[None, :]) / np.sqrt(var_star), 0.0)  # unmoved: the centre
    tail = (1 - confidence) / 2
    lo, hi = np.full(estimate.shape, np.nan), np.full(estimate.shape, np.nan)
    ok = ~np.isnan(t).all(axis=0) & ~np.isnan(estimate)
    if ok.any():
        q = _order_statistics(t[:, ok], (tail, 1 - tail))
        with np.errstate(invalid="ignore"):
            lo[ok], hi[ok] = estimate[ok] - q[1] * se[ok], estimate[ok] - q[0] * se[ok]
    # Where no replicate's draws showed any spread but a tail's worth moved, the pivot is undefined;
    # the t interval on the replicates' spread stands in.
    blind = ((var_star <= 0) & moved).mean(axis=0) >= tail
    if blind.any():
        df = sum(members.size for members, _ in groups) - len(groups)
        t_lo, t_hi = replicate_interval(estimate, reps, df, 0, confidence)
        lo, hi = np.where(blind, t_lo, lo), np.where(blind, t_hi, hi)
    return lo, hi


def _replicate_variance(
    contrib: FloatArray, draws: npt.NDArray[np.uint16], groups: Groups, resamples: int
) -> FloatArray:
    """se*^2 per replicate and column: the linearized stratified variance of the units each replicate
    drew (resamples x columns)."""
    var_star = np.zeros((resamples, contrib.shape[1]))
    for members, fpc in groups:
        n = members.size
        m, e = draws[:, members].astype(np.float64), contrib[members]
        if n < 3:  # one unit drawn: its sample says nothing of the spread; the sample's own stands in
            var_star += fpc * n * np.var(e, axis=0, ddof=1)[None, :]
            continue
        s1, s2 = m @ e, m @ (e * e)
        # The draws' sample variance (n - 1 drawn, divisor n - 2), rescaled by n / (n - 1) so that its
        # bootstrap mean is the sample's s^2 (the draws come from the sample's n values).
        var_star += fpc * n * (n / (n - 1)) * np.maximum(s2 - s1 * s1 / (n - 1), 0.0) / (n - 2)
    return var_star


def _t_quantile(confidence: float, df: int) -> float:
    """Student's t quantile, by the Cornish-Fisher expansion to 1/df^2 (Abramowitz and Stegun
    26.7.5): within 0.5% of the exact value from 5 degrees of freedom on."""
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    if df < 1:
        return z
    g1 = (z**3 + z) / 4
    g2 = (5 * z**5 + 16 * z**3 + 3 * z) / 96
    return float(z + g1 / df + g2 / df**2)


def _order_statistics(x: FloatArray, probs: Sequence[float]) -> FloatArray:
    """Per column, the inverted-CDF quantiles of its non-NaN values (len(probs) x columns): the k-th
    smallest, k = ceil(p n); one sort for every column (np.nanquantile loops over the columns)."""
    ordered = np.sort(x, axis=0)  # NaN last
    n = (~np.isnan(x)).sum(axis=0)
    cols = np.arange(x.shape[1])
    out = np.full((len(probs), x.shape[1]), np.nan)
    for i, p in enumerate(probs):
        k = np.clip(np.ceil(p * n).astype(np.int64) - 1, 0, None)
        out[i] = np.where(n > 0, ordered[np.minimum(k, x.shape[0] - 1), cols], np.nan)
    return out


def ratio_contributions(w: FloatArray, num: FloatArray, den: FloatArray) -> FloatArray:
    """Each unit's linearized contribution to sum(w num) / sum(w den), per column (units x columns):
    w_i (num_i - theta den_i) / sum(w den) (Woodruff's linearization of a ratio; 0 where undefined)."""
    d = w @ den
    theta = _ratio(w @ num, d)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = w[:, None] * (num - theta[None, :] * den) / d[None, :]
    return np.where(np.isfinite(out), out, 0.0)


def _ratio(num: FloatArray, den: FloatArray) -> FloatArray:
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, num / np.where(den > 0, den, 1.0), np.nan)
