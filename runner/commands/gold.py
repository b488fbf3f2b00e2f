"""Gold labels a user gave: a JSONL, CSV or Parquet file, one row per labelled constraint
(docs/metrics.md, "Gold files"), read, checked against the run it labels, and reduced to one label per
unit.

Read (`read_gold`): every row's fields are checked and a bad one is a `GoldError` naming the file, the
line (JSONL, CSV: 1-based, where the row starts) or row (Parquet) and the field. Columns the format does
not name (a labelling sheet's instruction, constraint and answer) are ignored; a row whose `gold` is
empty is a constraint not labelled yet.

Bound to a run (`bind_gold`): a row must name an instance the run has and one of its constraints; a
row's `response_sha256` must be the sha256 of the answer stored for that instance (else refused, naming
the row); several annotators of one unit give its majority (a tie leaves the unit unlabelled) and their
agreement; an instance counts as gold only when every one of its constraints is labelled, and the
others are left out and counted.
"""

from __future__ import annotations

import csv
import hashlib
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ifsweep.runner.errors import UsageError

if TYPE_CHECKING:
    import polars as pl

    from ifsweep.metrics import AgreementStat

__all__ = ["GOLD_FIELDS", "GoldError", "GoldRow", "GoldSet", "answer_sha256", "bind_gold", "read_gold"]

GOLD_FIELDS = (
    "benchmark",
    "model",
    "instance_id",
    "instruction_idx",
    "constraint_idx",
    "gold",
    "response_sha256",
    "annotator",
    "sample",
    "inclusion_prob",
)
_REQUIRED = ("benchmark", "model", "instance_id", "constraint_idx")
_SAMPLES = ("random", "stratified")
_SHA_RE = re.compile(r"^[0-9a-f]{64}$")
_TRUE = {"true", "1", "yes", "y"}
_FALSE = {"false", "0", "no", "n"}
# benchmark, model, instance_id, instruction_idx, constraint_idx (a constraint's identity: CONSTRAINT_KEY)
Unit = tuple[str, str, str, int | None, int]
Place = tuple[int | None, int]  # (instruction_idx, constraint_idx) within an instance


class GoldError(UsageError):
    """A gold file that does not match its format or its run; the message says where."""


@dataclass(frozen=True, slots=True)
class GoldRow:
    """One labelled constraint as read; `where` is "FILE: line N" (or "row N" for Parquet)."""

    where: str
    benchmark: str
    model: str
    instance_id: str
    constraint_idx: int
    gold: bool | None  # None: the row's gold is empty (a sheet not labelled there yet)
    instruction_idx: int | None = None
    response_sha256: str | None = None
    annotator: str | None = None
    sample: str | None = None
    inclusion_prob: float | None = None

    @property
    def unit(self) -> Unit:
        return (self.benchmark, self.model, self.instance_id, self.instruction_idx, self.constraint_idx)


@dataclass(frozen=True, slots=True)
class GoldSet:
    """A gold file bound to a run: `labels` one row per unit of a complete gold instance (GOLD_UNIT
    columns, `gold`, `sample`, `inclusion_prob`); what was left out and why; the annotators' agreement."""

    source: str
    labels: pl.DataFrame
    rows: int  # rows read
    instances: int  # complete gold instances
    partial: int  # instances with some constraint unlabelled (or tied), left out
    tied: int  # units whose annotators split evenly
    annotators: tuple[str, ...]
    agreement: tuple[AgreementStat, ...] = field(default=())

    def summary(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "rows": self.rows,
            "instances": self.instances,
            "units": self.labels.height,
            "partial_instances_left_out": self.partial,
            "tied_units": self.tied,
            "annotators": list(self.annotators),
            "annotator_agreement": [s.as_json() for s in self.agreement],
        }


# ------------------------------------------------------------------------------------------ reading


def read_gold(path: Path) -> list[GoldRow]:
    """Every row of a gold file (by suffix: .jsonl / .json, .csv, .parquet), checked."""
    path = Path(path)
    if not path.is_file():
        raise GoldError(f"{path}: no such gold file")
    suffix = path.suffix.lower()
    if suffix in (".jsonl", ".json", ".ndjson"):
        records = _jsonl(path)
    elif suffix == ".csv":
        records = _csv(path)
    elif suffix == ".parquet":
        records = _parquet(path)
    else:
        raise GoldError(f"{path}: a gold file is .jsonl, .csv or .parquet, not {suffix or 'no suffix'!r}")
    rows = [_row(where, rec, from_text=suffix == ".csv") for where, rec in records]
    if not rows:
        raise GoldError(f"{path}: no gold rows")
    seen: dict[tuple[Unit, str | None], str] = {}
    for r in rows:
        if r.gold is None:
            continue
        first = seen.setdefault((r.unit, r.annotator), r.where)
        if first != r.where:
            who = f" by annotator {r.annotator!r}" if r.annotator else ""
            raise GoldError(
                f"{r.where}: constraint {r.constraint_idx} of {r.instance_id!r} labelled again{who} ({first})"
            )
    return rows


def _jsonl(path: Path) -> Iterator[tuple[str, Mapping[str, Any]]]:
    import orjson

    with path.open("rb") as f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            where = f"{path}: line {n}"
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError as e:
                raise GoldError(f"{where}: not JSON ({e})") from None
            if not isinstance(rec, dict):
                raise GoldError(f"{where}: expected a JSON object, got {type(rec).__name__}")
            yield where, rec


def _csv(path: Path) -> Iterator[tuple[str, Mapping[str, Any]]]:
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        missing = [c for c in (*_REQUIRED, "gold") if c not in (reader.fieldnames or [])]
        if missing:
            raise GoldError(f"{path}: line 1: field '{missing[0]}': the header has no such column")
        start = reader.line_num + 1
        for rec in reader:
            if None in rec:
                raise GoldError(f"{path}: line {start}: more values than the header has columns")
            if any(v not in ("", None) for v in rec.values()):
                yield f"{path}: line {start}", rec
            start = reader.line_num + 1


def _parquet(path: Path) -> Iterator[tuple[str, Mapping[str, Any]]]:
    import polars as pl

    try:
        frame = pl.read_parquet(path)
    except Exception as e:  # polars raises several kinds for a file that is not Parquet
        raise GoldError(f"{path}: not a Parquet file ({e})") from None
    for n, rec in enumerate(frame.iter_rows(named=True), start=1):
        yield f"{path}: row {n}", rec


def _row(where: str, rec: Mapping[str, Any], *, from_text: bool) -> GoldRow:
    def bad(name: str, why: str) -> GoldError:
        return GoldError(f"{where}: field '{name}': {why}")

    def present(name: str) -> Any:
        v = rec.get(name)
        return None if v is None or (isinstance(v, str) and not v.strip()) else v

    for name in _REQUIRED:
        if present(name) is None:
            raise bad(name, "missing")
    text = {n: _text(present(n), n, bad) for n in ("benchmark", "model", "instance_id", "annotator")}
    sample = _text(present("sample"), "sample", bad)
    if sample is not None and sample not in _SAMPLES:
        raise bad("sample", f"expected random or stratified, got {sample!r}")
    sha = _text(present("response_sha256"), "response_sha256", bad)
    if sha is not None and not _SHA_RE.match(sha.lower()):
        raise bad("response_sha256", "expected 64 hexadecimal digits")
    prob = _number(present("inclusion_prob"), "inclusion_prob", bad)
    if prob is not None and not 0.0 < prob <= 1.0:
        raise bad("inclusion_prob", f"expected a probability in (0, 1], got {prob}")
    return GoldRow(
        where,
        str(text["benchmark"]),
        str(text["model"]),
        str(text["instance_id"]),
        _index(present("constraint_idx"), "constraint_idx", bad),
        None if present("gold") is None else _bool(present("gold"), from_text, bad),
        None
        if present("instruction_idx") is None
        else _index(present("instruction_idx"), "instruction_idx", bad),
        None if sha is None else sha.lower(),
        text["annotator"],
        sample,
        prob,
    )


Bad = Any  # the row's error builder: (field, why) -> GoldError


def _text(v: Any, name: str, bad: Bad) -> str | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, str | int):
        raise bad(name, f"expected text, got {v!r}")
    return str(v).strip()


def _index(v: Any, name: str, bad: Bad) -> int:
    if isinstance(v, str) and re.fullmatch(r"\s*\d+\s*", v):
        return int(v)
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return v
    if isinstance(v, float) and v.is_integer() and v >= 0:
        return int(v)
    raise bad(name, f"expected a whole number >= 0, got {v!r}")


def _number(v: Any, name: str, bad: Bad) -> float | None:
    if v is None:
        return None
    try:
        out = float(v)
    except (TypeError, ValueError):
        raise bad(name, f"expected a number, got {v!r}") from None
    if isinstance(v, bool) or not math.isfinite(out):
        raise bad(name, f"expected a number, got {v!r}")
    return out


def _bool(v: Any, from_text: bool, bad: Bad) -> bool:
    if isinstance(v, bool):
        return v
    if from_text and isinstance(v, str) and v.strip().lower() in _TRUE | _FALSE:
        return v.strip().lower() in _TRUE
    raise bad("gold", f"expected true or false, got {v!r}")


# ------------------------------------------------------------------------------------- against a run


def answer_sha256(text: str | None) -> str:
    """The sha256 of an answer's text as stored (UTF-8; a missing text is the empty string)."""
    return hashlib.sha256((text or "").encode("utf-8")).hexdigest()


def bind_gold(
    rows: list[GoldRow],
    verdicts: pl.DataFrame,
    answers: Mapping[tuple[str, str, str], str | None],
    source: str,
) -> GoldSet:
    """`rows` checked against a run: `verdicts` its verdict rows (any judge), `answers` the stored
    answer text per (benchmark, model, instance_id)."""
    import polars as pl

    from ifsweep import metrics

    constraints = _constraints_of(verdicts)
    rows = [_check_row(r, constraints, answers) for r in rows]
    votes: dict[Unit, list[bool]] = {}
    for r in rows:
        votes.setdefault(r.unit, [])  # an empty gold leaves its unit unlabelled: its instance partial
        if r.gold is not None:
            votes[r.unit].append(r.gold)
    decided = {u: sum(v) * 2 > len(v) for u, v in votes.items() if v and sum(v) * 2 != len(v)}
    tied = sum(1 for v in votes.values() if v and sum(v) * 2 == len(v))
    labelled: dict[tuple[str, str, str], set[Place]] = {}
    for u in decided:
        labelled.setdefault(u[:3], set()).add((u[3], u[4]))
    complete = {i for i, got in labelled.items() if constraints[i] <= got}
    partial = len({u[:3] for u in votes}) - len(complete)
    first = {r.unit: r for r in rows}
    kept = sorted((u for u in decided if u[:3] in complete), key=lambda u: (*u[:3], u[3] or -1, u[4]))
    labels = pl.DataFrame(
        {
            "benchmark": [u[0] for u in kept],
            "model": [u[1] for u in kept],
            "instance_id": [u[2] for u in kept],
            "instruction_idx": [u[3] for u in kept],
            "constraint_idx": [u[4] for u in kept],
            "gold": [decided[u] for u in kept],
            "sample": [first[u].sample for u in kept],
            "inclusion_prob": [first[u].inclusion_prob for u in kept],
        },
        schema={
            "benchmark": pl.String,
            "model": pl.String,
            "instance_id": pl.String,
            "instruction_idx": pl.Int64,
            "constraint_idx": pl.Int64,
            "gold": pl.Boolean,
            "sample": pl.String,
            "inclusion_prob": pl.Float64,
        },
    )
    annotators = tuple(sorted({r.annotator for r in rows if r.annotator}))
    agreement: tuple[AgreementStat, ...] = ()
    if len(annotators) > 1:
        agreement = tuple(metrics.agreement_stats(_annotator_rows(rows), annotators, resamples=0))
    return GoldSet(source, labels, len(rows), len(complete), partial, tied, annotators, agreement)


def _constraints_of(verdicts: pl.DataFrame) -> dict[tuple[str, str, str], set[Place]]:
    """Per instance of the run: its constraints' (instruction_idx, constraint_idx)."""
    out: dict[tuple[str, str, str], set[Place]] = {}
    cols = ["benchmark", "model", "instance_id", "instruction_idx", "constraint_idx"]
    for b, m, i, sub, c in verdicts.select(cols).unique().iter_rows():
        out.setdefault((str(b), str(m), str(i)), set()).add((None if sub is None else int(sub), int(c)))
    return out


def _check_row(
    r: GoldRow,
    constraints: Mapping[tuple[str, str, str], set[Place]],
    answers: Mapping[tuple[str, str, str], str | None],
) -> GoldRow:
    """`r` checked against the run, with its sub-instruction filled in where it names none and its
    constraint index is in one sub-instruction only."""
    inst = (r.benchmark, r.model, r.instance_id)
    if inst not in constraints:
        raise GoldError(
            f"{r.where}: the run has no instance {r.instance_id!r} of model {r.model!r} on {r.benchmark!r}"
        )
    places = [p for p in constraints[inst] if p[1] == r.constraint_idx]
    if not places:
        idxs = [p[1] for p in constraints[inst]]
        raise GoldError(
            f"{r.where}: field 'constraint_idx': instance {r.instance_id!r} has no constraint "
            f"{r.constraint_idx} (it has {min(idxs)}..{max(idxs)})"
        )
    subs = sorted(p[0] for p in places if p[0] is not None)
    if r.instruction_idx is None and len(places) > 1:
        raise GoldError(
            f"{r.where}: field 'instruction_idx': missing: constraint {r.constraint_idx} of "
            f"{r.instance_id!r} is in sub-instructions {subs}"
        )
    if r.instruction_idx is not None and (r.instruction_idx, r.constraint_idx) not in places:
        raise GoldError(
            f"{r.where}: field 'instruction_idx': constraint {r.constraint_idx} of {r.instance_id!r} "
            f"belongs to sub-instruction {', '.join(map(str, subs)) or 'none'}, not {r.instruction_idx}"
        )
    _check_answer(r, answers)
    return r if r.instruction_idx is not None else replace(r, instruction_idx=places[0][0])


def _check_answer(r: GoldRow, answers: Mapping[tuple[str, str, str], str | None]) -> None:
    inst = (r.benchmark, r.model, r.instance_id)
    if r.response_sha256 is None:
        return
    if inst not in answers:
        raise GoldError(f"{r.where}: field 'response_sha256': the run stores no answer for {r.instance_id!r}")
    if answer_sha256(answers[inst]) != r.response_sha256:
        raise GoldError(
            f"{r.where}: field 'response_sha256': the label was given on another answer than the one "
            f"stored for {r.instance_id!r} of model {r.model!r} (refused)"
        )


def _annotator_rows(rows: list[GoldRow]) -> pl.DataFrame:
    """The annotators' labels as verdict rows of "judges" named for them, for the agreement engine."""
    import polars as pl

    mine = [r for r in rows if r.annotator and r.gold is not None]
    return pl.DataFrame(
        {
            "benchmark": [r.benchmark for r in mine],
            "model": [r.model for r in mine],
            "instance_id": [r.instance_id for r in mine],
            "instruction_idx": pl.Series([r.instruction_idx for r in mine], dtype=pl.Int64),
            "constraint_idx": [r.constraint_idx for r in mine],
            "constraint_type": [None for _ in mine],
            "judge": [r.annotator for r in mine],
            "satisfied": [r.gold for r in mine],
            "source": ["judge" for _ in mine],
            "status": ["ok" for _ in mine],
        },
        schema_overrides={"constraint_type": pl.String, "constraint_idx": pl.Int64},
    )
