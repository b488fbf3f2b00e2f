"""The viewer's HTTP server: aiohttp on a socket bound before anything is served, read-only.

One handler sees every request and routes on the raw path, split into percent-decoded segments, so a
name holding "/" (model ids often do) stays one segment, and nothing is ever joined into a file path:
assets are looked up by name in a fixed table. Any method but GET and HEAD gets 405. Pages say where
they may load from (Content-Security-Policy 'self'), so a page can reach no other host.
"""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import socket
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from ifsweep.runner.errors import UsageError
from ifsweep.runner.view.detail import instance_detail
from ifsweep.runner.view.filters import Filters
from ifsweep.runner.view.gold import GoldMarks, audit_html, load_gold_marks
from ifsweep.runner.view.html import ASSETS, UrlLinks, asset, esc, page
from ifsweep.runner.view.index import RunIndex, count_lines
from ifsweep.runner.view.instance_page import Walk, instance_page
from ifsweep.runner.view.overview import Leaderboards, Overview, leaderboards, overview, shards_state
from ifsweep.runner.view.pages import list_page, matching, overview_page
from ifsweep.runner.view.sources import InstanceSource

if TYPE_CHECKING:
    from aiohttp import web

__all__ = ["LOOPBACK", "ViewState", "bind", "make_app", "serve_forever"]

LOOPBACK = ("127.0.0.1", "localhost", "::1")
_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; form-action 'self'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}
OVERVIEW_EVERY_S = 2.0  # while shards grow, the leaderboards are recomputed at most this often
# Bytes of shards the first pass reads between two looks at the requests waiting: a few thousand
# records, tens of milliseconds on a loaded machine.
STEP_BYTES = 1 << 20
# How long a list or instance page the index does not hold yet waits for the first pass to end.
WAIT_FIRST_PASS_S = 15.0


@dataclass(eq=False, slots=True)
class ViewState:
    """The index and the data source the pages read; the last leaderboards and overview made.

    A server's index starts empty and is filled by `build_index` after the URL is printed, a step at a
    time on a worker thread that holds `lock` for each step, as a request does while its page is made:
    pages are answered between steps and count only what is indexed, saying so ("indexing: 230,000 of
    600,000 records"). Requests refresh the index themselves only once that first pass is done."""

    index: RunIndex
    source: InstanceSource
    panel: tuple[str, ...] = ()
    links: UrlLinks = field(default_factory=UrlLinks)
    boards: Leaderboards = field(default_factory=lambda: Leaderboards(note="computing the metrics..."))
    indexing: bool = False  # the first pass over the shards is under way
    total_lines: int | None = None  # lines the shards held when it began (counted on a worker thread)
    index_error: str = ""  # why the first pass stopped short, if it did (the pages then stay as they are)
    _boards_seen: tuple[tuple[str, int], ...] | None = None  # the shards the leaderboards were read from
    _computing: bool = False
    _overview: Overview | None = None
    _overview_seen: tuple[int, float, str] = (-1, 0.0, "")
    _first_pass: Any = None  # an anyio.Event, set when the first pass ends (made in the server's loop)
    lock: threading.Lock = field(default_factory=threading.Lock)
    gold: GoldMarks | None = None  # `--gold FILE`: its labels (runner/view/gold.py)

    @classmethod
    def open(
        cls,
        run_dir: Path,
        data_dirs: tuple[Path, ...] = (),
        *,
        background: bool = False,
        gold: Path | None = None,
    ) -> ViewState:
        """`background`: leave the index empty for `build_index` (a server); else build it now (an
        export). `gold`: a gold file, bound to the run now (a bad one is refused before serving)."""
        from ifsweep.runner.store.manifest import ManifestError, read_manifest

        try:
            manifest = read_manifest(run_dir)
        except ManifestError:
            manifest = None  # an old or damaged manifest: the records still show, the prompts do not
        panel = manifest.judge_order if manifest is not None else ()
        index = RunIndex(Path(run_dir)) if background else RunIndex.build(run_dir)
        marks = load_gold_marks(Path(run_dir), gold) if gold is not None else None
        return cls(index, InstanceSource(manifest, data_dirs), panel, indexing=background, gold=marks)

    async def build_index(self, step: int = STEP_BYTES) -> None:
        """The first pass over the shards, `step` bytes at a time on a worker thread (the event loop stays
        free to answer, and a request waits at most one step for the lock); meanwhile the lines are
        counted and the leaderboards computed."""
        import anyio
        import anyio.to_thread

        async def count_then_boards() -> None:  # one after the other: each thread takes its turns at
            # the GIL, and the event loop's turns are what a request waits for
            with contextlib.suppress(OSError):  # the first pass meets the same error and says it
                self.total_lines = await anyio.to_thread.run_sync(count_lines, self.index.run_dir)
            await self.recompute_boards()

        def one_step() -> bool:
            with self.lock:
                self.index.refresh(step)
                return self.index.behind

        async with anyio.create_task_group() as tg:
            tg.start_soon(count_then_boards)
            try:
                while await anyio.to_thread.run_sync(one_step):
                    pass
                self.indexing = False
            except OSError as e:  # a shard that cannot be read: serve what was read, saying where it stopped
                self.index_error = str(e)
            finally:
                self.first_pass_over().set()

    def first_pass_over(self) -> Any:
        """The anyio.Event set when the first pass ends, done or stopped short."""
        import anyio

        if self._first_pass is None:
            self._first_pass = anyio.Event()
        return self._first_pass

    def refresh(self) -> None:
        """What the shards gained, before a page is made; nothing while the first pass reads them."""
        if not self.indexing:
            self.index.refresh()

    def progress(self) -> str:
        """What the first pass has read, for the pages ("" once it is done)."""
        if not self.indexing:
            return ""
        read, total = self.index.lines_read, self.total_lines
        if self.index_error:
            return f"indexing stopped at {read:,} records: {self.index_error}"
        if total is None or read > total:
            return f"indexing: {read:,} records so far"
        return f"indexing: {read:,} of {total:,} records"

    @property
    def run(self) -> str:
        return self.index.run_dir.resolve().name

    def judges(self) -> list[str | None]:
        found = self.index.judges
        return [j for j in self.panel if j in found] + [j for j in found if j not in self.panel] or [None]

    def boards_stale(self) -> bool:
        """The shards changed since the leaderboards were read, and they are old enough to redo: at
        least 2 s, and five times what they took (a large run's, read from its shards, take seconds of
        the CPU the sweep itself is using)."""
        wait = max(OVERVIEW_EVERY_S, 5 * self.boards.took_s)
        return (
            not self._computing
            and time.time() - self.boards.read_at >= wait
            and shards_state(self.index.run_dir) != self._boards_seen
        )

    async def recompute_boards(self) -> None:
        """The leaderboards again, on a worker thread: pages are served meanwhile, with the last ones."""
        import anyio.to_thread

        self._computing, seen = True, shards_state(self.index.run_dir)
        try:
            self.boards = await anyio.to_thread.run_sync(leaderboards, self.index.run_dir)
        except Exception as e:  # a shard being rewritten, a disk error: say so, keep serving the records
            self.boards = Leaderboards(note=f"metrics could not be read: {e}", read_at=time.time())
        finally:
            self._boards_seen = seen
            self._computing = False

    def overview(self) -> Overview:
        self.refresh()
        seen = (self.index.version, self.boards.read_at, self.progress())
        if self._overview is None or seen != self._overview_seen:
            made = overview(self.index, self.boards, self.panel, seen[2])
            self._overview, self._overview_seen = made, seen
        return self._overview


def _html(text: str, status: int = 200) -> web.Response:
    from aiohttp import web

    return web.Response(text=text, status=status, content_type="text/html", headers=_HEADERS)


def _not_found(what: str, state: ViewState | None = None) -> web.Response:
    """404; while the first pass reads the shards, it says that the page may only not be read yet."""
    progress = state.progress() if state is not None else ""
    if progress and state is not None and state.index_error:
        what = f"{what} ({progress})"
    elif progress:
        what = f"{what} yet ({progress}; try again when it is done)"
    return _html(page("not found", f"<h1>Not found</h1><p>{esc(what)}</p>"), 404)


def route(state: ViewState, segments: list[str], query: dict[str, str]) -> web.Response:
    """The response to a GET of these path segments (already percent-decoded)."""
    from aiohttp import web

    if segments == [""]:
        return _html(overview_page(state.overview(), state.links, _audit(state)))
    head, rest = segments[0], segments[1:]
    if segments == ["favicon.ico"]:  # browsers ask for it: no icon, and no 404 in their console
        return web.Response(status=204, headers=_HEADERS)
    if head == "static" and len(rest) == 1 and rest[0] in ASSETS:
        return web.Response(body=asset(rest[0]), content_type=ASSETS[rest[0]], headers=_HEADERS)
    if head == "list" and len(rest) == 2:
        state.refresh()
        if tuple(rest) not in state.index.groups:
            return _not_found(f"the run holds nothing of model {rest[1]!r} on {rest[0]!r}", state)
        try:
            page_no = int(query.get("page", "1"))
        except ValueError:
            page_no = 1
        f = Filters.from_query(query)
        judges = state.judges()
        return _html(
            list_page(
                state.index, rest[0], rest[1], f, page_no, state.links, judges, state.progress(), state.gold
            )
        )
    if head == "instance" and len(rest) == 3:
        state.refresh()
        d = instance_detail(state.index, state.source, rest[0], rest[1], rest[2], state.panel)
        if d is None:
            what = f"the run holds nothing of instance {rest[2]!r} for {rest[1]!r} on {rest[0]!r}"
            return _not_found(what, state)
        gold = state.gold.of(rest[0], rest[1], rest[2]) if state.gold is not None else None
        return _html(instance_page(d, state.links, state.run, _walk(state, rest, query), gold))
    return _not_found("no such page")


def _audit(state: ViewState) -> str:
    """The overview's audit section, with a gold file."""
    if state.gold is None:
        return ""
    groups = [(g, state.index.ordered(g)) for g in sorted(state.index.groups)]
    return audit_html(state.gold, groups, state.judges())


Spawn = Callable[[Callable[[], Coroutine[Any, Any, None]]], None]


def loopback_hosts(port: int) -> frozenset[str]:
    """The Host headers a loopback-bound viewer answers: a page of another site that a rebound DNS name
    points at 127.0.0.1 sends its own name, and gets nothing (as Jupyter does)."""
    return frozenset(f"{h}:{port}" for h in ("127.0.0.1", "localhost", "[::1]"))


def _answered(sock: socket.socket) -> frozenset[str] | None:
    host, port = sock.getsockname()[:2]
    try:
        loopback = ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        loopback = False
    return loopback_hosts(port) if loopback else None


def _walk(state: ViewState, names: list[str], query: dict[str, str]) -> Walk | None:
    """Previous and next in the list the instance page was opened from, with that list's filters."""
    f = Filters.from_query(query)
    kept = [e.instance_id for e in matching(state.index, names[0], names[1], f, state.gold)]
    try:
        at = kept.index(names[2])
    except ValueError:
        return None  # not in that list (any more): no walk
    before = kept[at - 1] if at > 0 else None
    after = kept[at + 1] if at + 1 < len(kept) else None
    return Walk(f.query(), before, after, at + 1, len(kept))


def make_app(
    state: ViewState, spawn: Spawn | None = None, hosts: frozenset[str] | None = None
) -> web.Application:
    """`spawn` starts background work (the leaderboards' recomputation) in the server's task group;
    `hosts`: the Host headers answered (None: any, for a viewer bound to another interface on purpose)."""
    from aiohttp import web

    async def handle(request: web.Request) -> web.StreamResponse:
        if hosts is not None and request.headers.get("Host", "").lower() not in hosts:
            return web.Response(status=403, text="unknown Host header\n", headers=_HEADERS)
        if request.method not in ("GET", "HEAD"):
            return web.Response(
                status=405, text="read-only: GET and HEAD only\n", headers={"Allow": "GET, HEAD", **_HEADERS}
            )
        # The path as sent: percent-encoded slashes stay inside their segment, and ".." is just a name.
        raw = request.raw_path.split("?", 1)[0]
        segments = [unquote(s) for s in raw.split("/")[1:]]
        with state.lock:  # the first pass's steps run on a worker thread: never while a page is made
            response = route(state, segments, dict(request.query))
        if response.status == 404 and segments[0] in ("list", "instance"):
            response = await _after_first_pass(state, segments, dict(request.query), response)
        if segments == [""] and spawn is not None and state.boards_stale():
            spawn(state.recompute_boards)
        return response

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


async def _after_first_pass(
    state: ViewState, segments: list[str], query: dict[str, str], response: web.Response
) -> web.Response:
    """A page the index does not hold while its first pass still reads the shards: asked again once
    the pass is done (within WAIT_FIRST_PASS_S), so a link followed early (a bookmark, an export's, a
    viewer started a moment ago) is not answered Not found for a pair only not read yet."""
    import anyio

    if state.indexing and not state.index_error:
        with anyio.move_on_after(WAIT_FIRST_PASS_S):
            await state.first_pass_over().wait()
    if state.indexing:
        return response  # still reading (or stopped short): the 404 says how far it got
    with state.lock:
        return route(state, segments, query)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket, or a UsageError that says why not (a port in use, a host that is not ours)."""
    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except socket.gaierror as e:
        raise UsageError(f"--host {host}: cannot be resolved ({e.strerror})") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT only; a listener still wins
        sock.bind(addr)
        sock.listen(128)
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise UsageError(
                f"port {port} on {host} is already in use; pick another with --port (0: any free port)"
            ) from None
        raise UsageError(f"cannot listen on {host}:{port}: {e.strerror}") from None
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


async def serve_forever(state: ViewState, sock: socket.socket, ready: Callable[[str], None]) -> None:
    """Serve until cancelled (Ctrl-C); `ready` gets the URL once requests are answered."""
    import anyio
    from aiohttp import web

    async with anyio.create_task_group() as tg:

        def spawn(work: Callable[[], Coroutine[Any, Any, None]]) -> None:
            tg.start_soon(work)

        hosts = _answered(sock)
        runner = web.AppRunner(make_app(state, spawn, hosts), access_log=None, handle_signals=False)
        await runner.setup()
        try:
            site = web.SockSite(runner, sock)
            await site.start()
            ready(url_of(sock))
            if state.indexing:
                tg.start_soon(state.build_index)
            await anyio.sleep_forever()
        finally:
            await runner.cleanup()
