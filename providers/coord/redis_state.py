"""The Redis coordinator: `SharedRates` per endpoint and one `SharedLedger` per sweep, over one Redis.

Imported only when a coordinator is configured: `redis` is an optional extra (`ifsweep[redis]`) and this
is the only module that imports it. Every shared check-and-update is one Lua script (redis_scripts.py).

On the hot path a call costs one script round trip for its rate slot and, when a cap applies, one for
its budget reservation; settlements, token refunds, pauses and learned limits go in the background,
batched (a late release only makes others wait a little longer; it never lets a cap be passed).

While Redis is unreachable every call that needs it waits and retries (with a `backoff` event), so a
restarted server only pauses the sweep. Ledger updates are idempotent (reservations by token, spend as
each writer's absolute total, merged by maximum), so a retried or replayed update never counts twice;
if Redis comes back empty, every process puts its own view back and one rebuilds the rest from the
shards. Design: docs/design/coordination.md.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import socket
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import anyio
import orjson
import redis.asyncio as aioredis
from redis import exceptions as rexc
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from ifsweep.providers.batch.batched import Batch
from ifsweep.providers.coord import redis_scripts as lua
from ifsweep.providers.coord.interfaces import (
    CoordinatorError,
    CoordinatorSettings,
    EndpointKey,
    LedgerVerdict,
    RateGrant,
    Window,
)
from ifsweep.providers.limits import ProviderEvent

# {writer: {scope: dollars}}: what each writer of the run directory spent, read from its shards.
Baseline = Mapping[str, Mapping[str, float]]

_UNREACHABLE = (rexc.ConnectionError, rexc.TimeoutError)
# Subclasses of ConnectionError that waiting never cures.
_REFUSED = (rexc.AuthenticationError, rexc.AuthorizationError)
_MAX_RETRY_S = 2.0
_CONNECT_S = 10.0  # how long the first contact may take before the sweep refuses to start
_RATE_TTL_MS = 600_000  # an endpoint's rate state outlives its last call by this long
_LEDGER_TTL = 7 * 86_400  # a sweep's ledger outlives its last heartbeat by this long
_POOL_CONNECTIONS = 32  # calls beyond this many Redis commands at once queue for a connection
_ANNOUNCE_EVERY_S = 1.0
_WINDOWS: tuple[Window, Window] = ("requests", "tokens")
_SCRIPT_NAMES = (
    *("RESERVE", "SETTLE", "BEAT", "RESTORE", "LEAVE", "SNAPSHOT"),  # the sweep's ledger
    *("TAKE", "REFUND", "PAUSE", "LEARN", "SYNC"),  # endpoints' allowances
)


class CoordinatorGone(RuntimeError):
    """The coordinator stayed unreachable past `[run] coordinator_timeout_s`; the message says so."""


class RedisCoordinator:
    """One process's link to the shared state. `start()`, run `run()` beside the sweep, `close()`."""

    def __init__(
        self,
        settings: CoordinatorSettings,
        *,
        sweep_id: str,
        writer: str,
        rescan: Callable[[], Baseline],
        emit: Callable[[ProviderEvent], None] | None = None,
        connect_timeout_s: float = _CONNECT_S,
        give_up_s: float | None = None,
    ) -> None:
        self.settings = settings
        self.give_up_s = give_up_s  # `[run] coordinator_timeout_s`: unreachable this long ends the run
        self.ns = f"ifsweep:sweep:{sweep_id}"
        self.writer = writer
        self.instance = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"
        self.lease_ms = int(settings.lease_s * 1000)
        # Renewed several times per lease; after a restore that made a new epoch, reservations wait
        # long enough for every live process to have noticed and put its holds back.
        self.beat_s = min(2.0, settings.lease_s / 4)
        self.grace_ms = int((self.beat_s * 1.5 + 1.0) * 1000)
        self._rescan = rescan
        self.emit = emit
        self._connect_s = connect_timeout_s
        pool = aioredis.BlockingConnectionPool.from_url(
            settings.url,
            max_connections=_POOL_CONNECTIONS,
            timeout=None,
            decode_responses=True,
            socket_timeout=10.0,
            socket_connect_timeout=5.0,
            retry=Retry(NoBackoff(), 0),  # retries are ours: every script says whether it may repeat
        )
        self._client = aioredis.Redis.from_pool(pool)
        # Pub/sub blocks on its socket between messages: its own connection, without a read timeout.
        self._sub_client = aioredis.Redis.from_url(
            settings.url, decode_responses=True, socket_timeout=None, retry=Retry(NoBackoff(), 0)
        )
        self._scripts = {name: self._client.register_script(getattr(lua, name)) for name in _SCRIPT_NAMES}
        self.ledger = RedisLedger(self)
        self.takes = self.batch(self._send_takes)  # rate slots of every endpoint, one script a round
        self._rates: dict[EndpointKey, RedisRates] = {}
        self._wake = anyio.Event()
        self._send_wake = anyio.Event()
        self._sending = False  # the batch sender runs: hot-path requests queue for it
        self._recovering = anyio.Lock()
        self._down_since: float | None = None
        self._announced = 0.0
        self._closed: bool | None = None  # set by close(): whether the last updates were sent
        self._last_error: Exception | None = None

    # ------------------------------------------------------------------------------------- lifecycle

    async def start(self, baseline: Baseline, *, new_sweep: bool) -> None:
        """Reach the server (raising CoordinatorError if it never answers) and join the ledger:
        publish what the shards say every writer spent, and adopt what this writer already published.
        `new_sweep`: this process just created the sweep's id, so no other can hold anything yet."""
        try:
            with anyio.fail_after(self._connect_s):
                await self._first_contact()
        except TimeoutError:
            raise CoordinatorError(
                f"coordinator {self.settings.display} did not answer within {self._connect_s:g} s "
                f"({self._last_error}); check the URL and that redis-server runs there"
            ) from None
        self.ledger.adopt_baseline(baseline.get(self.writer, {}))
        await self.ledger.restore(grace_ms=0 if new_sweep else self.grace_ms, baseline=baseline)

    async def _first_contact(self) -> None:
        delay = 0.05
        while True:
            try:
                await self._client.ping()
                return
            except _REFUSED as e:
                raise CoordinatorError(f"coordinator {self.settings.display} refused us: {e}") from None
            except _UNREACHABLE as e:
                self._last_error = e
                await anyio.sleep(delay)
                delay = min(2 * delay, _MAX_RETRY_S)

    async def run(self) -> None:
        """The background work: lease renewal, batched settlements, settle notifications. Runs until
        cancelled (the sweep's task group ends)."""
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._heartbeat)
            tg.start_soon(self._flusher)
            tg.start_soon(self._listen)
            tg.start_soon(self._sender)
            if self.give_up_s is not None:
                tg.start_soon(self._watchdog, self.give_up_s)

    async def _watchdog(self, give_up_s: float) -> None:
        """Raise CoordinatorGone once the server was unreachable for `give_up_s`: the sweep stops,
        resumable (the shards hold every result; this process's holds expire with its lease)."""
        while True:
            await anyio.sleep(min(1.0, give_up_s / 4))
            down = self.down_s()
            if down is not None and down >= give_up_s:
                raise CoordinatorGone(
                    f"coordinator {self.settings.display} unreachable for {down:.0f} s "
                    f"(coordinator_timeout_s = {give_up_s:g}): stopped; every result is kept, run the same "
                    "command again once it answers"
                )

    def down_s(self) -> float | None:
        """How long the server has been unreachable, None while it answers."""
        return None if self._down_since is None else anyio.current_time() - self._down_since

    def state(self) -> str:
        """The coordinator's state in a few words, for the board's totals line."""
        down = self.down_s()
        if down is None:
            return "coordinator ok"
        limit = f", stops at {self.give_up_s:.0f} s" if self.give_up_s is not None else ", waiting"
        return f"coordinator unreachable {down:.0f} s{limit}"

    async def close(self, timeout_s: float | None = None) -> bool:
        """Send what is still queued and drop this process's holds at once; False if the server did not
        answer within `timeout_s` (default: the lease, or no wait at all while the server is known to
        be unreachable, so Ctrl-C keeps its promise; the holds then expire with the lease)."""
        if self._closed is not None:
            return self._closed
        if timeout_s is None:
            timeout_s = 0.0 if self._down_since is not None else self.settings.lease_s
        done = False
        with anyio.move_on_after(timeout_s):
            await self.flush()
            await self.script("LEAVE", [], [self.ns, self.instance])
            done = True
        self._closed = done
        await self._client.aclose()
        await self._sub_client.aclose()
        return done

    # --------------------------------------------------------------------------------------- access

    def rates(self, endpoint: EndpointKey) -> RedisRates:
        rates = self._rates.get(endpoint)
        if rates is None:
            digest = hashlib.sha256(orjson.dumps(list(endpoint))).hexdigest()[:24]
            rates = self._rates[endpoint] = RedisRates(self, f"ifsweep:rate:{digest}")
        return rates

    async def snapshot(self) -> dict[str, Any]:
        """The ledger as Redis holds it now (dead instances dropped first): for tests and diagnostics."""
        epoch, totals, held, holds, insts = await self.script("SNAPSHOT", [], [self.ns])
        return {
            "epoch": epoch,
            "spent": _floats(totals),
            "held": _floats(held),
            "holds": {k: int(v) for k, v in _pairs(holds).items()},
            "leases_ms": {k: int(v) for k, v in _pairs(insts).items()},
        }

    def wake(self) -> None:
        """Something is queued for the background sender."""
        self._wake.set()

    def batch(
        self,
        send: Callable[[list[Any]], Any],
        orphan: Callable[[Any, Any], None] | None = None,
    ) -> Batch[Any, Any]:
        """A Batch whose requests this coordinator's sender task sends together."""
        # The sender replaces its event after every round: look it up at each wake.
        return Batch(send, wake=lambda: self._send_wake.set(), running=lambda: self._sending, orphan=orphan)

    def _batches(self) -> list[Batch[Any, Any]]:
        return [self.ledger.reserves, self.takes]

    # ------------------------------------------------------------------------------------ transport

    async def script(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        """Run a script; while the server is unreachable, wait and try again (with a backoff event)."""
        delay = 0.05
        while True:
            try:
                reply = await self._scripts[name](keys=list(keys), args=list(args))
            except _REFUSED as e:
                raise CoordinatorError(f"coordinator {self.settings.display} refused us: {e}") from None
            except _UNREACHABLE as e:
                self._unreachable(e, delay)
                await anyio.sleep(delay)
                delay = min(2 * delay, _MAX_RETRY_S)
                continue
            if self._down_since is not None:
                self._reachable()
            return reply

    async def try_script(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> bool:
        """Run a best-effort script once; False if the server did not answer (the update is dropped)."""
        try:
            await self._scripts[name](keys=list(keys), args=list(args))
        except _REFUSED as e:
            raise CoordinatorError(f"coordinator {self.settings.display} refused us: {e}") from None
        except _UNREACHABLE:
            return False
        return True

    async def ledger_script(self, name: str, args_for: Callable[[str], Sequence[Any]]) -> Any:
        """A ledger script under the current epoch; an answer of 'lost' (Redis lost the ledger, or
        another process rebuilt it) restores this process's view and sends the script again."""
        while True:
            epoch = self.ledger.epoch
            reply = await self.script(name, [], args_for(epoch))
            if reply[:1] == ["lost"]:
                await self._recover(epoch)
                continue
            return reply

    async def _recover(self, seen_epoch: str) -> None:
        async with self._recovering:
            if self.ledger.epoch != seen_epoch:
                return  # another task of this process has restored already
            baseline = await anyio.to_thread.run_sync(self._rescan)
            # Not adopted: the shards count this process's calls in flight at their worst case (their
            # intents), which its holds and then its settlements count already.
            await self.ledger.restore(grace_ms=self.grace_ms, baseline=baseline, adopt=False)
            self._say(f"coordinator {self.settings.display} had lost the ledger: rebuilt it", None)

    def _unreachable(self, error: Exception, wait_s: float) -> None:
        now = anyio.current_time()
        if self._down_since is None:
            self._down_since = now
        if now - self._announced >= _ANNOUNCE_EVERY_S:
            self._announced = now
            down = now - self._down_since
            self._say(
                f"coordinator {self.settings.display} unreachable for {down:.0f} s ({error}): waiting", wait_s
            )

    def _reachable(self) -> None:
        assert self._down_since is not None
        down, self._down_since = anyio.current_time() - self._down_since, None
        self._announced = 0.0
        self.ledger.notify()  # settles may have been missed meanwhile
        self._say(f"coordinator {self.settings.display} reachable again after {down:.1f} s", None)

    def _say(self, message: str, wait_s: float | None) -> None:
        if self.emit is not None:
            self.emit(ProviderEvent("backoff", "coordinator", message, wait_s))

    # ------------------------------------------------------------------------------ background tasks

    async def _heartbeat(self) -> None:
        ledger = self.ledger
        while True:
            await anyio.sleep(self.beat_s)
            state, totals = await self.ledger_script("BEAT", self._beat_args)
            ledger.seen(totals)
            if state == "expired":  # this process stalled past its lease: its holds were charged
                await ledger.restore(grace_ms=0, baseline={}, adopt=False)
            # Holds of a dead process expire silently: let waiting reservations look again.
            ledger.notify()

    def _beat_args(self, epoch: str) -> list[Any]:
        return [self.ns, epoch, self.instance, self.lease_ms, _LEDGER_TTL, int(self.ledger.holding)]

    async def _send_takes(self, requests: list[tuple[str, int, tuple[Any, ...]]]) -> list[RateGrant]:
        """Requests (endpoint key, tokens, limits) -> their grants, in order."""
        by_key: dict[str, list[int]] = {}
        for n, (key, _, _) in enumerate(requests):
            by_key.setdefault(key, []).append(n)
        args: list[Any] = []
        for indexes in by_key.values():
            tokens = [requests[n][1] for n in indexes]
            # One endpoint's calls share its limits: the newest request's view serves them all.
            args += [*requests[indexes[-1]][2], len(tokens), *tokens]
        replies = await self.script("TAKE", list(by_key), args)
        grants: list[RateGrant | None] = [None] * len(requests)
        for indexes, (rpm_now, tpm_now, flags, slots, shift) in zip(by_key.values(), replies, strict=True):
            learned = tuple(w for w, flag in zip(_WINDOWS, flags, strict=True) if flag == "1")
            rpm, tpm = int(float(rpm_now)) or None, int(float(tpm_now)) or None
            for n, wait, taken, debt in zip(indexes, slots[::3], slots[1::3], slots[2::3], strict=True):
                booked = (float(debt), float(shift))
                grants[n] = RateGrant(max(0.0, float(wait)), int(float(taken)), rpm, tpm, learned, booked)
        return [g for g in grants if g is not None]

    async def _sender(self) -> None:
        """Send the hot path's queued requests: per endpoint one TAKE, and one RESERVE, per round."""
        self._sending = True
        try:
            while True:
                await self._send_wake.wait()
                self._send_wake = anyio.Event()
                async with anyio.create_task_group() as tg:
                    for batch in self._batches():
                        if batch.queued:
                            tg.start_soon(batch.drain)
        finally:
            self._sending = False
            for batch in self._batches():
                batch.abandon()

    async def _flusher(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await self.flush()

    async def flush(self) -> None:
        """Send what is queued now (the background sender does this after every change)."""
        await self.ledger.flush()
        for rates in list(self._rates.values()):
            await rates.flush()

    async def _listen(self) -> None:
        """Wake waiting reservations whenever any process released holds (the SETTLE script publishes)."""
        delay = 0.05
        while True:
            pubsub = self._sub_client.pubsub()
            try:
                await pubsub.subscribe(f"{self.ns}:settled")
                delay = 0.05
                self.ledger.notify()  # anything may have been settled while we were not listening
                async for _message in pubsub.listen():
                    self.ledger.notify()
            except _REFUSED as e:
                raise CoordinatorError(f"coordinator {self.settings.display} refused us: {e}") from None
            except _UNREACHABLE:
                await anyio.sleep(delay)
                delay = min(2 * delay, _MAX_RETRY_S)
            finally:
                with anyio.CancelScope(shield=True):
                    await pubsub.aclose()  # type: ignore[no-untyped-call,unused-ignore]  # older redis-py leaves it untyped


class RedisLedger:
    """SharedLedger over Redis. This process's own figures live here (its writer's spend per scope, its
    outstanding holds), so it can always put them back; Redis sums them over processes."""

    def __init__(self, coordinator: RedisCoordinator) -> None:
        self._c = coordinator
        self.epoch = ""
        self._own: dict[str, float] = {}  # this writer's spend per scope, absolute (shards + settled)
        self._dirty: set[str] = set()
        self._holds: dict[int, tuple[str, tuple[str, ...]]] = {}  # token -> (amount, capped scopes)
        self._releasing: list[int] = []
        self._totals: dict[str, float] = {}
        self._changed = anyio.Event()
        self.reserves = coordinator.batch(self._send_reserves, orphan=self._orphaned)

    @property
    def holding(self) -> bool:
        return bool(self._holds)

    def adopt_baseline(self, own: Mapping[str, float]) -> None:
        for scope, total in own.items():
            self._own[scope] = max(self._own.get(scope, 0.0), total)

    async def reserve(
        self, token: int, caps: Sequence[tuple[str, float | None]], amount_usd: float
    ) -> LedgerVerdict:
        capped = [(scope, cap) for scope, cap in caps if cap is not None]
        if not capped:
            return LedgerVerdict(True)  # nothing to check: spend is still summed through settle
        request = (token, repr(amount_usd), [x for scope, cap in capped for x in (scope, repr(cap))])
        try:
            while True:
                reply = await self.reserves.submit(request)
                if reply[0] == "ok":
                    self._holds[token] = (request[1], tuple(scope for scope, _ in capped))
                    return LedgerVerdict(True)
                if reply[0] == "no":
                    return LedgerVerdict(False, reply[1], int(reply[2]) > 0)
                await anyio.sleep(int(reply[1]) / 1000)  # 'wait': the ledger is being rebuilt
        except BaseException:
            # Cancelled or failed after the script may have run: release whatever it may hold.
            if token not in self._holds:
                self._orphaned(request, ["ok"])
            raise

    async def _send_reserves(self, requests: list[tuple[int, str, list[str]]]) -> list[list[str]]:
        c = self._c

        def args(epoch: str) -> list[Any]:
            out: list[Any] = [c.ns, epoch, c.instance, c.lease_ms, c.writer]
            for token, amount, caps in requests:
                out += [token, amount, len(caps) // 2, *caps]
            return out

        reply = await c.ledger_script("RESERVE", args)
        if reply[0] == "wait":
            return [reply] * len(requests)
        results: list[list[str]] = reply[1]
        return results

    def _orphaned(self, request: tuple[int, str, list[str]], reply: list[str]) -> None:
        """A reservation granted (or perhaps granted) to a caller that is gone: release it."""
        if reply[0] == "ok":
            self._releasing.append(request[0])
            self._c.wake()

    def settle(self, tokens: Sequence[int], scopes: Sequence[str], actual_usd: float) -> None:
        held = {token: hold for token in tokens if (hold := self._holds.pop(token, None)) is not None}
        self._releasing += held
        if held and len(held) == len(tokens):  # every part was checked against a cap: none is passed
            actual_usd = min(actual_usd, sum(float(amount) for amount, _ in held.values()))
        if actual_usd:
            for scope in scopes:
                self._own[scope] = self._own.get(scope, 0.0) + actual_usd
                self._dirty.add(scope)
        self._c.wake()

    async def changed(self) -> None:
        await self._changed.wait()

    def notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def spent(self, scope: str) -> float | None:
        if not self._totals:
            return None
        return self._totals.get(scope, 0.0)

    async def flush(self) -> None:
        """Send queued releases and this writer's new totals (one script for all of them)."""
        if not self._releasing and not self._dirty:
            return
        tokens, self._releasing = self._releasing, []
        dirty, self._dirty = self._dirty, set()
        c = self._c

        def args(epoch: str) -> list[Any]:
            own = [x for scope in dirty for x in (scope, repr(self._own[scope]))]
            return [c.ns, epoch, c.instance, c.writer, len(tokens), *tokens, *own]

        try:
            reply = await c.ledger_script("SETTLE", args)
        except BaseException:
            self._releasing[:0] = tokens  # sent with the next batch
            self._dirty |= dirty
            raise
        self.seen(reply[2])

    def seen(self, totals: Sequence[str]) -> None:
        """The sweep's totals as a script just returned them (what `spent` reports)."""
        self._totals = _floats(totals)

    async def restore(self, *, grace_ms: int, baseline: Baseline, adopt: bool = True) -> None:
        """Put this process's view into Redis: the baseline and its own totals (merged by maximum), its
        outstanding holds (replacing whatever Redis had for this instance). Adopts the epoch, and with
        `adopt` (at start) what Redis says this writer spent, when that is more.

        This writer's entry is its own account alone, never the baseline's: the account began from the
        baseline at start (a dead predecessor's open intents included) and counts every settlement since,
        while a rescan later in the run reads this process's own calls in flight as open intents at their
        worst case (its holds count those); published, they stayed in the ledger, merged by maximum, above
        what was paid (a partition that had settled nothing when Redis came back empty)."""
        c = self._c
        base = {writer: {s: repr(v) for s, v in scopes.items()} for writer, scopes in baseline.items()}
        base[c.writer] = {s: repr(v) for s, v in self._own.items()}
        holds = [[str(token), amount, list(scopes)] for token, (amount, scopes) in self._holds.items()]
        reply = await c.script(
            "RESTORE",
            [],
            [
                c.ns, secrets.token_hex(8), grace_ms, c.instance, c.lease_ms, _LEDGER_TTL, c.writer,
                orjson.dumps(base).decode(), orjson.dumps(holds).decode(),
            ],
        )  # fmt: skip
        self.epoch = reply[0]
        if adopt:
            self.adopt_baseline(_floats(reply[2]))
        self.seen(reply[3])
        self.notify()


class RedisRates:
    """SharedRates for one endpoint key. Refunds, pauses and learned limits are queued and sent by the
    coordinator's background sender, best effort: losing one only makes the sweep more careful."""

    def __init__(self, coordinator: RedisCoordinator, key: str) -> None:
        self._c = coordinator
        self.key = key
        self._refund = 0
        self._refund_tpm = 0
        self._pause_s = 0.0
        self._learned: dict[Window, int] = {}
        self._synced: tuple[Any, ...] | None = None  # the newest reply's SYNC arguments

    async def take(
        self,
        tokens: int,
        *,
        rpm: int | None,
        tpm: int | None,
        fallback: tuple[int | None, int | None],
        tpm_burst_s: float,
    ) -> RateGrant:
        limits = (rpm or 0, tpm or 0, fallback[0] or 0, fallback[1] or 0, repr(tpm_burst_s), _RATE_TTL_MS)
        grant: RateGrant = await self._c.takes.submit((self.key, tokens, limits))
        return grant

    def refund(self, tokens: int, tpm: int) -> None:
        if tokens > 0:
            self._refund += tokens
            self._refund_tpm = tpm
            self._c.wake()

    def pause(self, seconds: float) -> None:
        if seconds > self._pause_s:
            self._pause_s = seconds
            self._c.wake()

    def learn(self, window: Window, limit: int) -> None:
        self._learned[window] = limit
        self._c.wake()

    def sync(self, remaining: int, per_minute: int, capacity: float, booked: tuple[float, float]) -> None:
        self._synced = (remaining, repr(capacity), per_minute, repr(booked[0]), repr(booked[1]), _RATE_TTL_MS)
        self._c.wake()

    async def flush(self) -> None:
        c, key = self._c, [self.key]
        if self._pause_s > 0:
            pause, self._pause_s = self._pause_s, 0.0
            await c.try_script("PAUSE", key, [repr(pause), _RATE_TTL_MS])
        learned, self._learned = self._learned, {}
        for window, limit in learned.items():
            field = "rlearn" if window == "requests" else "tlearn"
            await c.try_script("LEARN", key, [field, limit, _RATE_TTL_MS])
        if self._refund > 0:
            refund, self._refund = self._refund, 0
            await c.try_script("REFUND", key, [refund, self._refund_tpm])
        # After the refunds: what the provider says is the newer truth.
        if self._synced is not None:
            synced, self._synced = self._synced, None
            await c.try_script("SYNC", key, list(synced))


def _pairs(flat: Sequence[str]) -> dict[str, str]:
    return dict(zip(flat[::2], flat[1::2], strict=True))


def _floats(flat: Sequence[str]) -> dict[str, float]:
    return {k: float(v) for k, v in _pairs(flat).items()}


__all__ = ["Baseline", "CoordinatorGone", "RedisCoordinator", "RedisLedger", "RedisRates"]
