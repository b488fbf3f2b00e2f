"""`[run] stop_when` on the board and in `ifsweep status`: each model's interval of its mean unit score
per benchmark and whether it is settled, from the watch's view (runner/engine/stopping.py,
StopWatch.view), live or as summary.json keeps it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["stop_text"]


def stop_text(view: Mapping[str, Any]) -> str:
    """Lines: the rule and how many models it settled, then one line per model."""
    models = view.get("models")
    if not isinstance(models, list):
        raise ValueError("stop_when: field 'models': expected a list")
    settled = sum(bool(m.get("settled")) for m in models)
    lines = [f"stop_when {view.get('rule', '?')}: {settled} of {len(models)} models settled"]
    for m in models:
        parts = [
            f"{b['benchmark']} [{100 * b['low']:.1f}, {100 * b['high']:.1f}] {b['units']}/{b['planned']}"
            + (" settled" if b.get("settled") else "")
            for b in m.get("benchmarks", [])
        ]
        state = "settled" if m.get("settled") else "running"
        lines.append(f"  {m['model']} {state}: {'; '.join(parts)}")
    if "pairs_done" in view:
        lines.append(
            f"  {view['pairs_done']} of {view['pairs_planned']} planned pairs; "
            f"${view['spent_usd']:.4f} spent, full plan ~${view['full_plan_usd_estimate']:.4f}"
        )
    return "\n".join(lines)
