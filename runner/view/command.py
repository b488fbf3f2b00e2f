"""`ifsweep view RUN_DIR`: its arguments and what it does. The CLI registers it with `add_view_parser`;
nothing heavy is imported until the command runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ifsweep.runner.errors import UsageError

__all__ = ["add_view_parser", "run_view"]

DEFAULT_PORT = 8765
DEFAULT_SAMPLE = 20  # pairs of the rest an export without filters adds


def add_view_parser(sub: Any) -> None:
    """Add the `view` subcommand to the CLI's subparsers."""
    c = sub.add_parser(
        "view",
        help="a read-only web view of a run directory (every answer, verdict and judge call), or its export",
    )
    c.add_argument("run_dir", type=Path)
    c.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"default {DEFAULT_PORT}; 0: any free port")
    c.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1 (this machine only)")
    c.add_argument(
        "--data",
        type=Path,
        action="append",
        default=[],
        metavar="DIR",
        help="where the benchmark data is, to show prompts (default: the built-in samples and the "
        "download cache)",
    )
    c.add_argument(
        "--gold",
        type=Path,
        metavar="FILE",
        help="gold labels (JSONL, CSV, Parquet; docs/metrics.md): shown beside each judge's verdict, with "
        "an audit section and the filter 'judge disagrees with gold'",
    )
    c.add_argument(
        "--export", type=Path, metavar="FILE.html", help="write one self-contained HTML file and exit"
    )
    g = c.add_argument_group("export filters (default: disagreements, unparsed, errors and a sample)")
    g.add_argument("--benchmark", default="", help="only this benchmark table")
    g.add_argument("--model", default="", help="only this model id")
    for flag, what in (
        ("failed", "a failed constraint"),
        ("unparsed", "an unparsed judge reply"),
        ("errors", "an error"),
        ("disagree", "judges that disagree"),
    ):
        g.add_argument(f"--{flag}", action="store_true", help=f"pairs with {what}")
    g.add_argument(
        "--gold-disagree", action="store_true", help="pairs where a judge disagrees with --gold's labels"
    )
    g.add_argument(
        "--type", default="", dest="ctype", metavar="TYPE", help="pairs with a constraint of this type"
    )
    g.add_argument("--search", default="", help="pairs whose id, answer or judge replies hold this text")
    g.add_argument(
        "--sample",
        type=int,
        default=None,
        help=f"pairs drawn from the rest (default {DEFAULT_SAMPLE} without filters, none with one)",
    )
    g.add_argument("--limit", type=int, default=1000, help="at most this many pairs (default 1000)")
    c.set_defaults(handler=run_view)


def run_view(args: argparse.Namespace) -> int:
    from ifsweep.runner.commands.rundir import require_run_dir

    run_dir: Path = args.run_dir
    require_run_dir(run_dir)
    if (args.sample is not None and args.sample < 0) or args.limit < 1:
        raise UsageError("--sample must be >= 0 and --limit >= 1")
    data = tuple(args.data)
    for d in data:
        if not d.exists():
            raise UsageError(f"--data {d}: no such file or directory")
    if args.export is not None:
        return _export(args, run_dir, data)
    given = [
        flag
        for flag, value, default in (
            ("--benchmark", args.benchmark, ""),
            ("--model", args.model, ""),
            ("--failed", args.failed, False),
            ("--unparsed", args.unparsed, False),
            ("--errors", args.errors, False),
            ("--disagree", args.disagree, False),
            ("--gold-disagree", args.gold_disagree, False),
            ("--type", args.ctype, ""),
            ("--search", args.search, ""),
            ("--sample", args.sample, None),
            ("--limit", args.limit, 1000),
        )
        if value != default
    ]
    if given:  # the served pages filter in the browser: these would do nothing
        raise UsageError(f"{', '.join(given)}: only with --export FILE.html")
    return _serve(args, run_dir, data)


def _export(args: argparse.Namespace, run_dir: Path, data: tuple[Path, ...]) -> int:
    from ifsweep.runner.view.export import Selection, write_export
    from ifsweep.runner.view.filters import Filters
    from ifsweep.runner.view.server import ViewState

    if args.gold_disagree and args.gold is None:
        raise UsageError("--gold-disagree: needs --gold FILE")
    state = ViewState.open(run_dir, data, gold=args.gold)
    filters = Filters(
        args.failed,
        args.unparsed,
        args.errors,
        args.disagree,
        args.ctype,
        args.search.strip(),
        gold=args.gold_disagree,
    )
    # A filter given means what it selects; a sample of the rest only when asked for with it.
    sample = args.sample if args.sample is not None else 0 if filters.any else DEFAULT_SAMPLE
    sel = Selection(filters, args.benchmark, args.model, sample, args.limit)
    done = write_export(state.index, state.source, sel, args.export, state.panel, state.gold)
    size = args.export.stat().st_size
    each = f", {size / done.pairs / 1e3:.1f} KB a pair" if done.pairs else ""
    print(f"[ifsweep] wrote {args.export} ({size / 1e6:.1f} MB{each}): the overview and {done.pairs} pairs")
    if done.without_prompt:
        print(
            f"[ifsweep] warning: {done.without_prompt} of {done.pairs} exported pages lack their prompt and "
            f"constraint texts: {done.why}",
            file=sys.stderr,
        )
    return 0


def _serve(args: argparse.Namespace, run_dir: Path, data: tuple[Path, ...]) -> int:
    import anyio

    from ifsweep.runner.view.server import LOOPBACK, ViewState, bind, serve_forever

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port}: expected 0-65535")
    sock = bind(args.host, args.port)
    if args.host not in LOOPBACK:
        print(
            f"[ifsweep] warning: --host {args.host}: anyone who can reach this address can read the run's "
            "prompts, answers and judge replies (the viewer has no login)",
            file=sys.stderr,
        )
    shards = list((run_dir / "shards").glob("*.jsonl"))
    size = sum(p.stat().st_size for p in shards) / 2**20
    print(
        f"[ifsweep] serving at once; indexing {len(shards)} shard files ({size:.0f} MiB) of {run_dir} "
        "meanwhile",
        file=sys.stderr,
    )
    try:
        state = ViewState.open(run_dir, data, background=True, gold=args.gold)
    except BaseException:
        sock.close()
        raise

    def ready(url: str) -> None:
        print(f"[ifsweep] viewing {run_dir} at {url} (Ctrl-C stops)", flush=True)

    try:
        anyio.run(serve_forever, state, sock, ready)
    except KeyboardInterrupt:
        print("[ifsweep] view stopped", file=sys.stderr)
    finally:
        state.index.close()
    return 0
