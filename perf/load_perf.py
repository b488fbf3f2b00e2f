"""Loading each benchmark's real release, against FollowBench's token-only diff (issue 35, stop 43).
Prints figures and ratios measured in one run; not a test.

    python perf/load_perf.py                 # every release in ../shared/benchmarks, and the baseline
    python perf/load_perf.py --no-baseline   # the loaders alone (the baseline takes about a minute)

FollowBench's loader finds the text each level added by diffing its instruction against the level
before (benchmarks/followbench/_load.py). The baseline is that diff token by token alone, as the loader
made it before: the same instruction pairs, timed here, and how many of their texts come out the same.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from ifsweep.benchmarks import get
from ifsweep.benchmarks.followbench import _load

SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
RELEASES: tuple[tuple[str, Path, dict[str, str]], ...] = (
    ("followbench", SHARED / "FollowBench" / "data", {}),
    ("followbench", SHARED / "FollowBench" / "data_zh", {}),
    ("infobench", SHARED / "InFoBench", {}),
    ("cfbench", SHARED / "CFBench" / "data", {}),
    ("eifbench", SHARED / "EIFBench" / "data", {"scenario": "party"}),
)


def token_diff(before: str, after: str) -> str:
    """The loader's text by a diff of all tokens at once (the loader before stop 43)."""
    return _load.added_text(before, after, whole=sys.maxsize)


def level_pairs(data: Path) -> list[tuple[str, str]]:
    """Every (instruction, next level's instruction) pair of an example, as the loader diffs them."""
    pairs: list[tuple[str, str]] = []
    for path in sorted(data.glob("*_constraints.json")):
        rows = json.loads(path.read_bytes())
        for prev, row in itertools.pairwise(rows):
            if row["example_id"] == prev["example_id"] and row["level"] == prev["level"] + 1:
                pairs.append((prev["instruction"], row["instruction"]))
    return pairs


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--no-baseline", action="store_true", help="time the loaders only")
    args = p.parse_args(argv)
    for name, data, options in RELEASES:
        t = time.perf_counter()
        try:
            n = sum(1 for _ in get(name).load(data, options))
        except FileNotFoundError as e:  # InFoBench's data is not in ../shared (its README says why)
            print(f"{name}: skipped ({e})")
            continue
        print(f"{name} {data.relative_to(SHARED)}: {n} instances in {time.perf_counter() - t:.2f} s")
    if args.no_baseline:
        return 0
    for folder in ("data", "data_zh"):
        data = SHARED / "FollowBench" / folder
        if not data.is_dir():
            continue
        pairs = level_pairs(data)
        t = time.perf_counter()
        ours = [_load.added_text(a, b) for a, b in pairs]
        t_ours = time.perf_counter() - t
        t = time.perf_counter()
        base = [token_diff(a, b) for a, b in pairs]
        t_base = time.perf_counter() - t
        same = sum(x == y for x, y in zip(ours, base, strict=True))
        print(
            f"followbench {folder}: {len(pairs)} level pairs diffed in {t_ours:.2f} s, token diff alone "
            f"{t_base:.2f} s ({t_base / t_ours:.1f}x); same text for {same} of {len(pairs)}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
