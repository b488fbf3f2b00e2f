"""One chaos run, drawn from its seed: the sweep, its options, the fault schedule, the kills and the
edits. Every part can be dropped by name (`without`), which is how a failing seed shrinks and how its
one-run repro command names the smaller combination."""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

BENCHES = ("followbench", "infobench", "cfbench", "eifbench")
# The faults the harness draws (simulator/config.py FaultRates): none of them changes an answer's text,
# so a run that survives them must end with the verdicts of a fault-free run.
FAULTS = (
    "rate_limit",
    "server_error",
    "malformed",
    "reset",
    "hang",
    "missing_usage",
    "context_length",
)
BATCH_FAULTS = ("batch_fail", "batch_expire")
EDITS = ("add_judge", "remove_judge", "raise_cap", "max_tokens")
PROBES = ("max_tokens", "limit", "judge_params", "scoring", "add_judge")


@dataclass(frozen=True, slots=True)
class Cap:
    """`max_usd` on a scope ("run", a model id or a judge id) as a share of the fault-free cost."""

    scope: str
    share: float


@dataclass(frozen=True, slots=True)
class Scenario:
    seed: int
    benches: tuple[str, ...]
    limit: int
    models: tuple[str, ...]
    judges: tuple[str, ...]
    cache_dispatch: bool
    batch: tuple[str, ...]  # endpoint ids sent through the Batch API
    reask: int
    caps: tuple[Cap, ...]
    partitions: int  # 0: one plain process; 2-3: partitions sharing a Redis coordinator
    redis_restart: bool
    faults: tuple[tuple[str, float], ...]  # (FaultRates field or batch_fail / batch_expire, rate)
    kills: tuple[float, ...]  # seconds after a round's first request
    edits: tuple[str, ...]
    probes: tuple[str, ...]  # I5: input kinds changed after the run, on a copy of its directory
    flush_ms: float
    disk_full_kb: int = 0  # a round whose disk (a tmpfs) has only this much room left; 0: none
    overlap: bool = False  # the first round starts a second plain run on the same directory
    redis_gone: bool = False  # a round whose coordinator goes away for good (coordinator_timeout_s)
    dropped: tuple[str, ...] = ()  # components removed by name (shrinking, --without)

    def components(self) -> list[str]:
        """Every part that can be dropped, in the order the shrinker tries them."""
        out = [f"fault:{name}" for name, _ in self.faults]
        out += [f"kill:{i}" for i in range(len(self.kills))]
        out += [f"edit:{e}" for e in self.edits] + [f"probe:{p}" for p in self.probes]
        out += [f"cap:{c.scope}" for c in self.caps] + [f"batch:{b}" for b in self.batch]
        if self.partitions:
            out.append("option:coordinator")
        if self.redis_restart:
            out.append("option:redis_restart")
        if self.cache_dispatch:
            out.append("option:cache_dispatch")
        if self.reask:
            out.append("option:reask")
        if self.disk_full_kb:
            out.append("option:disk_full")
        if self.overlap:
            out.append("option:overlap")
        if self.redis_gone:
            out.append("option:redis_gone")
        out += [f"model:{m}" for m in self.models[1:]] + [f"bench:{b}" for b in self.benches[1:]]
        return out

    def without(self, names: list[str] | tuple[str, ...]) -> Scenario:
        s = self
        for name in names:
            s = s._drop(name)
        return replace(s, dropped=tuple(sorted({*self.dropped, *names})))

    def _drop(self, name: str) -> Scenario:
        kind, _, what = name.partition(":")
        if kind == "fault":
            return replace(self, faults=tuple(f for f in self.faults if f[0] != what))
        if kind == "kill" and what.isdigit():
            return replace(self, kills=tuple(k for i, k in enumerate(self.kills) if i != int(what)))
        if kind == "edit":
            return replace(self, edits=tuple(e for e in self.edits if e != what))
        if kind == "probe":
            return replace(self, probes=tuple(p for p in self.probes if p != what))
        if kind == "cap":
            return replace(self, caps=tuple(c for c in self.caps if c.scope != what))
        if kind == "batch":
            return replace(self, batch=tuple(b for b in self.batch if b != what))
        if kind == "model" and what in self.models[1:]:
            return replace(
                self,
                models=tuple(m for m in self.models if m != what),
                caps=tuple(c for c in self.caps if c.scope != what),
                batch=tuple(b for b in self.batch if b != what),
            )
        if kind == "bench" and what in self.benches[1:]:
            return replace(self, benches=tuple(b for b in self.benches if b != what))
        if name == "option:coordinator":
            return replace(self, partitions=0, redis_restart=False, redis_gone=False)
        if name == "option:redis_restart":
            return replace(self, redis_restart=False)
        if name == "option:cache_dispatch":
            return replace(self, cache_dispatch=False)
        if name == "option:reask":
            return replace(self, reask=0)
        if name == "option:disk_full":
            return replace(self, disk_full_kb=0)
        if name == "option:overlap":
            return replace(self, overlap=False)
        if name == "option:redis_gone":
            return replace(self, redis_gone=False)
        raise ValueError(f"cannot drop {name!r}: not a part of seed {self.seed} (see --verbose)")

    def describe(self) -> str:
        parts = [
            f"benches={','.join(self.benches)} limit={self.limit}",
            f"models={','.join(self.models)} judges={','.join(self.judges)}",
            f"faults={','.join(f'{n}={r:.2f}' for n, r in self.faults) or '-'}",
            f"kills={len(self.kills)} edits={','.join(self.edits) or '-'}",
            f"probes={','.join(self.probes) or '-'}",
            f"caps={','.join(f'{c.scope}x{c.share:.2f}' for c in self.caps) or '-'}",
            f"batch={','.join(self.batch) or '-'} cache_dispatch={self.cache_dispatch} reask={self.reask}",
            f"partitions={self.partitions} redis_restart={self.redis_restart} flush_ms={self.flush_ms:g}",
            f"disk_full_kb={self.disk_full_kb} overlap={self.overlap} redis_gone={self.redis_gone}",
        ]
        return " ".join(parts)


def draw(seed: int) -> Scenario:
    """The scenario of `seed`: the same seed always draws the same run."""
    rng = random.Random(f"chaos-{seed}")
    benches = tuple(sorted(rng.sample(BENCHES, rng.randint(1, 3)), key=BENCHES.index))
    models = tuple(f"m{i}" for i in range(1, rng.randint(1, 5) + 1))
    judges = tuple(f"j{i}" for i in range(1, rng.choice((1, 1, 2, 3)) + 1))
    partitions = rng.choice((0, 0, 2, 3))
    faults = tuple(
        (name, round(rng.uniform(0.02, 0.08), 3)) for name in rng.sample(FAULTS, rng.randint(0, 4))
    )
    batch = tuple(e for e in (*models, *judges) if rng.random() < 0.2)
    if batch and rng.random() < 0.6:
        faults += ((rng.choice(BATCH_FAULTS), round(rng.uniform(0.1, 0.3), 3)),)
    edits = tuple(e for e in EDITS if rng.random() < 0.35)
    if "remove_judge" in edits and len(judges) < 2:
        edits = tuple(e for e in edits if e != "remove_judge")
    scenario = Scenario(
        seed=seed,
        benches=benches,
        limit=rng.randint(2, 3),
        models=models,
        judges=judges,
        cache_dispatch=rng.random() < 0.4,
        batch=batch,
        reask=rng.choice((0, 1, 2)),
        caps=_caps(rng, models, judges),
        partitions=partitions,
        redis_restart=bool(partitions) and rng.random() < 0.5,
        faults=faults,
        kills=tuple(round(rng.uniform(0.05, 0.8), 3) for _ in range(rng.randint(1, 3))),
        edits=edits,
        probes=tuple(rng.sample(PROBES, rng.randint(1, 2))),
        flush_ms=rng.choice((5.0, 50.0, 200.0)),
        disk_full_kb=rng.choice((0, 0, 0, rng.randint(4, 64))),
        overlap=rng.random() < 0.2,
    )
    if rng.random() < 0.25:  # drawn last, so that adding it changed no earlier draw of any seed
        scenario = replace(scenario, probes=(*scenario.probes, "reimport"))
    if partitions and rng.random() < 0.3:
        scenario = replace(scenario, redis_gone=True)
    return scenario


def _caps(rng: random.Random, models: tuple[str, ...], judges: tuple[str, ...]) -> tuple[Cap, ...]:
    """Caps that bind (share below 1 of the fault-free cost) or do not (above)."""
    caps: list[Cap] = []
    if rng.random() < 0.5:
        caps.append(Cap("run", round(rng.uniform(0.3, 1.4), 2)))
    if rng.random() < 0.3:
        caps.append(Cap(rng.choice(models), round(rng.uniform(0.3, 1.4), 2)))
    if rng.random() < 0.25:
        caps.append(Cap(rng.choice(judges), round(rng.uniform(0.3, 1.4), 2)))
    return tuple(caps)
