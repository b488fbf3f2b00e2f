"""A Structure (metrics/bootstrap.py) cut down to the statistics some columns need and the units some
weights reach: what the estimates of a partial run evaluate per model and per set of shared units, so
that R replicates cost R x (its units) x (its statistics), not R x (every unit) x (every model's)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ifsweep.metrics.bootstrap import FloatArray, Layer, Structure
from ifsweep.metrics.sampling.stratified import ratio_contributions

__all__ = ["Restrictor", "contributions"]

IntArray = npt.NDArray[np.int64]


class Restrictor:
    """Cuts of one Structure; each layer's edge -> parent column found once (the incidence matrices
    span every model's statistics, so scanning them per cut cost more than the cut's evaluation)."""

    def __init__(self, s: Structure) -> None:
        self.s = s
        self.edge_parent = [layer.parent_idx[layer.incidence.argmax(axis=1)] for layer in s.layers]

    def _needed(self, cols: IntArray) -> npt.NDArray[np.bool_]:
        """The columns `cols` are made from: themselves and, layer by layer down, their children."""
        need = np.zeros(self.s.keys.height, dtype=np.bool_)
        need[cols] = True
        for layer, parent in zip(reversed(self.s.layers), reversed(self.edge_parent), strict=True):
            need[layer.child_idx[need[parent]]] = True
        return need

    def __call__(self, cols: IntArray, rows: IntArray) -> tuple[Structure, IntArray]:
        """(the structure of `cols` over the units `rows`, where `cols` are in it). Leaves come first and
        each layer's parents after the layers below, as in the whole; a parent keeps its children."""
        s = self.s
        need = self._needed(cols)
        leaves = np.flatnonzero(need[: s.num.shape[1]])
        new_at = np.full(s.keys.height, -1, dtype=np.int64)
        new_at[leaves] = np.arange(leaves.size)
        order = [leaves]
        layers: list[Layer] = []
        size = leaves.size
        for layer, parent in zip(s.layers, self.edge_parent, strict=True):
            kept = np.flatnonzero(need[layer.parent_idx])
            if kept.size == 0:
                continue
            new_at[layer.parent_idx[kept]] = size + np.arange(kept.size)
            edges = np.flatnonzero(need[parent])
            layers.append(
                Layer(
                    child_idx=new_at[layer.child_idx[edges]],
                    incidence=np.ascontiguousarray(layer.incidence[np.ix_(edges, kept)]),
                    parent_idx=new_at[layer.parent_idx[kept]],
                )
            )
            order.append(layer.parent_idx[kept])
            size += kept.size
        keys = s.keys[np.concatenate(order)]
        sub = Structure(keys, s.num[np.ix_(rows, leaves)], s.den[np.ix_(rows, leaves)], tuple(layers))
        return sub, new_at[cols]


def contributions(s: Structure, w: FloatArray, point: FloatArray) -> FloatArray:
    """Each unit's linearized contribution to every statistic of `s` under weights `w` (units x stats;
    `point`: the statistics under `w`, as `evaluate` gives them): a leaf's by `ratio_contributions`, a
    parent's the mean of its defined children's, as the parent is the mean of their values."""
    n_leaf = s.num.shape[1]
    out = np.zeros((s.num.shape[0], s.keys.height))
    out[:, :n_leaf] = ratio_contributions(w, s.num, s.den)
    for layer in s.layers:
        ok = ~np.isnan(point[layer.child_idx])
        count = ok.astype(np.float64) @ layer.incidence
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = (out[:, layer.child_idx] * ok[None, :]) @ layer.incidence / count[None, :]
        out[:, layer.parent_idx] = np.where(count[None, :] > 0, mean, 0.0)
    return out
