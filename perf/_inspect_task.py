"""An Inspect AI task for perf/sweep_perf.py: the FollowBench example prompts as samples, answered by
`generate()`, scored by a trivial check (a rule-scored sweep does about as little per answer). Runs in
Inspect's own virtual environment, never in ours: it imports only inspect_ai and the standard library.

Environment: IFSWEEP_PERF_DATA (FollowBench example_constraints.json), IFSWEEP_PERF_SAMPLES (how many
calls; prompts repeat with a distinct suffix, so no two are the same request).
"""

import json
import os

from inspect_ai import Task, task
from inspect_ai.dataset import MemoryDataset, Sample
from inspect_ai.scorer import includes
from inspect_ai.solver import generate


@task
def sweep_perf() -> Task:
    with open(os.environ["IFSWEEP_PERF_DATA"], encoding="utf-8") as f:
        rows = json.load(f)
    n = int(os.environ.get("IFSWEEP_PERF_SAMPLES", "2000"))
    samples = [
        Sample(
            id=i,
            input=rows[i % len(rows)]["instruction"]
            + (f"\n(variant {i // len(rows)})" if i >= len(rows) else ""),
            target="sim-quality",
        )
        for i in range(n)
    ]
    return Task(dataset=MemoryDataset(samples), solver=generate(), scorer=includes())
