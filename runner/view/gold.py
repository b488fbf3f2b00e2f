"""Gold labels in the viewer (`ifsweep view RUN_DIR --gold FILE`): the gold file bound to the run as
`ifsweep audit` binds it (runner/commands/audit.load_gold: the same checks, a complete instance's
constraints only, annotators reduced to their majority), kept as two masks per pair like the judges'
marks (bit i: constraint i), so the list's filter "judge disagrees with gold" is a bit test, the
instance page shows the gold beside each judge's verdict, and the overview counts each judge against
it (docs/design/viewer.md, "Gold")."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ifsweep.runner.view.html import esc, table
from ifsweep.runner.view.marks import Entry, Mark

__all__ = ["GoldMarks", "audit_html", "disagrees", "gold_off", "load_gold_marks"]

Pair = tuple[str, str, str]  # benchmark, model, instance_id


@dataclass(frozen=True, slots=True)
class GoldMarks:
    """Per pair with gold, the constraints gold says are satisfied (`yes`) and not (`no`)."""

    source: str
    masks: dict[Pair, tuple[int, int]] = field(default_factory=dict)

    def of(self, bench: str, model: str, instance_id: str) -> tuple[int, int] | None:
        return self.masks.get((bench, model, instance_id))


def load_gold_marks(run_dir: Path, path: Path) -> GoldMarks:
    """The gold file's labels on the run's pairs (a GoldError, exit 2, names a bad row)."""
    from ifsweep.runner.commands.audit import load_gold
    from ifsweep.runner.store.current import read_run

    rows = read_run(run_dir).rows
    assert rows is not None
    found = load_gold(run_dir, path, rows.collect())
    masks: dict[Pair, tuple[int, int]] = {}
    for b, m, i, idx, g in found.labels.select(
        "benchmark", "model", "instance_id", "constraint_idx", "gold"
    ).iter_rows():
        yes, no = masks.get((str(b), str(m), str(i)), (0, 0))
        bit = 1 << int(idx)
        masks[(str(b), str(m), str(i))] = (yes | bit, no) if g else (yes, no | bit)
    return GoldMarks(str(path), masks)


def gold_off(mark: Mark, gold: tuple[int, int]) -> int:
    """The constraints `mark`'s judge decided against gold (satisfied where gold says no, or failed
    where it says yes), as a mask."""
    yes, no = gold
    return (mark.satisfied & no) | (mark.failed & yes)


def disagrees(entry: Entry, gold: tuple[int, int] | None, judge: str = "") -> bool:
    """Whether a judge (`judge`, or any) decided some constraint of the pair against its gold."""
    if gold is None:
        return False
    return any(gold_off(m, gold) for m in entry.marks if not judge or (m.judge or "") == judge)


def audit_html(
    gold: GoldMarks, groups: Iterable[tuple[tuple[str, str], Iterable[Entry]]], judges: Sequence[str | None]
) -> str:
    """The overview's audit section: per benchmark and judge, over the constraints both decided, the
    judge's agreement with gold, its false-yes rate (yes where gold says no) and false-no rate."""
    counts: dict[tuple[str, str | None], list[int]] = {}
    for (bench, model), entries in groups:
        for e in entries:
            g = gold.of(bench, model, e.instance_id)
            if g is None:
                continue
            yes, no = g
            for m in e.marks:
                c = counts.setdefault((bench, m.judge), [0, 0, 0, 0, 0])
                c[0] += 1
                c[1] += (m.satisfied & yes).bit_count()  # both yes
                c[2] += (m.failed & no).bit_count()  # both no
                c[3] += (m.satisfied & no).bit_count()  # false yes
                c[4] += (m.failed & yes).bit_count()  # false no
    rows = []
    for (bench, judge), (pairs, tp, tn, fy, fn) in sorted(
        counts.items(), key=lambda kv: (kv[0][0], str(kv[0][1]))
    ):
        units = tp + tn + fy + fn
        rows.append(
            [
                esc(bench),
                esc(judge or "rules"),
                str(pairs),
                str(units),
                _share(tp + tn, units),
                _share(fy, fy + tn),
                _share(fn, fn + tp),
            ]
        )
    head = [
        "benchmark",
        "judge",
        "pairs with gold",
        "constraints",
        "agrees with gold",
        "false-yes",
        "false-no",
    ]
    body = table(head, rows, "grid audit") if rows else "<p>No judge verdict on a gold constraint yet.</p>"
    note = (
        f"Against gold: {gold.source} ({len(gold.masks)} pairs). The list's filter 'judge disagrees with "
        "gold' finds the pairs; `ifsweep audit` gives these with intervals."
    )
    return (
        '<section class="audit" id="audit"><h2>Judge audit</h2>'
        f'<p class="muted">{esc(note)}</p>{body}</section>'
    )


def _share(k: int, n: int) -> str:
    return f"{k / n:.3f} ({k} of {n})" if n else "n/a"
