"""The verdicts a sweep wrote or found, as the pipeline saw them: what the check after the sweep
(runner/store/verify.py) reads instead of hashing every planned pair's keys again and reading every
verdict back from the shards.

Each pair's verdict keys are computed once, in the pipeline, from the pair; the record it writes or
finds under each is checked there, in memory, by the same rule the full check applies
(`verdict_problem`). The check after the sweep then needs only the keys: one per planned verdict, none
twice, none with a problem. Anything else (a problem, a key seen twice, a count that differs, an error
verdict, whose slot may still hold an older success) hands over to the full check, which names it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Owner", "SeenVerdicts", "owners_print", "shared_keys", "verdict_problem"]

# Below this many keys a set finds the shared ones at once; above it NumPy's sort keeps memory at 16
# bytes a key (a set of bytes holds about 90), and its 0.15 s import is small beside such a run.
_NUMPY_FROM = 500_000


def verdict_problem(
    rec: Mapping[str, Any],
    owner: tuple[str, str, str, str | None],
    basis: str | None,
    constraints: int,
) -> str | None:
    """Why `rec` is not the verdict of `owner` (model, table, instance id, judge) derived from `basis`
    (None: any) with a row or a skip for each of its `constraints`; None when it is."""
    found = (rec.get("model"), rec.get("benchmark"), rec.get("instance_id"))
    if found != owner[:3] or rec.get("judge") != owner[3]:
        return f"its verdict key holds the record of {found}"
    if basis is not None and rec.get("basis") != basis:
        return "its verdict was derived from other code or another answer than the current ones"
    if rec.get("status") == "error":
        return None  # error rows are what coverage counts; a resume retries them
    rows = rec.get("rows") or []
    accounted = len(rows) + int(rec.get("skipped") or 0)
    if accounted != constraints:
        return f"{len(rows)} rows for {constraints} constraints"
    return None


@dataclass(eq=False, slots=True)
class SeenVerdicts:
    """Every verdict key the pipeline wrote or found this run (16 bytes each, the memory the full check
    would take at the end anyway) and whether any of them needs the full check. Event loop thread only."""

    keys: bytearray = field(default_factory=bytearray)
    doubtful: int = 0  # verdicts with a problem, or in error: the full check decides about them
    # The pairs the verdicts are for, as a multiset fingerprint (`owners_print`): the check compares it
    # with the plan's, so a pair the pipeline never reached cannot hide behind another seen twice
    # under two keys, which the count and the keys alone would not tell.
    owners: int = 0

    def note(self, key: str, problem: str | None, owner: Owner, *, error: bool = False) -> None:
        self.keys += bytes.fromhex(key)
        self.owners = (self.owners + _owner_hash(owner)) & _MASK
        if problem is not None or error:
            self.doubtful += 1

    def all_sound(self, planned: Iterable[Owner]) -> bool:
        """Every planned verdict seen, for the planned pairs and no other, each its own key, none doubtful.
        `planned`: the plan's owners, one per verdict (cheap: no key is computed)."""
        expected, owners = owners_print(planned)
        return (
            not self.doubtful
            and len(self.keys) == 16 * expected
            and self.owners == owners
            and not shared_keys(self.keys)
        )


# (model, table, instance id, judge or None): whose verdict a record is.
Owner = tuple[str, str, str, str | None]
_MASK = (1 << 64) - 1


def _owner_hash(owner: Owner) -> int:
    # Python's own hash: salted per process, which is all this needs (both sides hash in one process).
    return hash(owner) & _MASK


def owners_print(owners: Iterable[Owner]) -> tuple[int, int]:
    """(how many, the sum of their hashes modulo 2**64): equal for two multisets of owners but by a
    64-bit coincidence only when they are the same."""
    n = total = 0
    for owner in owners:
        n += 1
        total = (total + _owner_hash(owner)) & _MASK
    return n, total


def shared_keys(raw: bytes | bytearray) -> set[str]:
    """The keys (hex) that occur more than once among the 16-byte keys packed in `raw`."""
    if not raw:
        return set()
    if len(raw) < 16 * _NUMPY_FROM:
        seen: set[bytes] = set()
        twice: set[str] = set()
        view = memoryview(raw)
        for i in range(0, len(raw), 16):
            key = bytes(view[i : i + 16])
            if key in seen:
                twice.add(key.hex())
            seen.add(key)
        return twice
    import numpy as np

    keys = np.frombuffer(bytes(raw), dtype=np.uint64).reshape(-1, 2)
    found, counts = np.unique(keys, axis=0, return_counts=True)
    return {found[i].tobytes().hex() for i in np.flatnonzero(counts > 1)}
