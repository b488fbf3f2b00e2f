"""Memory bounded by concurrency, not by what pairs plan: the judge's admission (runner/engine/admission.py)
checked on its own and through a real sweep, whose judge tasks alive at once are counted as it runs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import anyio
import pytest
from sweeps import stored_records, toml_config

import ifsweep
from ifsweep.runner.engine.admission import Admission
from ifsweep.runner.engine.scheduler import worker_budget
from ifsweep.simulator import SimConfig, SimulatorThread


def test_admission_is_first_come_first_served_and_clamps() -> None:
    async def main() -> list[str]:
        gate = Admission(4)
        order: list[str] = []
        assert gate.try_take(3) and gate.free == 1
        assert gate.clamp(80) == 4  # a pair with more tasks than slots takes them all, and can go

        async def want(name: str, n: int) -> None:
            await gate.take(n)
            order.append(name)

        async with anyio.create_task_group() as tg:
            tg.start_soon(want, "big", 80)  # waits for all 4
            await anyio.sleep(0.01)
            tg.start_soon(want, "small", 1)  # 1 is free, but "big" is first in line
            await anyio.sleep(0.01)
            assert order == [] and not gate.try_take(1)
            gate.give(3)
            await anyio.sleep(0.01)
            assert order == ["big"] and gate.free == 0
            gate.give(4)
        assert gate.free == 3  # "small" holds its one
        with pytest.raises(RuntimeError, match="over-returned"):
            gate.give(2)
        return order

    assert anyio.run(main) == ["big", "small"]


def test_a_cancelled_waiter_takes_nothing_and_lets_the_next_one_in() -> None:
    async def main() -> list[str]:
        gate = Admission(2)
        assert gate.try_take(1)
        got: list[str] = []
        first = anyio.CancelScope()

        async def waiter() -> None:
            with first:
                await gate.take(2)
            got.append("left the line")

        async def want(name: str, n: int) -> None:
            await gate.take(n)
            got.append(name)

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await anyio.sleep(0.01)
            tg.start_soon(want, "after", 1)
            await anyio.sleep(0.01)
            assert got == []  # one slot is free, but the one ahead wants two
            first.cancel()  # it leaves the line: the one behind it fits now
        assert gate.free == 0  # the first slot and "after"'s: the cancelled waiter holds none
        return got

    assert sorted(anyio.run(main)) == ["after", "left the line"]


JUDGE_TASK = "ifsweep.runner.engine.pipeline._together.<locals>.run"  # anyio names a task by its function


class _JudgeTasks:
    """The pipeline's judge tasks (the ones `_together` starts for a pair's judge work) alive at once,
    counted each time the loop makes one: a task factory, not a sampler, since a sampler busy on the
    loop starved the simulator's thread of the GIL and the sweep crawled under load. A task is alive
    until it is done; its done-callbacks come a loop step later, after a pair admitted by the slot it
    gave back in its last step may have started its own, so they would count it one step too long."""

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[object]] = set()
        self.peak = 0

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        counter = self

        class Counted(asyncio.Task):  # type: ignore[type-arg]
            def set_name(self, value: object) -> None:  # the loop names a task just after making it
                super().set_name(value)
                if value == JUDGE_TASK:
                    counter.tasks = {t for t in counter.tasks if not t.done()} | {self}
                    counter.peak = max(counter.peak, len(counter.tasks))

        loop.set_task_factory(lambda lp, coro, **kw: Counted(coro, loop=lp, **kw))

    @property
    def alive(self) -> int:
        return sum(1 for t in self.tasks if not t.done())


def test_judge_tasks_alive_are_bounded_by_the_workers_not_by_what_pairs_plan(tmp_path: Path) -> None:
    # One slot in the whole sweep, so judge calls queue and pile up; six models, so six workers
    # (worker_budget(1, 6)), each pair of the EIFBench fixture planning 4-8 judge tasks. Without the
    # admission every pair in flight started all its tasks: up to 6 x 8 alive at once. With it, the
    # pipeline holds at most worker_budget tasks of the judge's however many pairs wait.
    models = tuple(f"m{i}" for i in range(6))
    out = tmp_path / "run"
    counted = _JudgeTasks()
    with SimulatorThread(SimConfig(seed=5, latency_ms=2)) as sim:
        cfg = tmp_path / "sweep.toml"
        cfg.write_text(
            toml_config(out, sim.base_url, models=models, bench=("eifbench",), extra_run="concurrency = 1")
        )

        async def main() -> ifsweep.SweepResult:
            counted.install(asyncio.get_running_loop())
            return await ifsweep.arun(cfg)

        result = anyio.run(main)
    assert result.status == "complete", result
    verdicts = stored_records(out, {"verdict"})
    assert len(verdicts) == 6 * 4 and all(v["status"] == "ok" for v in verdicts)
    judged = stored_records(out, {"judgment"})
    assert len(judged) == 6 * (5 + 4 + 8 + 5)  # every task judged: the bound held nothing back
    slots = worker_budget(1, len(models))
    assert 2 <= counted.peak <= slots, (counted.peak, slots)
    assert counted.alive == 0
