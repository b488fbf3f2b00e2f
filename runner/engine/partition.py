"""Split a run's work between processes by key, so several machines (or cores) can share one run dir.

Each partition process writes its own shards (writer id `p{i}of{n}`) into the same run directory, and
every reader merges all writers, so partitions never coordinate over work: the key alone decides the
owner. (Limits and budget are another matter: a coordinator shares those, docs/design/coordination.md.)

The partition comes from `--partition i/n`, or from the job array that started the process: a Slurm
array task (SLURM_ARRAY_TASK_ID, _COUNT, _MIN) or a Kubernetes Indexed Job pod (JOB_COMPLETION_INDEX,
with the count in IFSWEEP_PARTITION_COUNT: Kubernetes does not tell a pod how many completions its Job
has, so the manifest sets the variable to the same number as `completions`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from typing import NamedTuple

__all__ = ["COUNT_ENV", "Partition", "in_partition", "parse_partition", "partition_from_env"]

COUNT_ENV = "IFSWEEP_PARTITION_COUNT"

_SPEC_RE = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


class Partition(NamedTuple):
    """Partition `i` (0-based) of `n`; a plain (i, n) tuple to callers that unpack it."""

    i: int
    n: int

    @property
    def writer_id(self) -> str:
        return f"p{self.i}of{self.n}"

    def owns(self, key: str) -> bool:
        return in_partition(key, self.i, self.n)


def in_partition(key: str, index: int, count: int) -> bool:
    """True for exactly one index in 0..count-1 per key. Rehashing makes the split even whatever the
    key looks like (content keys are already uniform, but nothing here depends on that)."""
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"partition {index}/{count}: need count >= 1 and 0 <= index < count")
    if count == 1:
        return True
    h = int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "big")
    return h % count == index


def parse_partition(spec: str) -> Partition:
    """Parse "i/n" (0-based index i of n partitions), e.g. "0/4" .. "3/4"."""
    m = _SPEC_RE.fullmatch(spec)
    if m is None:
        raise ValueError(f"partition {spec!r}: expected 'i/n' with whole numbers, e.g. '0/4'")
    index, count = int(m.group(1)), int(m.group(2))
    if count < 1:
        raise ValueError(f"partition {spec!r}: the number of partitions must be at least 1")
    if index >= count:
        raise ValueError(f"partition {spec!r}: index is 0-based, so it must be in 0..{count - 1}")
    return Partition(index, count)


def partition_from_env(env: Mapping[str, str]) -> tuple[Partition, str] | None:
    """The partition of a Slurm array task or a Kubernetes Indexed Job pod, and where it came from;
    None outside both. Raises ValueError naming the variable that is missing or wrong."""
    if "SLURM_ARRAY_TASK_ID" in env:
        return _slurm_task(env), "SLURM_ARRAY_TASK_ID"
    if "JOB_COMPLETION_INDEX" in env:
        if COUNT_ENV not in env:
            raise ValueError(
                f"JOB_COMPLETION_INDEX is set but {COUNT_ENV} is not: set it to the Job's completions "
                "(the number of partitions), or pass --partition I/N"
            )
        return _checked(
            _env_int(env, "JOB_COMPLETION_INDEX"), _env_int(env, COUNT_ENV), "JOB_COMPLETION_INDEX"
        ), (f"JOB_COMPLETION_INDEX and {COUNT_ENV}")
    return None


def _slurm_task(env: Mapping[str, str]) -> Partition:
    """Slurm numbers array tasks from the array's lowest index (`--array=1-4` runs 1..4), so the
    partition is the task id minus SLURM_ARRAY_TASK_MIN; a list or a step leaves holes partitions
    cannot have."""
    task, count = _env_int(env, "SLURM_ARRAY_TASK_ID"), _env_int(env, "SLURM_ARRAY_TASK_COUNT")
    low, high = _env_int(env, "SLURM_ARRAY_TASK_MIN"), _env_int(env, "SLURM_ARRAY_TASK_MAX")
    step = _env_int(env, "SLURM_ARRAY_TASK_STEP") if "SLURM_ARRAY_TASK_STEP" in env else 1
    if step != 1 or high - low + 1 != count:
        raise ValueError(
            f"the Slurm array runs {count} tasks over ids {low}..{high} (step {step}): partitions need a "
            "contiguous range such as --array=0-3"
        )
    return _checked(task - low, count, "SLURM_ARRAY_TASK_ID")


def _checked(index: int, count: int, name: str) -> Partition:
    if count < 1 or not 0 <= index < count:
        raise ValueError(f"{name} gives partition {index} of {count}: need 0 <= index < count")
    return Partition(index, count)


def _env_int(env: Mapping[str, str], name: str) -> int:
    value = env.get(name)
    if value is None:
        raise ValueError(f"{name} is not set")
    try:
        return int(value.strip())
    except ValueError:
        raise ValueError(f"{name}={value!r}: expected a whole number") from None
