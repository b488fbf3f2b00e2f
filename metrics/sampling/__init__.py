"""The statistics of a partial run, sampled from its plan in the seeded order (runner/engine/order.py):
anytime-valid confidence sequences and the rule that says a model's rank is settled (`confseq`), and
post-stratified estimates with their bootstrap (`stratified`). Pure functions over numbers and NumPy
arrays; they import nothing else of ifsweep (and not Polars)."""

from ifsweep.metrics.sampling.confseq import (
    BernsteinSequence,
    Interval,
    PairedDifference,
    SignTest,
    bernstein_cs,
    bernstein_path,
    difference_cs,
    paired,
    rank_settled,
    separated,
)
from ifsweep.metrics.sampling.stratified import (
    StratifiedEstimate,
    poststratified_weights,
    rao_wu_weights,
    replicate_interval,
    sample_gaps,
    stratified_ratio,
    unit_weights,
)

__all__ = [
    "BernsteinSequence",
    "Interval",
    "PairedDifference",
    "SignTest",
    "StratifiedEstimate",
    "bernstein_cs",
    "bernstein_path",
    "difference_cs",
    "paired",
    "poststratified_weights",
    "rank_settled",
    "rao_wu_weights",
    "replicate_interval",
    "sample_gaps",
    "separated",
    "stratified_ratio",
    "unit_weights",
]
