"""Anytime-valid confidence sequences for the mean of a finite population of scores in [0, 1], sampled
without replacement: intervals that hold at every sample size at once, so a sweep may look after
every unit and stop when it likes (docs/metrics.md gives the formulas and their sources).

The sequence is the predictable plug-in empirical-Bernstein one of Waudby-Smith and Ramdas (JRSS-B
2024, Theorem 2), in the form their without-replacement paper gives it (NeurIPS 2020, Theorem 4): the
t-th draw's conditional mean is (N mu - S_{t-1}) / (N - t + 1) rather than mu, which narrows the
interval as the population is used up and makes it a point once every unit is drawn. Pure functions
over plain sequences; nothing here knows what a score means.

Whether one model is above another is a test, not an interval: `SignTest` bets against "the paired
difference's population mean is 0" in each direction (the betting confidence sequence of WSR 2024,
section 4, in its without-replacement form, evaluated at 0 only: the sequence excludes 0 exactly when
a capital passes 2/alpha). Its bets follow the difference's estimated mean over its variance (GRAPA),
so it separates two models much sooner than the empirical-Bernstein interval excludes 0 (that
sequence is tuned for a narrow interval over all t, not for a sign): `PairedDifference` keeps both,
the test for the sign and the interval for ties and for display.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "BernsteinSequence",
    "Interval",
    "PairedDifference",
    "SignTest",
    "bernstein_cs",
    "bernstein_path",
    "difference_cs",
    "paired",
    "rank_settled",
    "separated",
]

_LAMBDA_MAX = 0.5  # the bets' cap (their c), inside (0, 1)
# The sign test's cap on the share of its capital a draw may lose at worst (WSR's c); any cap in (0, 1)
# is valid. On synthetic paired differences 0.5 decided later where their variance is small and 0.9
# where it is large; on the simulator figure (docs/metrics.md) 0.9 spent 43.2% of the plan, 0.8 42.3%.
_BET_CAP = 0.8


@dataclass(frozen=True, slots=True)
class Interval:
    """A confidence sequence's interval after `n` of `population` draws."""

    low: float
    high: float
    n: int
    population: int

    @property
    def halfwidth(self) -> float:
        return (self.high - self.low) / 2

    @property
    def centre(self) -> float:
        return (self.low + self.high) / 2


def _psi(lam: float) -> float:
    # psi_E(lambda) = (-log(1 - lambda) - lambda) / 4: Fan et al.'s exponential bound, as WSR scale it.
    return (-math.log1p(-lam) - lam) / 4


def bernstein_cs(xs: Sequence[float], population: int, alpha: float, low: float = 0.0) -> Interval:
    """The interval, after the draws `xs` (in draw order, each in [low, low + 1]), for the mean of a
    population of `population` values, holding at every n together with probability >= 1 - alpha."""
    path = bernstein_path(xs, population, alpha, low)
    return path[-1] if path else Interval(low, low + 1.0, 0, population)


def bernstein_path(xs: Sequence[float], population: int, alpha: float, low: float = 0.0) -> list[Interval]:
    """The sequence's interval after each of the draws `xs`, in one pass (`bernstein_cs` is its last)."""
    if len(xs) > population:
        raise ValueError(f"{len(xs)} draws from a population of {population}")
    seq = BernsteinSequence(population, alpha, low)
    return [seq.add(x) for x in xs]


class BernsteinSequence:
    """The sequence draw by draw: `add` takes the next draw and returns the interval after it, in
    constant time (a sweep asks after every unit; `bernstein_path` is this over a list)."""

    __slots__ = (
        "alpha",
        "den",
        "last",
        "log_term",
        "low",
        "mean_hat",
        "num",
        "population",
        "spend",
        "t",
        "total",
        "var_sum",
    )

    def __init__(self, population: int, alpha: float, low: float = 0.0) -> None:
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        self.population, self.alpha, self.low = population, alpha, low
        self.log_term = math.log(2 / alpha)
        self.mean_hat, self.var_sum, self.total = 0.5, 0.25, 0.0  # the predictable estimates' priors (WSR)
        self.num = self.den = self.spend = 0.0
        self.t = 0
        self.last = Interval(low, low + 1.0, 0, population)

    def add(self, raw: float) -> Interval:
        t = self.t + 1
        if t > self.population:
            raise ValueError(f"{t} draws from a population of {self.population}")
        x = raw - self.low
        if not -1e-12 <= x <= 1 + 1e-12:
            raise ValueError(f"draw {t} is {raw}, outside [{self.low}, {self.low + 1}]")
        n_left = self.population - t + 1
        sigma2 = self.var_sum / t  # (1/4 + sum of squared deviations before t) / t
        lam = min(math.sqrt(2 * self.log_term / (sigma2 * t * math.log(1 + t))), _LAMBDA_MAX)
        # Draw t's conditional mean is (N mu - S_{t-1}) / (N - t + 1): mu weighs N / (N - t + 1).
        self.num += lam * (x + self.total / n_left)
        self.den += lam * self.population / n_left
        self.spend += 4 * (x - self.mean_hat) ** 2 * _psi(lam)
        self.total += x
        self.mean_hat = (0.5 + self.total) / (t + 1)
        self.var_sum += (x - self.mean_hat) ** 2
        self.t = t
        centre, margin = self.num / self.den, (self.log_term + self.spend) / self.den
        lo, hi = max(0.0, centre - margin), min(1.0, centre + margin)
        if t == self.population:  # every value drawn: the mean is known
            lo = hi = self.total / self.population
        self.last = Interval(lo + self.low, hi + self.low, t, self.population)
        return self.last


def difference_cs(a: Sequence[float], b: Sequence[float], population: int, alpha: float) -> Interval:
    """The interval for mean(a) - mean(b) over the population, from the pairs both have drawn (the
    common prefix of two models walking one order): the differences lie in [-1, 1], so their halves
    lie in [-1/2, 1/2], a range of one."""
    n = min(len(a), len(b))
    halves = [(a[i] - b[i]) / 2 for i in range(n)]
    half = bernstein_cs(halves, population, alpha, low=-0.5)
    return Interval(2 * half.low, 2 * half.high, n, population)


class SignTest:
    """Whether the mean of a population of `population` values in [-1, 1], drawn without replacement,
    is above or below 0, decided after any draw with error probability <= alpha / 2 each way (<= alpha
    in all when the mean is 0), however often it is looked at.

    Two capitals bet against the mean being 0: `up` gains when a draw exceeds its conditional mean
    under that null, c_t = (N * 0 - S_{t-1}) / (N - t + 1), `down` when it falls short. Each is a
    nonnegative supermartingale under any population mean on the other side of 0 (a bet lambda in
    [0, cap / (1 +- c_t)] never loses more than `cap` of it), so by Ville's inequality it passes 2/alpha
    with probability <= alpha/2; `side` is fixed once one has. The bets are GRAPA's: the estimated
    edge over the null, N mu_hat / (N - t + 1), over (variance + edge^2), from the draws before t."""

    __slots__ = ("log_down", "log_up", "population", "side", "sq", "t", "threshold", "total")

    def __init__(self, population: int, alpha: float) -> None:
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        self.population, self.threshold = population, math.log(2 / alpha)
        self.log_up = self.log_down = self.total = self.sq = 0.0
        self.t = 0
        self.side: str | None = None

    def add(self, d: float) -> str | None:
        """Take the next draw; "above", "below" or None (not decided yet)."""
        t = self.t + 1
        if t > self.population:
            raise ValueError(f"{t} draws from a population of {self.population}")
        if not -1 - 1e-12 <= d <= 1 + 1e-12:
            raise ValueError(f"draw {t} is {d}, outside [-1, 1]")
        if self.side is None:
            self.side = self._bet(d, t)
        self.t, self.total, self.sq = t, self.total + d, self.sq + d * d
        if self.side is None:
            self.side = self._known()
        return self.side

    def _known(self) -> str | None:
        """The sign once no remainder in [-1, 1] could undo the total (at the last draw: its sign)."""
        left = self.population - self.t
        if self.total > left:
            return "above"
        return "below" if self.total < -left else None

    def _bet(self, d: float, t: int) -> str | None:
        n_left = self.population - t + 1
        c = -self.total / n_left  # in [-1, 1]: `_known` has decided otherwise
        mean = self.total / t  # shrunk towards 0 (the null) as if by one draw of 0
        var = max((0.25 + self.sq - self.total * mean) / t, 1e-4)  # prior 1/4 as one draw
        edge = self.population * mean / n_left
        if 1 + c > 0 and edge > 0:
            self.log_up += math.log1p(min(edge / (var + edge * edge), _BET_CAP / (1 + c)) * (d - c))
        if 1 - c > 0 and edge < 0:
            self.log_down += math.log1p(min(-edge / (var + edge * edge), _BET_CAP / (1 - c)) * (c - d))
        if self.log_up >= self.threshold:
            return "above"
        return "below" if self.log_down >= self.threshold else None


class PairedDifference:
    """Two models' paired unit scores, pair by pair: the sign test of mean(a) - mean(b) and the
    empirical-Bernstein sequence of the difference (halved into [-1/2, 1/2], a range of one)."""

    __slots__ = ("seq", "sign")

    def __init__(self, population: int, alpha: float) -> None:
        self.seq = BernsteinSequence(population, alpha, low=-0.5)
        self.sign = SignTest(population, alpha)

    def add(self, a: float, b: float) -> None:
        self.seq.add((a - b) / 2)
        self.sign.add(a - b)

    @property
    def interval(self) -> Interval:
        half = self.seq.last
        return Interval(2 * half.low, 2 * half.high, half.n, half.population)

    def verdict(self, tie: float) -> str | None:
        """ "above" / "below" once the sign test has decided, "tie" when the difference's interval
        lies within [-tie, tie], else None (not settled yet)."""
        if self.sign.side is not None:
            return self.sign.side
        # Only the tie is read off the interval: a sign from it too would spend alpha twice.
        iv = self.interval
        return "tie" if tie > 0 and -tie <= iv.low and iv.high <= tie else None


def paired(a: Sequence[float], b: Sequence[float], population: int, alpha: float) -> PairedDifference:
    """The `PairedDifference` of the pairs both have drawn (the common prefix of one order)."""
    pd = PairedDifference(population, alpha)
    for x, y in zip(a, b, strict=False):
        pd.add(x, y)
    return pd


def separated(diff: Interval, tie: float) -> str | None:
    """ "above" / "below" when the difference's interval excludes 0, "tie" when it lies within
    [-tie, tie], else None (not settled yet)."""
    if diff.low > 0:
        return "above"
    if diff.high < 0:
        return "below"
    if tie > 0 and -tie <= diff.low and diff.high <= tie:
        return "tie"
    return None


def rank_settled(
    scores: Mapping[str, Sequence[float]], population: int, confidence: float, tie: float = 0.0
) -> dict[str, bool]:
    """Which models' ranks are settled: ranked by their mean so far, a model is settled when each
    neighbour (the next above and below) is separated from it at `confidence` (the sign test has
    decided) or tied with it (the difference's sequence lies within `tie`). `scores[m]`: model m's
    unit scores in [0, 1], in the order every model walks; pairs use the units both have."""
    alpha = 1 - confidence
    ranked = sorted(scores, key=lambda m: -sum(scores[m]) / max(len(scores[m]), 1))
    out: dict[str, bool] = {}
    for i, model in enumerate(ranked):
        neighbours = [ranked[j] for j in (i - 1, i + 1) if 0 <= j < len(ranked)]
        out[model] = all(
            paired(scores[model], scores[other], population, alpha).verdict(tie) is not None
            for other in neighbours
        )
    return out
