"""`ifsweep` command line. Heavy modules (LiteLLM, Polars, aiohttp) load inside the command that needs
them, so `ifsweep --help` and the commands that make no call start at once.

Exit codes: 0 complete, 1 failed, 2 bad usage / config / data, 3 stopped by budget, 130 interrupted.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ifsweep.runner.commands.audit import add_audit_parser
from ifsweep.runner.commands.gold_template import add_gold_parser
from ifsweep.runner.errors import UsageError
from ifsweep.runner.view.command import add_view_parser

if TYPE_CHECKING:
    from ifsweep.runner.config import SweepConfig
    from ifsweep.runner.engine.scheduler import Work

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_BUDGET, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_BROKEN_PIPE = 141  # what a shell reports for a command that SIGPIPE ended


def main(argv: Sequence[str] | None = None) -> int:
    # NumPy's BLAS runs the bootstrap's matrix products; with a thread per core it fights every other
    # busy thread on the machine (paired differences took 20-25 s instead of 3 beside one busy loop).
    # One thread loses little alone. Set before numpy is first imported; a user's own setting wins.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # litellm, when a call goes through it, reads its bundled price map instead of fetching one over
    # HTTPS at import (the library sets this only around the import: providers/pricing.py).
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    # Polars' allocator (jemalloc) keeps what a thread freed for that thread's arena, one of 4 per core;
    # with one arena, what one of a reader's passes freed serves the next on any thread, not a new
    # arena's pages (on the 40-model run: status 330 -> 280 MB, report 307 -> 280 MB, at most 0.2 s
    # slower on 2 cores: docs/design/reading.md). Read when Polars loads: set before a command imports it.
    os.environ.setdefault("_RJEM_MALLOC_CONF", "narenas:1")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["serve-mock"]:
        # Every argument, --help included, belongs to the simulator's own parser; argparse's
        # REMAINDER would stop at a leading option and reject it here.
        return _cmd_serve_mock(argparse.Namespace(rest=argv[1:]))
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return EXIT_USAGE
    try:
        code: int = args.handler(args)
        sys.stdout.flush()  # a reader gone: raised here, not at exit where Python prints it
        return code
    except BrokenPipeError:
        return _reader_gone()
    except KeyboardInterrupt:
        print("[ifsweep] interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:
        if _is_user_error(e):
            print(f"ifsweep: error: {e}", file=sys.stderr)
            return EXIT_USAGE
        raise


def _reader_gone() -> int:
    """`ifsweep status | head`: the reader closed the pipe. Quiet, as a Unix tool killed by SIGPIPE is
    (exit 128 + 13), and stdout pointed at /dev/null so that the interpreter's own flush at exit has
    nowhere to fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE


def _is_user_error(e: Exception) -> bool:
    from ifsweep.benchmarks import BenchmarkLoadError, DataError
    from ifsweep.runner.config import ConfigError

    names = {cls.__name__ for cls in type(e).__mro__}
    # DownloadError, IncompatibleRun, UnknownPrice and verdict rows that break the contract are
    # user-fixable too; matched by name so this module need not import the modules that define them.
    return isinstance(e, ConfigError | DataError | UsageError | BenchmarkLoadError) or bool(
        names
        & {
            "DownloadError",
            "IncompatibleRun",
            "UnknownPrice",
            "ManifestError",
            "WriterBusyError",
            "CoordinatorError",
            "VerdictError",
        }
    )


_Commands = argparse._SubParsersAction  # the subcommands of a parser


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="ifsweep",
        description="Evaluate many LLMs on constraint-following benchmarks in one budgeted, resumable sweep.",
    )
    sub = p.add_subparsers(metavar="COMMAND")
    for add in (_sweep_commands, _reading_commands, _other_commands):  # in the order --help lists them
        add(sub)
    return p


def _sweep_commands(sub: _Commands[argparse.ArgumentParser]) -> None:
    """run and plan: a config's sweep, or what it would take."""
    c = sub.add_parser("run", help="run (or resume) the sweep a TOML config describes")
    c.add_argument("config", type=Path)
    c.add_argument(
        "--partition",
        metavar="I/N",
        help="run only partition I of N (0-based) of the keys (default: from a Slurm array task or a "
        "Kubernetes Indexed Job, see docs/resume.md)",
    )
    c.add_argument(
        "--no-retry-errors", action="store_true", help="keep stored error records instead of retrying"
    )
    c.add_argument("--progress", choices=["auto", "rich", "plain", "off"], help="override run.progress")
    c.add_argument(
        "--max-usd",
        type=_dollars,
        metavar="X",
        help="the sweep's budget cap for this run, in place of run.max_usd (recorded in the summary)",
    )
    c.set_defaults(handler=_cmd_run)

    c = sub.add_parser(
        "plan", help="planned calls, tokens, cost and time of a config, before anything is spent"
    )
    c.add_argument("config", type=Path)
    c.set_defaults(handler=_cmd_plan)


def _reading_commands(sub: _Commands[argparse.ArgumentParser]) -> None:
    """What reads a run directory (or verdict rows) without sending anything."""
    c = sub.add_parser("report", help="metrics of a run directory")
    c.add_argument("run_dir", type=Path)
    c.add_argument("--format", choices=["table", "json", "csv", "md", "html"], default="table")
    c.add_argument("--out", type=Path, help="write to this file instead of standard output")
    c.add_argument("--ci", action="store_true", help="add bootstrap 95%% intervals")
    c.add_argument(
        "--judge",
        metavar="ID|all|majority",
        help="whose verdicts: a judge's id, all (each apart), or majority (the panel's vote); "
        "default: the first configured judge",
    )
    c.add_argument(
        "--gold", type=Path, metavar="FILE", help="gold labels (JSONL, CSV, Parquet): the judge's audit"
    )
    c.add_argument(
        "--correct",
        metavar="ppi|rg",
        help="headline metrics corrected for judge error with --gold: PPI++ per model, or Rogan-Gladen",
    )
    c.set_defaults(handler=_cmd_report)

    c = sub.add_parser("agreement", help="how much a run's judges agree, and how the ranking moves")
    c.add_argument("run_dir", type=Path)
    c.add_argument("--format", choices=["text", "json"], default="text")
    c.add_argument("--judges", metavar="A,B,...", help="these judges (default: the configured ones)")
    c.add_argument("--resamples", type=int, default=1000, help="bootstrap resamples (0: no intervals)")
    c.add_argument("--seed", type=int, default=0, help="the bootstrap's seed")
    c.set_defaults(handler=_cmd_agreement)
    add_audit_parser(sub)  # ifsweep audit: runner/commands/audit.py
    add_gold_parser(sub)  # ifsweep gold template: runner/commands/gold_template.py

    c = sub.add_parser("metrics", help="metrics of verdict-row files (JSONL or Parquet)")
    c.add_argument("rows", type=Path, nargs="+")
    c.add_argument("--format", choices=["json", "csv", "md", "table"], default="json")
    c.add_argument("--ci", action="store_true", help="add bootstrap 95%% intervals")
    c.set_defaults(handler=_cmd_metrics)

    c = sub.add_parser("status", help="planned / done / errors / spent of a run directory (no network)")
    c.add_argument("run_dir", type=Path)
    c.add_argument("--json", action="store_true", help="the per-model rows and completeness as JSON")
    c.set_defaults(handler=_cmd_status)

    c = sub.add_parser("batches", help="a run's open Batch API batches, with their status at the provider")
    c.add_argument("run_dir", type=Path)
    c.add_argument("--cancel", action="store_true", help="cancel them at the provider")
    c.add_argument("--force", action="store_true", help="cancel even while a run writes the directory")
    c.set_defaults(handler=_cmd_batches)

    c = sub.add_parser("compact", help="write Parquet beside a run directory's shards")
    c.add_argument("run_dir", type=Path)
    c.set_defaults(handler=_cmd_compact)


def _other_commands(sub: _Commands[argparse.ArgumentParser]) -> None:
    """The demo, the simulator, the benchmarks' data and imports of the reference tools' results."""
    c = sub.add_parser(
        "demo", help="a sweep of simulated models on the built-in samples (no keys, no network)"
    )
    c.add_argument(
        "--out", type=Path, default=Path("ifsweep-demo"), help="run directory (default ./ifsweep-demo)"
    )
    c.set_defaults(handler=_cmd_demo)

    c = sub.add_parser("serve-mock", help="the built-in OpenAI-compatible simulator", add_help=False)
    c.add_argument("rest", nargs=argparse.REMAINDER)
    c.set_defaults(handler=_cmd_serve_mock)

    b = sub.add_parser("benchmarks", help="list the benchmarks, or check a data set's counts")
    bsub = b.add_subparsers(metavar="ACTION")
    c = bsub.add_parser("list", help="the supported benchmarks and their options")
    c.set_defaults(handler=_cmd_bench_list)
    c = bsub.add_parser("check", help="load and validate a benchmark's data; print its counts")
    c.add_argument("name")
    c.add_argument("--data", type=Path, help="a local copy (default: the pinned download)")
    c.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="a benchmark option")
    c.set_defaults(handler=_cmd_bench_check)

    c = sub.add_parser("import", help="turn a reference tool's output files into a run directory")
    c.add_argument("benchmark")
    c.add_argument("files", type=Path, nargs="+")
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--scoring", choices=["paper", "reference"], default="paper")
    c.add_argument("--data", type=Path, help="the benchmark's data, where the output files lack fields")
    c.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="a benchmark option")
    c.set_defaults(handler=_cmd_import)
    add_view_parser(sub)  # ifsweep view: runner/view/


# ---------------------------------------------------------------------------------------------- commands


def _cmd_run(args: argparse.Namespace) -> int:
    import anyio

    from ifsweep.runner.config import check_output_dir, load_config
    from ifsweep.runner.engine.process import OwnedProcess
    from ifsweep.runner.engine.sweep import check_ready, run_sweep

    partition = _partition(args.partition)
    cfg = _with_cap(load_config(args.config), args.max_usd)
    check_output_dir(cfg)
    work = _load_work(cfg)
    check_ready(cfg, work)
    from ifsweep.runner.store.shards import DISK_FULL_ADVICE, DiskFullError

    try:
        result = anyio.run(
            lambda: run_sweep(
                cfg,
                work,
                partition=partition,
                progress=args.progress,
                retry_errors=False if args.no_retry_errors else None,
                process=OwnedProcess(),  # this command owns its process: signals, GC, allocator
            )
        )
    except DiskFullError as e:  # before anything ran (the manifest): the same stop as during the run
        print(f"[ifsweep] failed: {e.strerror}; nothing was run; {DISK_FULL_ADVICE}", file=sys.stderr)
        return EXIT_FAILED
    _print_result(result, cfg.run.output_dir)
    return result.exit_code


def _dollars(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of dollars: {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"a cap must be a finite number >= 0, got {text!r}")
    return value


def _with_cap(cfg: SweepConfig, max_usd: float | None) -> SweepConfig:
    """`cfg` capped at `max_usd` for this run (`--max-usd`); the config's own cap stays what the manifest
    records, so the next run without the flag resumes under it."""
    if max_usd is None:
        return cfg
    import dataclasses

    was = "no cap" if cfg.run.max_usd is None else f"${cfg.run.max_usd:g}"
    print(f"[ifsweep] budget cap ${max_usd:g} for this run (--max-usd; config: {was})", file=sys.stderr)
    return dataclasses.replace(cfg, run=dataclasses.replace(cfg.run, max_usd_flag=max_usd))


def _load_work(cfg: SweepConfig) -> Work:
    """The benchmarks' instances; a data file the OS will not read is the user's to fix (exit 2)."""
    from ifsweep.runner.engine.sweep import load_work

    try:
        return load_work(cfg)
    except OSError as e:
        detail = f"{e.strerror}: {e.filename}" if e.strerror and e.filename else str(e)
        raise UsageError(f"{cfg.path}: benchmark data cannot be read: {detail}") from None


def _partition(text: str | None) -> tuple[int, int] | None:
    from ifsweep.runner.engine.partition import parse_partition, partition_from_env

    if text is not None:
        try:
            return parse_partition(text)
        except ValueError as e:
            raise UsageError(f"--partition: {e}") from None
    try:
        found = partition_from_env(os.environ)
    except ValueError as e:
        raise UsageError(f"partition from the environment: {e}") from None
    if found is None:
        return None
    partition, source = found
    print(f"[ifsweep] partition {partition.i}/{partition.n} (from {source})", file=sys.stderr)
    return partition


def _print_result(result: object, run_dir: Path) -> None:
    from ifsweep.runner.engine.sweep import SweepResult
    from ifsweep.runner.watch.outcomes import spend_text

    assert isinstance(result, SweepResult)
    line = (
        f"[ifsweep] {result.status}: {result.done}/{result.planned} done, {result.errors} errors, "
        f"{spend_text(result.spent_usd, result.worst_case_usd)} -> {run_dir}"
    )
    print(line, file=sys.stderr)
    if result.rescored:
        print(
            f"[ifsweep] re-scored {result.rescored} verdicts from the stored replies: the code that "
            "derives them changed",
            file=sys.stderr,
        )
    if result.message:
        print(f"[ifsweep] {result.message}", file=sys.stderr)
    if result.status == "budget_exhausted":
        print("[ifsweep] raise max_usd and run the same command again to resume", file=sys.stderr)


def _cmd_plan(args: argparse.Namespace) -> int:
    from ifsweep.runner.commands.planning import (
        done_instances,
        estimate,
        render_estimate,
        render_progress,
        render_strata,
    )
    from ifsweep.runner.config import load_config

    cfg = load_config(args.config, check_env=False)
    work = _load_work(cfg)
    # A directory with results: what remains first, and what is done (issue 36).
    done = done_instances(cfg.run.output_dir, [j.label for j in cfg.judges])
    rows = estimate(cfg, work, done=done)
    if done:
        print(render_progress(rows, cfg.run.output_dir, work, done, len(cfg.models)))
    print(render_estimate(rows))
    print("\n" + render_strata(cfg, work))
    _print_window_warnings(cfg, work)
    return _check_prices_as_run_would(cfg)


def _check_prices_as_run_would(cfg: SweepConfig) -> int:
    """What `run` will say of the prices, said by `plan` first: a model or judge without a price under
    a cap is refused (exit 2, with the fix); without a cap it runs, uncounted (a note)."""
    from ifsweep.providers.pricing import check_prices, resolve_price
    from ifsweep.providers.records import UnknownPrice
    from ifsweep.runner.engine.sweep import specs_of

    specs = specs_of(cfg)
    try:
        check_prices(specs, sweep_cap=cfg.run.max_usd is not None)
    except UnknownPrice as e:
        print(f"ifsweep: error: `ifsweep run` will refuse this config: {e}", file=sys.stderr)
        return EXIT_USAGE
    missing = [f"{s.label} ({s.model})" for s in specs if resolve_price(s) is None]
    if missing:
        print(
            f"[ifsweep] note: no price is known for {', '.join(missing)}: the totals leave it out and "
            "`ifsweep run` cannot count what it spends (no cap applies); give it a price in the config, "
            "e.g. price = { input_per_mtok = 0.15, output_per_mtok = 0.60 }",
            file=sys.stderr,
        )
    return EXIT_OK


def _print_window_warnings(cfg: SweepConfig, work: Work) -> None:
    """Prompts over a model's (or the judge's) context window: they could only end in error."""
    from ifsweep.runner.commands.windows import check_windows, window_warnings

    warnings = window_warnings(check_windows(cfg, work))
    if warnings:
        print("\n" + "\n".join(warnings))


def _cmd_report(args: argparse.Namespace) -> int:
    from ifsweep.runner.commands.reporting import report

    text = report(
        args.run_dir,
        fmt=args.format,
        ci=args.ci,
        out=args.out,
        judge=args.judge,
        gold=args.gold,
        correct=args.correct,
    )
    if args.out is None:
        print(text)
    return EXIT_OK


def _cmd_agreement(args: argparse.Namespace) -> int:
    from ifsweep.runner.commands.agreement import render_agreement, run_agreement

    if args.resamples < 0:
        raise UsageError(f"--resamples: expected a whole number >= 0, got {args.resamples}")
    judges = [j.strip() for j in args.judges.split(",") if j.strip()] if args.judges else None
    found = run_agreement(args.run_dir, judges=judges, resamples=args.resamples, seed=args.seed)
    print(render_agreement(found, args.format))
    return EXIT_OK


def _cmd_metrics(args: argparse.Namespace) -> int:
    from ifsweep.runner.commands.reporting import metrics_of_files

    print(metrics_of_files(args.rows, fmt=args.format, ci=args.ci))
    return EXIT_OK


def _cmd_status(args: argparse.Namespace) -> int:
    from ifsweep.runner.commands.reporting import render_status, status_json

    print(status_json(args.run_dir) if args.json else render_status(args.run_dir))
    return EXIT_OK


def _cmd_batches(args: argparse.Namespace) -> int:
    import anyio

    from ifsweep.runner.engine.batches import show_batches

    if not (args.run_dir / "shards").is_dir():
        print(f"ifsweep batches: {args.run_dir} is not a run directory (no shards/)", file=sys.stderr)
        return 2
    return anyio.run(show_batches, args.run_dir, args.cancel, args.force)


def _cmd_compact(args: argparse.Namespace) -> int:
    from ifsweep.runner.commands.rundir import require_run_dir
    from ifsweep.runner.store.compact import compact

    require_run_dir(args.run_dir)
    r = compact(args.run_dir)
    print(
        f"[ifsweep] compacted {args.run_dir} into {r.directory}: {r.generations:,} answers, "
        f"{r.judgments:,} judge calls, {r.verdicts:,} verdicts ({r.verdict_rows:,} verdict rows)"
    )
    for d in r.damaged:
        print(f"[ifsweep] skipped a damaged shard line: {d}", file=sys.stderr)
    return EXIT_OK


def _cmd_demo(args: argparse.Namespace) -> int:
    from ifsweep.runner.commands.demo import run_demo
    from ifsweep.runner.engine.process import OwnedProcess

    return run_demo(args.out, OwnedProcess())


def _cmd_serve_mock(args: argparse.Namespace) -> int:
    from ifsweep.simulator import serve_main

    return serve_main(list(args.rest))


def _cmd_bench_list(args: argparse.Namespace) -> int:
    from ifsweep import benchmarks

    loaded = benchmarks.load_all()
    for bench in loaded.benchmarks:
        opts = ", ".join(sorted(bench.options)) or "-"
        print(f"{bench.name:12s} {bench.display_name:14s} options: {opts}")
    # A broken plugin is listed as broken, and the others stay usable.
    for error in loaded.errors:
        print(f"ifsweep: error: {error}", file=sys.stderr)
    return EXIT_FAILED if loaded.errors else EXIT_OK


def _cmd_bench_check(args: argparse.Namespace) -> int:
    from ifsweep.runner.commands.checking import check_benchmark, parse_options

    print(check_benchmark(args.name, args.data, parse_options(args.option)))
    return EXIT_OK


def _cmd_import(args: argparse.Namespace) -> int:
    from ifsweep.runner.commands.checking import parse_options
    from ifsweep.runner.commands.importing import import_reference
    from ifsweep.runner.store.verify import IncompleteVerdicts

    options = parse_options(args.option)
    try:
        summary = import_reference(
            args.benchmark, args.files, out=args.out, scoring=args.scoring, data=args.data, options=options
        )
    except IncompleteVerdicts as e:
        print(f"ifsweep: error: {e}", file=sys.stderr)
        return EXIT_FAILED
    print(summary)
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
