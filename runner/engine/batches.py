"""Batch mode's records in the run's shards, and `ifsweep batches RUN_DIR [--cancel]`.

The shards are the batch journal (providers/batch/endpoint.py): each batch is one key whose newest record says
where it is (intent -> submitted -> ended -> closed). A killed or interrupted sweep leaves its batches
running at the provider; the next `ifsweep run` polls them again, and this command lists (or cancels)
the ones still open.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ifsweep.providers.batch.clients import created_for
from ifsweep.providers.batch.endpoint import merge_batches
from ifsweep.providers.records import BATCH_KIND
from ifsweep.runner.store import keys
from ifsweep.runner.store.locks import WriterBusyError, live_writers, lock_run, writer_running
from ifsweep.runner.store.shards import SHARDS_DIR, RunStore, scan_shards


@dataclass(slots=True)
class StoreJournal:
    """The run's shards as the batch journal."""

    store: RunStore
    _read: list[Mapping[str, Any]] | None = None  # the batch records at start, read once for every endpoint

    def append(self, record: Mapping[str, Any]) -> None:
        self.store.append({"v": keys.KEY_SCHEMA, **record, "writer": self.store.writer_id})

    def sync(self) -> None:
        self.store.flush()

    def answered(self, key: str) -> bool:
        # A record the sweep keeps: a success, never an error it will retry (issue 21 item 5). An old
        # error taken for an answer closed an open batch unread, and its requests were bought again.
        return self.store.done(key)

    def batches(self) -> Iterable[Mapping[str, Any]]:
        # Each batch endpoint reads this once, at start, for its own records: one scan serves them all.
        if self._read is None:
            self._read = run_batches(self.store.run_dir, self.store.writer_id, self.store.iter_records)
        return self._read


def run_batches(
    run_dir: Path, writer: str, read: Callable[[set[str]], Iterable[Mapping[str, Any]]]
) -> list[Mapping[str, Any]]:
    """The batch records `writer` collects, in write order: the open batches of a run are the run's,
    so besides its own it takes those begun by writers no longer running (a partition killed while
    polling, resumed unpartitioned), never a live writer's (that one polls and pays for its own).
    Records of a batch begun by another writer carry `"adopted": True` (see BatchEndpoint.run)."""
    records = _in_write_order(read({BATCH_KIND}))
    began: dict[str, str | None] = {}
    for r in records:
        began.setdefault(str(r["key"]), r.get("writer"))
    shards = run_dir / SHARDS_DIR
    takes = {w: w is None or w == writer or not writer_running(shards, w) for w in set(began.values())}
    # A batch another writer began is marked "adopted" (a mark read here, never written back).
    return [
        r if began[str(r["key"])] in (writer, None) else {**r, "adopted": True}
        for r in records
        if takes[began[str(r["key"])]]
    ]


def _in_write_order(records: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    # The shards are read writer by writer: a batch one writer began and another closed is put back in
    # the order its records were written.
    return sorted(records, key=lambda r: float(r.get("ts") or 0.0))


@dataclass(frozen=True, slots=True)
class OpenBatch:
    intent: str
    endpoint: str  # the config id
    model: str
    provider: str
    api_base: str | None
    api_key_env: str | None
    batch_id: str | None  # None: created perhaps, its answer never recorded
    requests: int
    state: str
    record: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)  # merged records


def open_batches(run_dir: Path, found: Iterable[Mapping[str, Any]] | None = None) -> list[OpenBatch]:
    """Batches of `run_dir` not yet closed, oldest first (read from the shards only; `found`: the
    batch records a reader already has, as `ifsweep status` has them from the shards' digest)."""
    if found is None:
        found = (sl.record() for sl in scan_shards(run_dir, kinds=(BATCH_KIND,)))
    records = _in_write_order(found)
    out = []
    for intent, rec in merge_batches(records).items():
        if rec.get("state") == "closed":
            continue
        out.append(
            OpenBatch(
                intent=intent,
                endpoint=str(rec.get("endpoint")),
                model=str(rec.get("model")),
                provider=str(rec.get("provider")),
                api_base=rec.get("api_base"),
                api_key_env=rec.get("api_key_env"),
                batch_id=rec.get("batch_id"),
                requests=len(rec.get("custom_ids") or ()),
                state=str(rec.get("state")),
                record=rec,
            )
        )
    return out


async def show_batches(run_dir: Path, cancel: bool, force: bool = False) -> int:
    """Print the open batches of `run_dir` with their status at the provider; cancel them if asked,
    and record each cancel in the run's shards, so that a run with `batch` off may go on. A cancel
    holds the run lock: refused (exit 2) while a run writes the directory, unless `force`."""
    import aiohttp

    found = open_batches(run_dir)
    if not found:
        print(f"{run_dir}: no open batches")
        return 0
    lock = _cancel_lock(run_dir) if cancel else None
    if cancel and lock is None and not force:
        who = ", ".join(str(h) for h in live_writers(run_dir / SHARDS_DIR)) or "a process starting now"
        print(
            f"ifsweep batches: {run_dir}: a run writes this directory now ({who}) and collects these "
            "batches itself; a cancel under it ends their unfinished requests in error (a run never "
            "sends again what it did not cancel). Stop it first, or pass --force",
            file=sys.stderr,
        )
        return 2
    failures = 0
    store = RunStore.open(run_dir, writer_id="batches") if cancel else None
    try:
        async with aiohttp.ClientSession() as session:
            for b in found:
                failures += not await _show_one(b, _client(session, b), store)
    finally:
        if store is not None:
            store.close()
        if lock is not None:
            os.close(lock)
    if cancel:
        print("cancelled; the next `ifsweep run` collects their finished requests and sends the rest again")
    return 1 if failures else 0


def _cancel_lock(run_dir: Path) -> int | None:
    """The run lock, held exclusively for a cancel (no run starts under it); None while a run holds it."""
    try:
        return lock_run(run_dir, shared=False, shards_dir=run_dir / SHARDS_DIR)
    except WriterBusyError:
        return None


def _client(session: Any, b: OpenBatch) -> Any:
    from ifsweep.providers.batch.choose import batch_client
    from ifsweep.providers.send.fast import FAST_PROVIDERS

    key = os.environ.get(b.api_key_env) if b.api_key_env else None
    return batch_client(b.provider, b.api_base, key, lambda _: session, fast=b.provider in FAST_PROVIDERS)


async def _show_one(b: OpenBatch, client: Any, store: RunStore | None) -> bool:
    """One batch's status (cancelled first when `store` is given, to record it in); False when the
    provider could not be asked."""
    batch_id = b.batch_id
    try:
        if batch_id is None:
            if store is None:
                print(
                    f"{b.endpoint}: a batch of {b.requests} requests whose creation was never confirmed; "
                    "`ifsweep run` looks it up at the provider"
                )
                return True
            file_id = b.record.get("input_file_id")
            # Exactly, or not at all: a batch found only perhaps (by size and time, for providers whose
            # batches name nothing) may be another's, and this cancels what it finds.
            since = float(b.record.get("submitted_at") or 0.0)
            info = created_for(await client.listing(since), b.intent, str(file_id))
            if info is None and not client.names_batches:
                print(
                    f"{b.endpoint}: a batch of {b.requests} requests whose creation was never confirmed, "
                    "which this provider's batches cannot be matched to: `ifsweep run` looks for it"
                )
                return True
            if info is None:
                _note(store, b, "closed", reason="never created")
                print(f"{b.endpoint}: a batch of {b.requests} requests that was never created: closed")
                return True
            batch_id = info.id
        info = await (client.cancel(batch_id) if store is not None else client.retrieve(batch_id))
    except Exception as e:
        print(f"{b.endpoint}: {batch_id or b.intent}: cannot reach the provider: {e}", file=sys.stderr)
        return False
    if store is not None:
        _note(store, b, "cancelled", batch_id=batch_id)
    done = f"{info.completed + info.failed}/{info.total or b.requests}"
    print(f"{b.endpoint}: {batch_id}: {info.status} ({done} requests)")
    return True


def _note(store: RunStore, b: OpenBatch, state: str, **extra: Any) -> None:
    """A record of what this command did to batch `b`, carrying the batch's facts like every other."""
    import time

    store.append({**b.record, "state": state, "writer": store.writer_id, "ts": time.time(), **extra})
    store.flush()


__all__ = ["OpenBatch", "StoreJournal", "open_batches", "show_batches"]
