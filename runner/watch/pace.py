"""Rates over the last seconds of a sweep, from running totals sampled as it goes, and how the pace
achieved compares with the pace the ETA's walk assumed (runner/watch/eta.py). Times are handed in: the live
view samples its clock, tests pass numbers."""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping

# Seconds the totals' calls/s and tokens/min are measured over (the live view and `ifsweep status`).
RATE_WINDOW_S = 20.0
# Seconds the rpm and tpm columns are measured over: the providers' limits are per minute, and a rate
# scaled up from a few seconds can show more than the limit allows (346/300 where the provider saw 99).
LIMIT_WINDOW_S = 60.0
# Seconds over which the achieved pace is compared with the modelled one: long enough to smooth the
# pauses of a limiter, short enough to follow a sweep into a benchmark of another shape.
CALIBRATION_WINDOW_S = 30.0
# No rate from less than this: a pace needs some seconds behind it.
MIN_SPAN_S = 3.0
# A ratio is trusted within these bounds, and only once the modelled side expected this many calls.
MIN_RATIO, MAX_RATIO = 0.02, 2.0
MIN_MODELLED = 5.0


class Window:
    """Samples (time, running totals by name) of the last `span_s` seconds, and one older sample so
    that a rate over the whole span always has a start."""

    def __init__(self, span_s: float = CALIBRATION_WINDOW_S) -> None:
        self.span_s = span_s
        self._samples: deque[tuple[float, dict[str, float]]] = deque()
        self._starts: dict[float, tuple[float, dict[str, float]]] = {}  # by over_s, since the last add

    def add(self, t: float, totals: Mapping[str, float]) -> None:
        self._samples.append((t, dict(totals)))
        self._starts.clear()
        while len(self._samples) > 2 and self._samples[1][0] <= t - self.span_s:
            self._samples.popleft()

    def last(self) -> dict[str, float]:
        """The newest sample's totals ({} before any)."""
        return dict(self._samples[-1][1]) if self._samples else {}

    def _start(self, over_s: float) -> tuple[float, dict[str, float]]:
        """The newest sample at least `over_s` older than the newest (else the oldest); found once
        per sample added, whatever the number of keys asked about."""
        start = self._starts.get(over_s)
        if start is None:
            t1 = self._samples[-1][0]
            start = next((s for s in reversed(self._samples) if s[0] <= t1 - over_s), self._samples[0])
            self._starts[over_s] = start
        return start

    def deltas(self, keys: tuple[str, ...], over_s: float) -> tuple[list[float], float] | None:
        """(change of each key, seconds) from the newest sample back to the first at least `over_s`
        old, or to the oldest that holds every key (keys appear as endpoints start)."""
        if not self._samples:
            return None
        t1, last = self._samples[-1]
        if not _holds(last, keys):
            return None
        start: tuple[float, dict[str, float]] | None = self._start(over_s)
        assert start is not None
        if not _holds(start[1], keys):
            start = None
            for sample in reversed(self._samples):
                if not _holds(sample[1], keys):
                    break
                start = sample
        if start is None or t1 - start[0] < MIN_SPAN_S:
            return None
        return [last[k] - start[1][k] for k in keys], t1 - start[0]

    def per_s(self, key: str, over_s: float = RATE_WINDOW_S) -> float | None:
        """How fast `key` grew over the last `over_s` seconds; None with under MIN_SPAN_S behind it."""
        d = self.deltas((key,), over_s)
        return None if d is None else d[0][0] / d[1]

    def per_min_counted(self, key: str) -> float | None:
        """How much `key` grew in the last LIMIT_WINDOW_S seconds, as a per-minute figure that is never
        scaled up: over a full window it is the measured rate, before one has passed the count so far
        (a limit per minute bounds both). None with under MIN_SPAN_S behind it."""
        d = self.deltas((key,), LIMIT_WINDOW_S)
        return None if d is None else d[0][0] * 60.0 / max(d[1], LIMIT_WINDOW_S)

    def ratio(self, achieved: str, modelled: str, over_s: float = CALIBRATION_WINDOW_S) -> float | None:
        """Growth of `achieved` over growth of `modelled` in the same span, within [MIN_RATIO, MAX_RATIO];
        None while the model expected fewer than MIN_MODELLED calls in it."""
        d = self.deltas((achieved, modelled), over_s)
        if d is None or d[0][1] < MIN_MODELLED:
            return None
        return min(MAX_RATIO, max(MIN_RATIO, d[0][0] / d[0][1]))


def _holds(totals: dict[str, float], keys: tuple[str, ...]) -> bool:
    return all(map(totals.__contains__, keys))  # no generator: this runs per endpoint per refresh
