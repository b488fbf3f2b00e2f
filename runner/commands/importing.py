"""`ifsweep import`: reference tools' output files -> a run directory that `report` reads.

The stored answers and judge replies are replayed through the same pipeline a live run uses, by
endpoints that answer from the files instead of the network, so imported verdicts are scored by exactly
the code that scores our own runs. Each (model, instance) is replayed on endpoints of its own, whose
identity names the instance and the stored text: two instances with equal prompts keep their own answers,
judge replies and verdicts, and a changed file is a new result rather than a stale cached one.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import orjson

from ifsweep import benchmarks
from ifsweep.benchmarks import Benchmark, DataError, ImportedResult, Message
from ifsweep.providers.records import Completion, EndpointSpec
from ifsweep.runner.config import BenchmarkConfig, ScoringMode
from ifsweep.runner.engine.pipeline import BenchJob, Pipeline
from ifsweep.runner.errors import UsageError
from ifsweep.runner.store.keys import Identity
from ifsweep.runner.store.locks import lock_run
from ifsweep.runner.store.manifest import older_records
from ifsweep.runner.store.shards import SHARDS_DIR, RunStore, record_key
from ifsweep.runner.store.verify import Planned, check_verdicts, planned_verdicts
from ifsweep.runner.watch.outcomes import Counters


def _canon(messages: Sequence[Mapping[str, str]]) -> bytes:
    return orjson.dumps([{"role": m["role"], "content": m["content"]} for m in messages])


@dataclass(slots=True)
class ReplayEndpoint:
    """Answers a request with the reply a reference tool stored for exactly that conversation."""

    spec: EndpointSpec
    replies: dict[bytes, str] = field(default_factory=dict)
    caches_prefixes: bool = False  # nothing is sent: no prefix to warm

    def add(self, messages: Sequence[Message], reply: str) -> None:
        self.replies[_canon([m.as_dict() for m in messages])] = reply

    async def complete(
        self, messages: Sequence[Mapping[str, str]], cache: object = None, *, key: str | None = None
    ) -> Completion:
        reply = self.replies.get(_canon(messages))
        if reply is None:
            return Completion(status="error", text=None, error_kind="other", error_message="no stored reply")
        return Completion(status="ok" if reply else "empty", text=reply, path="fast")


def replay_identity(spec: EndpointSpec) -> Identity:
    """Where an imported reply came from: the file's record named in `api_base` (see `_endpoints`)."""
    return {"provider": "import", "api_base": spec.api_base, "model": spec.model, "path": "replay"}


def _endpoints(bench: Benchmark, job: BenchJob, r: ImportedResult) -> tuple[ReplayEndpoint, ReplayEndpoint]:
    """The model and judge endpoints that replay `r`: their identity is the instance plus a hash of the
    stored texts, so keys are per instance and a re-import of changed files scores the new texts."""
    where = f"import:{job.cfg.label}/{r.instance.instance_id}"
    model = ReplayEndpoint(
        EndpointSpec(label=r.model, model=f"imported/{r.model}", api_base=f"{where}#{record_key(r.response)}")
    )
    model.add(r.instance.messages, r.response)
    stored = sorted((task, turn, reply) for (task, turn), reply in r.replies.items())
    judge = ReplayEndpoint(
        EndpointSpec(
            label="imported-judge",
            model="imported/judge",
            api_base=f"{where}/{r.model}#{record_key(stored)}",
        )
    )
    for task in bench.plan(r.instance, r.response, job.cfg.scoring).judge_tasks:
        earlier: tuple[str, ...] = ()
        for t in range(len(task.turns)):
            reply = r.replies.get((task.task_idx, t))
            if reply is None:
                break
            judge.add(task.messages_for_turn(t, earlier), reply)
            earlier = (*earlier, reply)
    return model, judge


def import_reference(
    name: str,
    files: list[Path],
    *,
    out: Path,
    scoring: ScoringMode,
    data: Path | None = None,
    options: Mapping[str, Any] | None = None,
) -> str:
    """Replay the answers and judge replies stored in `files` (a reference tool's output) into the run
    directory `out`, scored in `scoring` mode; a one-line summary. A (model, instance) whose judge reply
    is missing gets an error verdict, never a guessed one, unless the reference leaves that constraint
    out of its scores (`ImportedResult.unscored`, reference mode only). A verdict an earlier import wrote
    for the same (benchmark, model, instance, scoring) is replaced (runner.store.keys: one slot, one
    current verdict); a directory holding the benchmark's verdicts in the other scoring mode is refused.
    Raises IncompleteVerdicts when a replayed pair ends without a verdict of its own."""
    opts = dict(options or {})
    bench, reader = _importer(name, files, data, opts)
    try:
        bench.validate_options(opts)
        results: list[ImportedResult] = list(reader(files, data, opts, mode=scoring))
    except DataError:
        raise
    except ValueError as e:
        # Readers say what is missing (EIFBench and FollowBench need --data) with a plain ValueError.
        raise UsageError(str(e)) from None
    if not results:
        raise UsageError(f"{name}: no answers found in {', '.join(map(str, files))}")
    out.mkdir(parents=True, exist_ok=True)
    why = older_records(out)
    if why is not None:
        raise UsageError(f"--out {out}: {why}")
    job = BenchJob(
        cfg=BenchmarkConfig(
            name=name,
            data=data,
            limit=None,
            scoring=scoring,
            reask=0,
            options=opts,
            label=bench.report_name(data, opts),
        ),
        bench=bench,
        template_version=bench.template_version(),
    )
    counters = _replay(out, job, results)
    done = sum(c.done for c in counters.values())
    errors = sum(c.errors for c in counters.values())
    replaced = sum(c.rescored for c in counters.values())
    models = {r.model for r in results}
    again = f", {replaced} of them replacing an earlier import's verdict" if replaced else ""
    return (
        f"imported {len(results)} answers of {len(models)} models into {out}: {done} scored{again}, "
        f"{errors} errors"
    )


def _importer(
    name: str, files: list[Path], data: Path | None, opts: Mapping[str, Any]
) -> tuple[Benchmark, Callable[..., Iterable[ImportedResult]]]:
    """The benchmark `name` and its reader of reference outputs, once the arguments are known to suit."""
    if name not in benchmarks.names():
        raise UsageError(f"unknown benchmark {name!r}; known: {', '.join(benchmarks.names())}")
    bench = benchmarks.get(name)
    reader = getattr(bench, "read_reference_outputs", None)
    if reader is None:
        raise UsageError(f"{name}: importing reference outputs is not supported")
    unknown = set(opts) - set(bench.options)
    if unknown:
        known = ", ".join(sorted(bench.options)) or "none"
        raise UsageError(f"{name} has no option {sorted(unknown)[0]!r}; options: {known}")
    for f in files:
        if not f.exists():
            raise UsageError(f"{f}: no such file")
    if data is not None and not data.exists():
        raise UsageError(f"{data}: no such file or folder")
    return bench, reader


def _other_scoring(store: RunStore, job: BenchJob) -> str | None:
    """The scoring mode of a verdict of `job`'s table already in the store in another mode, if any."""
    for rec in store.iter_records({"verdict"}):
        if rec.get("benchmark") == job.cfg.label and rec.get("scoring") != job.cfg.scoring:
            return str(rec.get("scoring"))
    return None


def _replay(out: Path, job: BenchJob, results: list[ImportedResult]) -> dict[tuple[str, str], Counters]:
    """Every result through the pipeline into `out`, checked: each pair ends with a verdict of its own."""
    counters = {(r.model, job.cfg.label): Counters() for r in results}
    pairs: list[Planned] = []
    # The run lock, as a plain run takes it: a sweep writing `out` now would judge the same pairs beside
    # the import, two current verdicts of one slot.
    lock = lock_run(out, shared=False, shards_dir=out / SHARDS_DIR, mine="an import")
    try:
        store = RunStore.open(out, writer_id="import")
    except BaseException:
        os.close(lock)
        raise

    async def replay() -> None:
        for r in results:
            model, judge = _endpoints(job.bench, job, r)
            pipeline = Pipeline(
                store=store, judges=(judge,), retry_errors=True, counters=counters, identify=replay_identity
            )
            unscored = r.unscored if job.cfg.scoring == "reference" else frozenset()
            counters[(r.model, job.cfg.label)].planned += 1
            await pipeline.evaluate(model, job, r.instance, unscored=unscored)
            pairs.extend(planned_verdicts(pipeline, model.spec, job, r.instance, unscored))

    try:
        other = _other_scoring(store, job)
        if other is not None:
            raise UsageError(
                f"--out {out} holds {job.cfg.label} verdicts scored in {other} mode: importing in "
                f"{job.cfg.scoring} mode too would leave two verdicts of each instance in one directory, "
                f"which no report can read as one. Import into another directory, or with --scoring {other}."
            )
        anyio.run(replay)
        store.flush()
        check_verdicts(store, lambda: pairs)
    finally:
        try:
            store.close()
        finally:
            os.close(lock)
    return counters
