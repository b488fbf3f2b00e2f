"""Joining a sweep's coordinator: the sweep's id in its run directory, what every writer already spent,
and the coordinator's life around one `ifsweep run` (docs/design/coordination.md).

Only used when `[run] coordinator` (or IFSWEEP_COORDINATOR) is set; the Redis client is imported here,
on first use, because it is an optional extra.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ifsweep.providers.budget import SWEEP_SCOPE
from ifsweep.providers.coord.interfaces import CoordinatorError, CoordinatorSettings
from ifsweep.providers.limits import ProviderEvent
from ifsweep.runner.store.intents import SPEND_KINDS, run_spend
from ifsweep.runner.store.shards import disk_full, scan_shards

if TYPE_CHECKING:
    from ifsweep.providers.coord.redis_state import RedisCoordinator

__all__ = ["SWEEP_ID_NAME", "join", "spend_by_writer", "sweep_id"]

SWEEP_ID_NAME = "coordination.json"


def spend_by_writer(run_dir: Path, own: str | None = None) -> dict[str, dict[str, float]]:
    """{writer: {scope: dollars}} over every stored call record (superseded errors too: they were paid
    for) and the worst case of every intent without a result (runner/store/intents.py), but for a live
    writer other than `own`, whose open intents are its calls in flight; scope "sweep" is the writer's
    total."""
    spend = run_spend(run_dir)
    for sl in scan_shards(run_dir, kinds=SPEND_KINDS):
        spend.add(sl.file_no, sl.record())
    return {writer: {SWEEP_SCOPE: scan.total, **scan.by} for writer, scan in spend.finish(own).items()}


def totals(baseline: Mapping[str, Mapping[str, float]]) -> tuple[float, dict[str, float]]:
    """(sweep total, by label) summed over writers: what `Budget` starts from."""
    by: dict[str, float] = defaultdict(float)
    for scopes in baseline.values():
        for scope, dollars in scopes.items():
            by[scope] += dollars
    total = by.pop(SWEEP_SCOPE, 0.0)
    return total, dict(by)


def sweep_id(run_dir: Path) -> tuple[str, bool]:
    """The id every process of this run directory shares its ledger under, and whether this call
    created it. Kept in RUN_DIR/coordination.json, created with link() so that processes starting at
    once on a shared filesystem agree on one."""
    path = run_dir / SWEEP_ID_NAME
    if not path.exists():
        tmp = run_dir / f".{SWEEP_ID_NAME}.{os.getpid()}.{secrets.token_hex(4)}"
        try:
            tmp.write_bytes(orjson.dumps({"sweep_id": secrets.token_hex(16), "created_at": time.time()}))
            os.link(tmp, path)
            created = True
        except FileExistsError:
            created = False
        except OSError as e:
            # A full disk is the documented disk-full stop (resumable), never a traceback.
            raise disk_full(e, f"{path}: not written") from e
        finally:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        if created:
            return _read_id(path), True
    return _read_id(path), False


def _read_id(path: Path) -> str:
    try:
        data = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as e:
        raise CoordinatorError(f"{path}: cannot read the sweep's coordination id: {e}") from None
    value = data.get("sweep_id") if isinstance(data, dict) else None
    if not isinstance(value, str) or not value.isalnum():
        raise CoordinatorError(f"{path}: field 'sweep_id': expected a string of letters and digits")
    return value


def _redis_state() -> Any:
    # Local import: `redis` is an optional extra, needed only with a coordinator.
    try:
        from ifsweep.providers.coord import redis_state
    except ImportError as e:
        if (e.name or "").split(".")[0] != "redis":
            raise
        raise CoordinatorError(
            "a coordinator is configured but the Redis client is not installed: pip install 'ifsweep[redis]'"
        ) from None
    return redis_state


async def join(
    settings: CoordinatorSettings,
    run_dir: Path,
    writer: str,
    emit: Callable[[ProviderEvent], None] | None = None,
    give_up_s: float | None = None,
) -> tuple[RedisCoordinator, dict[str, dict[str, float]]]:
    """Connect, publish what the shards say each writer spent, and join the sweep's ledger. Returns the
    coordinator and that baseline. Raises CoordinatorError when it cannot."""
    state = _redis_state()
    ident, created = sweep_id(run_dir)
    baseline = spend_by_writer(run_dir, writer)
    coordinator: RedisCoordinator = state.RedisCoordinator(
        settings,
        sweep_id=ident,
        writer=writer,
        rescan=lambda: spend_by_writer(run_dir, writer),
        emit=emit,
        give_up_s=give_up_s,
    )
    try:
        await coordinator.start(baseline, new_sweep=created)
    except BaseException:
        await coordinator.close(timeout_s=0)
        raise
    return coordinator, baseline
