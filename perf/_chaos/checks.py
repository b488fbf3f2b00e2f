"""The invariants, each a pure check over what the harness observed: the simulator's ledger, the run
directory's records and summary, and the processes' exit codes. Each returns its violations as lines
that start with the invariant's name."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from _chaos import records
from _chaos.ledger import Ledger, billed_by_model, rebilled, resubmitted
from _chaos.procs import Proc
from _chaos.sweepfile import Stage, served

STATUS_OF_CODE = {0: "complete", 1: "failed", 3: "budget_exhausted", 130: "interrupted"}
_EPS = 1e-9


def same_verdicts(got: Path, ref: Path, judges: tuple[str, ...], *, scores: bool = True) -> list[str]:
    """I1: every pair of the fault-free reference has exactly one verdict here, equal to the
    reference's; and the scores a report shows agree, judge by judge."""
    mine, theirs = records.verdicts(got), records.verdicts(ref)
    out: list[str] = []
    for pair, (want, *_) in sorted(theirs.items()):
        have = mine.get(pair, [])
        if not have:
            out.append(f"I1: no verdict for {pair}")
        elif len(have) > 1:
            out.append(f"I1: {len(have)} current verdicts for {pair}")
        elif have[0] != want:
            out.append(f"I1: verdict of {pair} differs from the fault-free run: {_diff(have[0], want)}")
    if scores and not out:
        for judge in judges:
            if records.scores(got, judge) != records.scores(ref, judge):
                out.append(f"I1: the scores of judge {judge} differ from the fault-free run's")
    return out


def _traceback_tail(err: str) -> str:
    """The error and the innermost frame of ours that raised it."""
    lines = err.strip().splitlines()
    frames = [x.strip() for x in lines if x.strip().startswith('File "') and "/lib/python" not in x]
    where = f" (at {frames[-1][:160]})" if frames else ""
    return f"{lines[-1][:200]}{where}"


def _diff(a: Mapping[str, Any], b: Mapping[str, Any]) -> str:
    keys = sorted(k for k in {*a, *b} if a.get(k) != b.get(k))
    return "; ".join(f"{k}: {a.get(k)!r} != {b.get(k)!r}" for k in keys)[:400]


def caps_held(ledger: Ledger, stage: Stage, roles: dict[str, str]) -> list[str]:
    """I2: what the simulator billed (every process together) is within each cap in force."""
    billed = billed_by_model(ledger, roles)
    out = []
    for scope, cap in stage.caps:
        spent = sum(billed.values()) if scope == "run" else billed[served(scope)]
        if spent > cap * (1 + _EPS) + _EPS:
            out.append(f"I2: billed ${spent:.6f} against the {scope} cap ${cap:.6f} (+{spent / cap - 1:.1%})")
    return out


def spend_reported(summary: Mapping[str, Any] | None, ledger: Ledger, roles: dict[str, str]) -> list[str]:
    """I2: the spend the finished run reports covers what the simulator billed (a run that reports less
    than it was charged lets the next cap start from too little)."""
    billed = sum(billed_by_model(ledger, roles).values())
    reported = float((summary or {}).get("spent_usd", 0.0))
    if reported < billed * (1 - 1e-6) - 1e-6:
        return [f"I2: summary.json reports ${reported:.6f} spent; the simulator billed ${billed:.6f}"]
    return []


def paid_once(
    ledger: Ledger, kills: list[float], window_s: float, stops: Sequence[tuple[float, float]] = ()
) -> list[str]:
    """I3: no body billed twice beyond the calls a kill left without a stored result; no batch line
    submitted again while an earlier submission was answered or open."""
    excused, unexcused = rebilled(ledger, kills, window_s, stops)
    out = []
    if unexcused:
        out.append(
            f"I3: {len(unexcused)} requests billed again that no kill explains ({excused} a kill does), "
            f"e.g. {unexcused[0]}"
        )
    out += [f"I3: batch request submitted twice: {r}" for r in resubmitted(ledger, kills)[:5]]
    return out


def exit_truthful(proc: Proc, summary: Mapping[str, Any] | None, records_complete: bool | None) -> list[str]:
    """I4: the exit code, summary.json and the records agree. `records_complete` is whether the records
    hold every planned pair done (None when this process alone cannot tell, as for one partition)."""
    code, who = proc.code, proc.partition or "plain run"
    out, known = _exited(proc)
    if not known:
        return out
    if summary is None:
        return [*out, f"I4: {who} exited {code} and wrote no summary"]
    if summary.get("status") != STATUS_OF_CODE[code] or bool(summary.get("complete")) != (code == 0):
        out.append(
            f"I4: {who} exited {code} but its summary says status={summary.get('status')!r} "
            f"complete={summary.get('complete')!r}"
        )
    if records_complete is not None and code == 0 and not records_complete:
        out.append(f"I4: {who} exited 0 (complete) but the records lack or differ in planned verdicts")
    if records_complete and code == 1:
        out.append(f"I4: {who} exited 1 (failed) but every planned pair has its verdict")
    return out


def _exited(proc: Proc) -> tuple[list[str], bool]:
    """A traceback, or an exit code that is no sweep status (2, a refusal, is no violation): the
    violations, and whether the code names a status to check further."""
    code, who = proc.code, proc.partition or "plain run"
    out = []
    if "Traceback (most recent call last)" in proc.err:
        out.append(f"I4: {who} exited {code} with a traceback: {_traceback_tail(proc.err)}")
    if code not in STATUS_OF_CODE:
        return (out if code == 2 else [*out, f"I4: {who} exited {code}: {proc.err.strip()[-300:]}"]), False
    return out, True


# The line `ifsweep run` ends with, printed from the SweepResult its summary.json is written from.
_ENDING = re.compile(r"^\[ifsweep\] (complete|failed|budget_exhausted|interrupted)\b", re.MULTILINE)


def ending_printed(proc: Proc) -> list[str]:
    """I4 for a run whose summary.json another run may have rewritten since: its exit code against
    the ending it printed (the same record its summary was written from)."""
    code, who = proc.code, proc.partition or "plain run"
    out, known = _exited(proc)
    if not known:
        return out
    said = _ENDING.findall(proc.err)
    if not said:
        return [*out, f"I4: {who} exited {code} and printed no ending"]
    if said[-1] != STATUS_OF_CODE[code]:
        out.append(f"I4: {who} exited {code} but printed that it ended {said[-1]}")
    return out


def disk_full_stop(proc: Proc, run_dir: Path) -> list[str]:
    """I4 on a full disk: the documented stop (its message, no traceback), no temporary file left."""
    who = proc.partition or "plain run"
    out = []
    left = sorted(str(p.relative_to(run_dir)) for p in run_dir.rglob("*.tmp"))
    if left:
        out.append(f"I4: a full disk left {', '.join(left[:3])} behind ({who})")
    if "Traceback (most recent call last)" in proc.err:
        out.append(f"I4: a full disk ended {who} with a traceback: {_traceback_tail(proc.err)}")
        return out
    said = (proc.out + proc.err).lower()
    # A run may also end complete, stopped by its budget, or failed with pairs in error before the disk
    # fills; any other ending must be the disk-full stop.
    if proc.code in (0, 3) or (proc.code == 1 and ("disk full" in said or "ended in error" in said)):
        return out
    last = (proc.err.strip().splitlines() or [""])[-1][:200]
    return [*out, f"I4: a full disk ended {who} with exit {proc.code} and no disk-full message: {last}"]


def coordinator_gone_stop(proc: Proc) -> list[str]:
    """I4 when the coordinator goes away for good: the run ends (coordinator_timeout_s), exit 1 saying
    why, or ends before that on its own terms; it never hangs (Proc.finish kills it after its limit)."""
    who = proc.partition or "plain run"
    said = (proc.out + proc.err).lower()
    if "[chaos] killed after" in proc.err:
        return [f"I4: {who} never ended with its coordinator gone"]
    if proc.code == 1 and "coordinator" not in said and "ended in error" not in said:
        last = (proc.err.strip().splitlines() or [""])[-1][:200]
        return [f"I4: {who} exited 1 with its coordinator gone, without saying so: {last}"]
    return []


def refused_cleanly(proc: Proc, before: dict[str, str], after: dict[str, str], sent: int) -> list[str]:
    """I5: a changed input the manifest refuses: exit 2, the directory unchanged, nothing sent."""
    out = []
    if proc.code != 2:
        out.append(f"I5: a refused change exited {proc.code}, not 2")
    if before != after:
        changed = sorted(k for k in {*before, *after} if before.get(k) != after.get(k))
        out.append(f"I5: a refused change altered the run directory: {', '.join(changed[:5])}")
    if sent:
        out.append(f"I5: a refused change sent {sent} requests")
    return out
