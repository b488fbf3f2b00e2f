"""A benchmark's instances kept on disk while a sweep runs, read back one at a time.

Every model walks every instance, so the instances must outlive loading; held as objects they cost
about 7 KB each (FollowBench carries its whole evolution path per level), which made a sweep's memory
grow with the size of its data sets. Here each instance is pickled once into an unnamed temporary file
(the kernel deletes it when the process ends, however it ends) and only its offset stays in memory:
8 bytes. Reading one back is a pread and an unpickle, about 20 microseconds, small beside a call; the
file's pages sit in the page cache, not in the process.

Every model's workers walk the instances in the same order at about the same pace, so the last
`_RECENT` instances read stay decoded: a model a few instances behind another takes the same object
instead of unpickling it again (measured at latency 0 over 40 models: the unpickling was 6% of the
sweep's CPU; instances are frozen, so sharing one is safe). That holds at most `_RECENT` instances.

Unpickling is safe here because the file holds only what this object wrote: it has no name in any
directory from the moment it is created, so nothing else can open, let alone write it.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from ifsweep.benchmarks import Instance

__all__ = ["SpooledInstances"]

_RECENT = 256


class SpooledInstances(Sequence[Instance]):
    """Instances in load order; `len` is free, indexing and iteration read from the spool file."""

    __slots__ = ("_file", "_offsets", "_recent")

    def __init__(self, instances: Iterable[Instance], *, limit: int | None = None) -> None:
        # Open for this object's lifetime, not a block's: closed by close() or when it is collected.
        self._file = tempfile.TemporaryFile(prefix="ifsweep-instances-")  # noqa: SIM115
        self._offsets = array("Q", [0])
        self._recent: dict[int, Instance] = {}  # index -> instance, oldest first
        end = 0
        try:
            for inst in instances:
                if limit is not None and len(self._offsets) > limit:
                    break
                data = pickle.dumps(inst, protocol=pickle.HIGHEST_PROTOCOL)
                self._file.write(data)
                end += len(data)
                self._offsets.append(end)
            self._file.flush()
        except BaseException:
            self._file.close()
            raise

    def __len__(self) -> int:
        return len(self._offsets) - 1

    @overload
    def __getitem__(self, i: int) -> Instance: ...

    @overload
    def __getitem__(self, i: slice) -> list[Instance]: ...

    def __getitem__(self, i: int | slice) -> Instance | list[Instance]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(f"instance {i} of {n}")
        inst = self._recent.get(i)
        if inst is not None:
            return inst
        start, end = self._offsets[i], self._offsets[i + 1]
        inst = pickle.loads(os.pread(self._file.fileno(), end - start, start))
        if not isinstance(inst, Instance):  # only a bug could get here: the file is ours alone
            raise TypeError(f"spool entry {i} is a {type(inst).__name__}, not an Instance")
        if len(self._recent) >= _RECENT:
            del self._recent[next(iter(self._recent))]
        self._recent[i] = inst
        return inst

    def __iter__(self) -> Iterator[Instance]:
        for i in range(len(self)):
            yield self[i]

    def close(self) -> None:
        self._file.close()

    def __del__(self) -> None:
        # Closed here rather than by the file object's own finalizer, which would warn of a leak.
        file = getattr(self, "_file", None)
        if file is not None:
            file.close()

    def __repr__(self) -> str:
        return f"SpooledInstances({len(self)} instances)"
