"""What a real weak judge does to paper-mode parsing and re-asks: SmolLM2-135M on llama.cpp's server.

Starts llama-server itself (tests/llamaserver.py, the binary and model of tests/realmodel.py; build them
once with `python tests/realmodel.py`). For each benchmark's built-in fixture: SmolLM2 answers the first
instances, then judges them with the benchmark's own judge prompts (paper mode). Every first reply that
does not parse is re-asked three ways, each from the same state:
  resend    the identical request again (what ifsweep did before issue 11), temperature 0
  follow-up the unparsed reply as an assistant turn, then REASK_LEAD and the benchmark's format rule
            (JudgeTask.messages_for_ask: what the runner sends now), temperature 0
  sampled   the identical request at temperature 0.8 with a fixed seed
  follow-up sampled  the follow-up at temperature 0.8 with a fixed seed
Printed per benchmark: the parsed share of first replies; per protocol how many of the unparsed became
parsed (and how many resends were byte-identical to the first reply); parsed replies whose verdict rests
on copied prompt text (it changes when the lines found verbatim in what was sent are taken out: must be
0); and the share of prompt tokens the server reports as cached (`timings.cache_n`, or
`usage.prompt_tokens_details.cached_tokens`).

    python perf/judge_yield.py                 # 12 first judge asks per benchmark
    python perf/judge_yield.py --asks 20 --judge-max-tokens 96
    python perf/judge_yield.py --sweep 2       # a real `ifsweep run`: judged rows parsed per benchmark
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ifsweep import benchmarks
from ifsweep.benchmarks import Benchmark, Instance, JudgeTask, Message

TESTS = Path(__file__).resolve().parents[1] / "tests"
sys.path.insert(0, str(TESTS))

import llamaserver  # noqa: E402  (test helpers: the same server the real-model tier runs)
import realmodel  # noqa: E402

PROTOCOLS = ("resend", "follow-up", "sampled", "follow-up sampled")
BENCHES = ("followbench", "infobench", "cfbench", "eifbench")
COPY_MIN_CHARS = 12


@dataclass
class Call:
    text: str
    prompt_tokens: int
    cached_tokens: int | None


@dataclass
class Tally:
    first: int = 0
    first_parsed: int = 0
    unparsed: int = 0
    recovered: dict[str, int] = field(default_factory=lambda: dict.fromkeys(PROTOCOLS, 0))
    resend_identical: int = 0
    parsed_copies: int = 0
    copies: list[str] = field(default_factory=list)
    prompt_tokens: dict[str, int] = field(default_factory=dict)
    cached_tokens: dict[str, int] = field(default_factory=dict)
    cache_reported: int = 0
    calls: int = 0

    def merge(self, o: Tally) -> None:
        self.first += o.first
        self.first_parsed += o.first_parsed
        self.unparsed += o.unparsed
        self.resend_identical += o.resend_identical
        self.parsed_copies += o.parsed_copies
        self.copies += o.copies
        self.cache_reported += o.cache_reported
        self.calls += o.calls
        for k, v in o.recovered.items():
            self.recovered[k] += v
        for k, v in o.prompt_tokens.items():
            self.prompt_tokens[k] = self.prompt_tokens.get(k, 0) + v
        for k, v in o.cached_tokens.items():
            self.cached_tokens[k] = self.cached_tokens.get(k, 0) + v

    def count_cache(self, kind: str, call: Call) -> None:
        self.calls += 1
        self.prompt_tokens[kind] = self.prompt_tokens.get(kind, 0) + call.prompt_tokens
        if call.cached_tokens is not None:
            self.cache_reported += 1
            self.cached_tokens[kind] = self.cached_tokens.get(kind, 0) + call.cached_tokens


def chat(base: str, messages: Sequence[Message], max_tokens: int, temperature: float = 0.0) -> Call:
    body: dict[str, Any] = {
        "model": "smollm2",
        "messages": [m.as_dict() for m in messages],
        "temperature": temperature,
        "max_tokens": max_tokens,
    }
    if temperature > 0:
        body["seed"] = 1
    req = urllib.request.Request(
        base + "/v1/chat/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=600) as r:
        data = json.loads(r.read())
    usage = data.get("usage") or {}
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens")
    timings = data.get("timings") or {}
    if cached is None and "cache_n" in timings:
        cached = int(timings["cache_n"])
    prompt = int(usage.get("prompt_tokens") or timings.get("prompt_n", 0) + (cached or 0))
    return Call(data["choices"][0]["message"].get("content") or "", prompt, cached)


def without_copies(reply: str, sent: Sequence[Message]) -> str:
    """`reply` without its lines that occur verbatim in what was sent (plain substrings, independent of
    benchmarks/_echo.py); lines shorter than COPY_MIN_CHARS stay, as a bare "YES" occurs in most prompts."""
    kept = [
        line
        for line in reply.splitlines()
        if len(line.strip()) < COPY_MIN_CHARS or not any(line.strip() in m.content for m in sent)
    ]
    return "\n".join(kept)


def judged_instances(bench: Benchmark) -> Iterator[Instance]:
    for inst in bench.load(bench.fixture_dir(), {}):
        if bench.plan(inst, "x", "paper").judge_tasks:
            yield inst


def run_bench(
    name: str, base: str, asks: int, gen_tokens: int, judge_tokens: int, pool: ThreadPoolExecutor
) -> Tally:
    bench = benchmarks.get(name)
    tally = Tally()
    # One task per instance at most (EIFBench plans one per question): variety over depth.
    insts = list(itertools.islice(judged_instances(bench), asks))
    answers = list(pool.map(lambda i: chat(base, i.messages, gen_tokens).text, insts))
    jobs: list[tuple[Instance, JudgeTask]] = []
    for inst, answer in zip(insts, answers, strict=True):
        jobs.append((inst, bench.plan(inst, answer, "paper").judge_tasks[0]))

    # Turns to ask per task, so that the first asks add up to `asks` (InFoBench has several per task).
    budget = asks
    planned: list[tuple[Instance, JudgeTask, int]] = []
    for inst, task in jobs:
        n = min(len(task.turns), budget)
        if n:
            planned.append((inst, task, n))
        budget -= n

    def judge(job: tuple[Instance, JudgeTask, int]) -> Tally:
        inst, task, n_turns = job
        t = Tally()  # one per task: merged below, so no two threads touch one
        earlier: tuple[str, ...] = ()
        for turn in range(n_turns):
            sent = task.messages_for_turn(turn, earlier)
            first = chat(base, sent, judge_tokens)
            t.count_cache("first", first)
            t.first += 1
            values = bench.parse(inst, task, turn, first.text, "paper").values
            parsed = values is not None
            if (
                parsed
                and values != bench.parse(inst, task, turn, without_copies(first.text, sent), "paper").values
            ):
                t.parsed_copies += 1
                t.copies.append(first.text)
            if parsed:
                t.first_parsed += 1
            else:
                t.unparsed += 1
                tries = {
                    "resend": (sent, 0.0),
                    "follow-up": (task.messages_for_ask(turn, earlier, (first.text,)), 0.0),
                    "sampled": (sent, 0.8),
                    "follow-up sampled": (task.messages_for_ask(turn, earlier, (first.text,)), 0.8),
                }
                for protocol, (messages, temperature) in tries.items():
                    again = chat(base, messages, judge_tokens, temperature)
                    t.count_cache(protocol, again)
                    got = bench.parse(inst, task, turn, again.text, "paper").values
                    t.recovered[protocol] += got is not None
                    alone = bench.parse(
                        inst, task, turn, without_copies(again.text, messages), "paper"
                    ).values
                    if got is not None and got != alone:
                        t.parsed_copies += 1
                        t.copies.append(again.text)
                    if protocol == "resend":
                        t.resend_identical += again.text == first.text
            earlier = (*earlier, first.text)
        return t

    for t in pool.map(judge, planned):
        tally.merge(t)
    return tally


def share(a: int, b: int) -> str:
    return f"{a}/{b} ({100 * a / b:.0f}%)" if b else "0/0"


SWEEP_LIMITS = {"followbench": 12, "infobench": 3, "cfbench": 3, "eifbench": 1}


def sweep_rows(api_base: str, tmp: Path, reask: int) -> dict[str, dict[str, int]]:
    """Judge-scored verdict rows by status per benchmark, from a real `ifsweep run` (paper mode)."""
    from collections import Counter

    from ifsweep.runner.commands.cli import main as cli
    from ifsweep.runner.store.shards import RunStore

    out = tmp / "run"
    endpoint = (
        f'model = "openai/smollm2"\napi_base = "{api_base}"\n'
        "params = { temperature = 0, max_tokens = 64 }\n"
    )
    lines = ["[run]", f'output_dir = "{out}"', 'progress = "off"', "concurrency = 4", f"reask = {reask}", ""]
    for name, limit in SWEEP_LIMITS.items():
        data = benchmarks.get(name).fixture_dir()
        lines += ["[[benchmarks]]", f'name = "{name}"', f'data = "{data}"', f"limit = {limit}", ""]
    lines += ["[[models]]", 'id = "smollm2"', endpoint, "[judge]", 'id = "smollm2-judge"', endpoint]
    (tmp / "sweep.toml").write_text("\n".join(lines))
    cli(["run", str(tmp / "sweep.toml")])
    store = RunStore.open(out, writer_id="judge_yield")
    try:
        counts: dict[str, Counter[str]] = {}
        for v in store.iter_records({"verdict"}):
            for row in v["rows"]:
                if row["source"] == "judge":
                    counts.setdefault(v["benchmark"], Counter())[row["status"]] += 1
    finally:
        store.close()
    return {name: dict(c) for name, c in counts.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--asks", type=int, default=12, help="first judge asks per benchmark")
    p.add_argument("--gen-max-tokens", type=int, default=64)
    p.add_argument("--judge-max-tokens", type=int, default=64)
    p.add_argument("--bench", action="append", choices=BENCHES, help="repeatable; default all four")
    p.add_argument(
        "--sweep",
        type=int,
        metavar="REASK",
        help="instead: one `ifsweep run` over the fixtures with this reask; judged rows by status",
    )
    args = p.parse_args()
    paths = realmodel.expected_paths()
    if not (paths.server.is_file() and paths.gguf.is_file()):
        print(f"llama-server or the model is missing; {realmodel.BUILD_HINT}", file=sys.stderr)
        return 2
    started = time.monotonic()
    if args.sweep is not None:
        with (
            tempfile.TemporaryDirectory() as tmp,
            llamaserver.running(
                paths.server, paths.gguf, Path(tmp) / "server.log", llamaserver.ServerShape()
            ) as server,
        ):
            rows = sweep_rows(server.api_base, Path(tmp), args.sweep)
        print(f"ifsweep run, paper mode, reask = {args.sweep}: {time.monotonic() - started:.0f} s")
        for name, c in rows.items():
            print(f"  {name}: judged rows parsed {share(c.get('ok', 0), sum(c.values()))}; {c}")
        return 0
    results: dict[str, Tally] = {}
    with (
        tempfile.TemporaryDirectory() as tmp,
        llamaserver.running(
            paths.server, paths.gguf, Path(tmp) / "server.log", llamaserver.ServerShape()
        ) as server,
        ThreadPoolExecutor(llamaserver.ServerShape().slots) as pool,
    ):
        for name in args.bench or BENCHES:
            t0 = time.monotonic()
            results[name] = run_bench(
                name, server.base_url, args.asks, args.gen_max_tokens, args.judge_max_tokens, pool
            )
            print(f"# {name}: {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
    print(
        f"SmolLM2-135M-Instruct Q4_1 as model and judge, llama.cpp {realmodel.LLAMA_VERSION}; "
        f"judge max_tokens {args.judge_max_tokens}; {time.monotonic() - started:.0f} s in all\n"
    )
    head = [
        "benchmark",
        "first parsed",
        "unparsed",
        *[f"{p} parsed" for p in PROTOCOLS],
        "resend byte-identical",
        "verdicts from copies",
    ]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for name, t in results.items():
        cells = [name, share(t.first_parsed, t.first), str(t.unparsed)]
        cells += [share(t.recovered[p], t.unparsed) for p in PROTOCOLS]
        cells += [share(t.resend_identical, t.unparsed), str(t.parsed_copies)]
        print("| " + " | ".join(cells) + " |")
    for name, t in results.items():
        for text in t.copies:
            print(f"{name}: a verdict read from copied prompt text: {text!r}")
    print("\ncached prompt tokens (server-reported) / prompt tokens, by kind of judge call:")
    for name, t in results.items():
        kinds = ", ".join(f"{k} {share(t.cached_tokens.get(k, 0), n)}" for k, n in t.prompt_tokens.items())
        print(f"  {name}: {kinds}; cache reported on {t.cache_reported}/{t.calls} calls")
    return 0


if __name__ == "__main__":
    sys.exit(main())
