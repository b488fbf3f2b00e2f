"""The chaos harness's parts (perf/chaos.py): a scenario drawn from a seed, the sweep files it writes,
the processes it runs and kills, the simulator's ledger it reads, the invariants it checks, and the
shrinker. Never imported by the package."""
