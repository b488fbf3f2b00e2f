"""One chaos run: rounds of real `ifsweep run` processes against a faulty simulator, killed at random
instants, with edits between rounds; then a fault-free resume to the end, and every invariant checked
against the simulator's ledger, the records and fault-free reference runs of the same configs."""

from __future__ import annotations

import os
import random
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import ifsweep
from _chaos import checks, records
from _chaos.disk import Disk
from _chaos.importing import reimport
from _chaos.ledger import Ledger, billed_by_model, fetch
from _chaos.procs import Proc, Redis, start_run
from _chaos.scenario import Scenario
from _chaos.sweepfile import KEY_ENV, Stage, raised, render, served, write
from ifsweep.simulator import FaultRates, SimConfig, SimulatorThread
from ifsweep.simulator.config import BatchSettings

LATENCY_MS = 30.0
JITTER_MS = 20.0
# How late a busy machine may run the client's flusher after an answer: on 2 shared cores at load 8-9
# an answer reached the shards 0.7 s after it was billed (seed 50).
SCHEDULING_SLACK_S = 1.5
FINAL_RAISE = 1e4  # the final resume raises every cap this much: the run must then end complete


@dataclass(frozen=True, slots=True)
class Round:
    stage: Stage
    kill: float | None = None  # kill -9 one process this long after the round's first request
    refused: bool = False  # the stage changes an input the manifest must refuse
    redis_restart: bool = False
    plain: bool = False  # one process even when the scenario runs partitions
    disk_full: bool = False  # the disk has only Scenario.disk_full_kb left while this round runs
    overlap: bool = False  # a second plain run on the same directory at the same time
    redis_gone: bool = False  # the coordinator goes away for good (back only after the round)


@dataclass(slots=True)
class Outcome:
    seed: int
    rounds: int = 0
    faults: int = 0
    kills: int = 0
    edits: int = 0
    violations: list[str] = field(default_factory=list)
    seconds: float = 0.0


def sim_config(s: Scenario, *, faults: bool) -> SimConfig:
    rates = dict(s.faults) if faults else {}
    return SimConfig(
        seed=s.seed,
        latency_ms=LATENCY_MS,
        jitter_ms=JITTER_MS,
        hang_s=30.0,
        faults=FaultRates(**{k: v for k, v in rates.items() if not k.startswith("batch_")}),
        batch=BatchSettings(
            delay_s=0.3, fail_rate=rates.get("batch_fail", 0.0), expire_rate=rates.get("batch_expire", 0.0)
        ),
    )


def plan_rounds(s: Scenario, first: Stage, *, disk: bool) -> tuple[list[Round], Stage]:
    """The rounds before the final resume, and the stage the edits leave."""
    kills = list(s.kills)
    # The full disk first, while the most is left to write.
    rounds = [Round(first, disk_full=True)] if disk else []
    kill = kills.pop(0) if kills else None
    rounds.append(Round(first, kill, redis_restart=s.redis_restart, overlap=s.overlap))
    if s.redis_gone:
        rounds.append(Round(first, redis_gone=True))
    stage = first
    for edit in s.edits:
        if edit == "max_tokens":  # params are part of every key: the resume must be refused
            rounds.append(Round(replace(stage, max_tokens=stage.max_tokens - 32), refused=True, plain=True))
            continue
        if edit == "add_judge":
            stage = replace(stage, judges=(*stage.judges, "jadd"))
        elif edit == "remove_judge":
            # A judge in batch mode may not leave while its batches are open (refused, exit 2: its bill
            # would be counted nowhere; tests/test_batch_resume.py): the edit takes one that is not.
            gone = next((j for j in reversed(stage.judges) if j not in s.batch), None)
            if gone is None:
                continue
            stage = replace(stage, judges=tuple(j for j in stage.judges if j != gone))
        elif edit == "raise_cap":
            stage = raised(stage, 2.0)
        rounds.append(Round(stage, kills.pop(0) if kills else None))
    rounds += [Round(stage, k) for k in kills]
    return rounds, stage


def ending_checks(rnd: Round, procs: list[Proc], run_dir: Path, complete: bool) -> list[str]:
    """I4 for the processes of one round that were not killed: how each ended against its summary and
    the records (`complete`: whether the records hold every planned verdict)."""
    out = []
    # One partition alone cannot tell whether the run is complete; nor can one of two plain runs.
    single = len(procs) == 1 and not rnd.overlap
    for p in procs:
        if p.killed:
            continue
        if rnd.redis_gone:
            out += checks.coordinator_gone_stop(p)
        if rnd.disk_full:
            out += checks.disk_full_stop(p, run_dir)
        elif rnd.overlap and p.partition is None:
            # Two plain runs on one directory share summary.json, and the second may take the lock
            # once the first has ended and rewrite it (chaos seed 7033): each is held to the ending
            # it printed, made from the same result as the summary it wrote.
            out += checks.ending_printed(p)
        else:
            summary = records.summary(run_dir, p.partition)
            out += checks.exit_truthful(p, summary, complete if single else None)
    if not single and not rnd.disk_full and all(p.code == 0 for p in procs) and not complete:
        out.append("I4: every partition exited 0 (complete) but the records lack planned verdicts")
    return out


class Play:
    """The state of one chaos run; `run()` plays it and returns its Outcome."""

    def __init__(self, s: Scenario, work: Path, log: Callable[[str], None]) -> None:
        self.s = s
        self.work = work
        self.log = log
        self.rng = random.Random(f"kills-{s.seed}")
        self.secret = f"sk-chaos-{random.Random(s.seed).getrandbits(64):016x}"
        self.run_dir = work / "run"
        self.out = Outcome(s.seed)
        self.kill_times: list[float] = []
        self.stops: list[tuple[float, float]] = []  # (start, end) of rounds on a full disk
        self.texts: list[str] = []
        self.refs: dict[Stage, tuple[Path, Ledger]] = {}
        self.roles = {served(m): "model" for m in s.models}
        self.redis: Redis | None = None
        self.disk: Disk | None = None

    # --- references ---------------------------------------------------------------------------------
    def reference(self, stage: Stage) -> tuple[Path, Ledger]:
        """A fault-free run of `stage` without caps on a simulator of the same seed, once per stage."""
        stage = replace(stage, caps=())
        if stage not in self.refs:
            out = self.work / f"ref-{len(self.refs)}"
            cfg = write(out.with_suffix(".toml"), render(self.s, stage, out, self.ref_sim.base_url, None))
            mark = time.monotonic()
            result = ifsweep.run(cfg)
            if result.status != "complete":
                raise RuntimeError(f"the fault-free reference run ended {result.status}: {result.message}")
            self.refs[stage] = (out, fetch(self.ref_sim.base_url).since(mark))
        return self.refs[stage]

    def first_stage(self) -> Stage:
        stage = Stage(judges=self.s.judges)
        _, ledger = self.reference(stage)
        cost = billed_by_model(ledger, self.roles)
        caps = []
        for cap in self.s.caps:
            spent = sum(cost.values()) if cap.scope == "run" else cost[served(cap.scope)]
            caps.append((cap.scope, round(max(spent * cap.share, 1e-6), 9)))
        return replace(stage, caps=tuple(caps))

    # --- rounds -------------------------------------------------------------------------------------
    def config(self, stage: Stage, out: Path, name: str) -> Path:
        coordinator = self.redis.url if self.redis is not None else None
        return write(self.work / f"{name}.toml", render(self.s, stage, out, self.sim.base_url, coordinator))

    def sent(self) -> int:
        stats = self.sim.stats
        return int(stats.requests + stats.batches_created)

    def play(self, rnd: Round) -> list[Proc]:
        self.out.rounds += 1
        cfg = self.config(rnd.stage, self.run_dir, f"round-{self.out.rounds}")
        n = self.s.partitions
        parts: list[str | None] = [None] if rnd.plain or not n else [f"{i}/{n}" for i in range(n)]
        sent0 = self.sent()
        started = time.monotonic()
        if rnd.disk_full and self.disk is not None:
            self.disk.fill(self.s.disk_full_kb * 1024)
        procs = [start_run(cfg, self.secret, p) for p in parts]
        if rnd.overlap:
            procs.append(start_run(cfg, self.secret))
        restart = self._restart_redis() if rnd.redis_restart else None
        if rnd.kill is not None:
            self._kill(procs, sent0, rnd.kill)
        if rnd.redis_gone and self.redis is not None and self._calling(procs, sent0):
            time.sleep(0.3)
            self.redis.stop()
        for p in procs:
            p.finish()
            self.texts += [p.out, p.err]
        if restart is not None:
            restart.join()
        if rnd.redis_gone and self.redis is not None:
            self.redis.start()  # back for the next round
        if self.disk is not None:
            self.disk.empty()
        if rnd.disk_full:
            self.stops.append((started, time.monotonic()))
        codes = ",".join("kill" if p.killed else str(p.code) for p in procs)
        self.log(f"  round {self.out.rounds}: exit {codes}, {self.sent() - sent0} requests")
        return procs

    def _calling(self, procs: list[Proc], sent0: int) -> bool:
        """Wait until this round's processes have sent their first request; False if none will."""
        deadline = time.monotonic() + 60
        while self.sent() == sent0:
            if time.monotonic() > deadline or all(p.popen.poll() is not None for p in procs):
                return False
            time.sleep(0.005)
        return True

    def _kill(self, procs: list[Proc], sent0: int, delay: float) -> None:
        if not self._calling(procs, sent0):
            return
        time.sleep(delay)
        alive = [p for p in procs if p.popen.poll() is None]
        if alive:
            self.kill_times.append(time.monotonic())
            self.rng.choice(alive).kill9()
            self.out.kills += 1

    def _restart_redis(self) -> threading.Thread:
        redis = self.redis
        assert redis is not None

        def restart() -> None:
            time.sleep(0.4)
            redis.restart(0.5)

        thread = threading.Thread(target=restart)
        thread.start()
        return thread

    # --- checks per round ---------------------------------------------------------------------------
    def check_round(self, rnd: Round, procs: list[Proc], before: dict[str, str], sent0: int) -> None:
        v = self.out.violations
        if rnd.refused:
            v += checks.refused_cleanly(procs[0], before, records.digest(self.run_dir), self.sent() - sent0)
            return
        ledger = fetch(self.sim.base_url)
        v += checks.caps_held(ledger, rnd.stage, self.roles)
        billed = sum(billed_by_model(ledger, self.roles).values())
        caps = ", ".join(f"{scope} ${usd:.6f}" for scope, usd in rnd.stage.caps) or "none"
        self.log(f"    billed ${billed:.6f} so far; caps: {caps}")
        ref, _ = self.reference(rnd.stage)
        complete = not checks.same_verdicts(self.run_dir, ref, rnd.stage.judges, scores=False)
        v += ending_checks(rnd, procs, self.run_dir, complete)

    def round_checked(self, rnd: Round) -> list[Proc]:
        before = records.digest(self.run_dir) if rnd.refused else {}
        sent0 = self.sent()
        procs = self.play(rnd)
        self.check_round(rnd, procs, before, sent0)
        return procs

    # --- the whole run ------------------------------------------------------------------------------
    def run(self) -> Outcome:
        start = time.monotonic()
        s = self.s
        self.roles |= {served(j): "judge" for j in (*s.judges, "jadd")}
        os.environ[KEY_ENV] = self.secret  # the reference runs are library calls in this process
        if s.partitions:
            self.redis = Redis(f"chaos{s.seed}pw{self.secret[-8:]}", persist=s.seed % 2 == 0)
        with (
            SimulatorThread(SimConfig(seed=s.seed)) as self.ref_sim,
            SimulatorThread(sim_config(s, faults=True)) as self.sim,
        ):
            try:
                self._set_up()
                self._play_all()
            finally:
                if self.redis is not None:
                    self.redis.close()
                if self.disk is not None:
                    self.disk.unmount()
        self.out.seconds = time.monotonic() - start
        return self.out

    def _set_up(self) -> None:
        if self.redis is not None:
            self.redis.start()
        if self.s.disk_full_kb:
            disk = Disk(self.work / "disk")
            if disk.mount():
                self.disk, self.run_dir = disk, disk.root / "run"
            else:
                self.log("  disk_full skipped: cannot mount a tmpfs here (needs root)")

    def _play_all(self) -> None:
        rounds, last = plan_rounds(self.s, self.first_stage(), disk=self.disk is not None)
        self.out.edits = len(self.s.edits) + self.s.probes.count("reimport")
        for rnd in rounds:
            self.round_checked(rnd)
        self.out.faults = sum(self.sim.stats.faults.values()) + fetch(self.sim.base_url).batch_faults
        self.sim.set_config(sim_config(self.s, faults=False))
        final = raised(last, FINAL_RAISE)
        self._finish(final)

    def _finish(self, final: Stage) -> None:
        v = self.out.violations
        (proc,) = self.round_checked(Round(final, plain=True))
        if proc.code != 0:
            said = [line for line in proc.err.splitlines() if "error" in line.lower()] or [proc.err.strip()]
            v.append(f"I1: the resume without faults exited {proc.code}: {' | '.join(said)[-600:]}")
            return
        ref, _ = self.reference(final)
        v += checks.same_verdicts(self.run_dir, ref, final.judges)
        if "run" in dict(final.caps):  # every call is capped, so an intent counts even a kill's calls
            summary = records.summary(self.run_dir, None)
            v += checks.spend_reported(summary, fetch(self.sim.base_url), self.roles)
        sent0 = self.sent()
        (again,) = self.play(Round(final, plain=True))
        if again.code != 0 or self.sent() != sent0:
            extra = self.sent() - sent0
            v.append(f"I3: running the finished sweep again exited {again.code} and sent {extra} requests")
        window = (LATENCY_MS + JITTER_MS + self.s.flush_ms) / 1000 + SCHEDULING_SLACK_S
        v += checks.paid_once(fetch(self.sim.base_url), self.kill_times, window, self.stops)
        for kind in self.s.probes:
            if kind == "reimport":
                v += reimport(self.work / "import", self.s.seed, self.texts)
            else:
                self._probe(kind, final)
        secrets = [self.secret] + ([self.redis.password] if self.redis is not None else [])
        dirs = [self.run_dir, *self.work.glob("probe-*/")]  # the configs hold the Redis URL, as a user's do
        hits = records.secret_hits(dirs, self.texts, secrets)
        v += [f"I6: a secret in {h}" for h in hits]

    def _probe(self, kind: str, final: Stage) -> None:
        """I5: change one input a result depends on, on a copy of the finished run, and count what the
        change sends: nothing if the manifest refuses it, else exactly what a fresh run adds."""
        copy = self.work / f"probe-{kind}"
        shutil.copytree(self.run_dir, copy)
        changed = {
            "max_tokens": replace(final, max_tokens=final.max_tokens + 32),
            "judge_params": replace(final, judge_temperature=0.5),
            "scoring": replace(final, scoring="reference"),
            "limit": replace(final, limit_delta=1),
            "add_judge": replace(final, judges=(*final.judges, "jprobe")),
        }[kind]
        self.roles[served("jprobe")] = "judge"
        cfg = self.config(changed, copy, f"probe-{kind}")
        before, mark, sent0 = records.digest(copy), time.monotonic(), self.sent()
        proc = start_run(cfg, self.secret)
        proc.finish()
        self.texts += [proc.out, proc.err]
        if kind in ("max_tokens", "judge_params", "scoring"):
            after, extra = records.digest(copy), self.sent() - sent0
            self.out.violations += checks.refused_cleanly(proc, before, after, extra)
            return
        got = fetch(self.sim.base_url).since(mark).bodies()
        want = self.reference(changed)[1].bodies() - self.reference(final)[1].bodies()
        if proc.code != 0 or got != want:
            self.out.violations.append(
                f"I5: changing {kind} exited {proc.code} and sent {len(got)} request bodies where the change "
                f"needs {len(want)} ({len(want - got)} missing, {len(got - want)} not needed)"
            )
