"""Batch mode's records in the run's shards, and `ifsweep batches RUN_DIR [--cancel]`.

The shards are the batch journal (providers/batch/endpoint.py): each batch is one key whose newest record says
where it is (intent -> submitted -> ended -> closed). A killed or interrupted sweep leaves its batches
running at the provider; the next `ifsweep run` polls them again, and this command lists (or cancels)
the ones still open.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ifsweep.providers.records import BATCH_KIND
from ifsweep.runner.store import keys
from ifsweep.runner.store.shards import RunStore, scan_shards


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
        return self.store.get(key) is not None

    def batches(self) -> Iterable[Mapping[str, Any]]:
        # Each batch endpoint reads this once, at start, for its own records: one scan serves them all.
        # A partition polls only its own batches: the others' keys are never asked for here.
        if self._read is None:
            own = self.store.writer_id
            self._read = [r for r in self.store.iter_records({BATCH_KIND}) if r.get("writer") == own]
        return self._read


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


def open_batches(run_dir: Path) -> list[OpenBatch]:
    """Batches of `run_dir` not yet closed, oldest first (read from the shards only)."""
    latest: dict[str, dict[str, Any]] = {}
    for sl in scan_shards(run_dir, kinds=(BATCH_KIND,)):
        rec = sl.record()
        latest.setdefault(str(rec["key"]), {}).update(rec)
    out = []
    for intent, rec in latest.items():
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
            )
        )
    return out


async def show_batches(run_dir: Path, cancel: bool) -> int:
    """Print the open batches of `run_dir` with their status at the provider; cancel them if asked."""
    import aiohttp

    from ifsweep.providers.batch.choose import batch_client
    from ifsweep.providers.send.fast import FAST_PROVIDERS

    found = open_batches(run_dir)
    if not found:
        print(f"{run_dir}: no open batches")
        return 0
    failures = 0
    async with aiohttp.ClientSession() as session:
        for b in found:
            if b.batch_id is None:
                print(
                    f"{b.endpoint}: a batch of {b.requests} requests whose creation was never confirmed; "
                    "`ifsweep run` looks it up at the provider"
                )
                continue
            key = os.environ.get(b.api_key_env) if b.api_key_env else None
            try:
                fast = b.provider in FAST_PROVIDERS
                client = batch_client(b.provider, b.api_base, key, lambda _: session, fast=fast)
                info = await (client.cancel(b.batch_id) if cancel else client.retrieve(b.batch_id))
            except Exception as e:
                failures += 1
                print(f"{b.endpoint}: {b.batch_id}: cannot reach the provider: {e}", file=sys.stderr)
                continue
            done = f"{info.completed + info.failed}/{info.total or b.requests}"
            print(f"{b.endpoint}: {b.batch_id}: {info.status} ({done} requests)")
    if cancel:
        print("cancelled; the next `ifsweep run` collects their finished requests and sends the rest again")
    return 1 if failures else 0


__all__ = ["OpenBatch", "StoreJournal", "open_batches", "show_batches"]
