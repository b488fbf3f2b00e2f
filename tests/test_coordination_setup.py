"""Setting a sweep up for several processes: the coordinator URL (config or environment) and the
partition a job array gives each process (Slurm, Kubernetes Indexed Jobs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sweeps import toml_config

from ifsweep.providers.coord.interfaces import DEFAULT_LEASE_S, parse_coordinator
from ifsweep.runner.commands.cli import main
from ifsweep.runner.config import ConfigError, load_config
from ifsweep.runner.engine.partition import Partition, partition_from_env


def config_with(tmp_path: Path, run_extra: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(toml_config(tmp_path / "run", "http://127.0.0.1:1/v1", extra_run=run_extra))
    return path


def test_coordinator_url_forms() -> None:
    s = parse_coordinator("redis://127.0.0.1:6379/2")
    assert (s.url, s.lease_s) == ("redis://127.0.0.1:6379/2", DEFAULT_LEASE_S)
    s = parse_coordinator("rediss://user:sekret@redis.example:6380/0?lease_s=45")
    assert (s.url, s.lease_s) == ("rediss://user:sekret@redis.example:6380/0", 45.0)
    assert s.display == "rediss://user:***@redis.example:6380/0"  # what messages and summaries show
    assert parse_coordinator("unix:///run/redis.sock?db=3").url == "unix:///run/redis.sock?db=3"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("http://127.0.0.1:6379/0", "expected a redis:// URL"),
        ("redis://:6379/0", "no host"),
        ("redis://127.0.0.1:99999/0", "Port out of range"),
        ("redis://127.0.0.1:6379/zero", "database number"),
        ("redis://127.0.0.1:6379/0?lease_s=0.1", "lease_s must be a number of seconds in [1, 3600]"),
        ("redis://127.0.0.1:6379/0?lease_s=soon", "lease_s must be"),
        ("redis://127.0.0.1:6379/0?timeout=3", "unknown option 'timeout'; allowed: lease_s"),
    ],
)
def test_bad_coordinator_urls_name_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, says: str
) -> None:
    monkeypatch.delenv("IFSWEEP_COORDINATOR", raising=False)
    with pytest.raises(ConfigError) as e:
        load_config(config_with(tmp_path, f'coordinator = "{text}"'))
    assert e.value.key == "run.coordinator" and says in str(e.value)
    monkeypatch.setenv("IFSWEEP_COORDINATOR", text)
    with pytest.raises(ConfigError) as e:
        load_config(config_with(tmp_path, ""))
    assert e.value.key == "IFSWEEP_COORDINATOR" and says in str(e.value)


def test_the_environment_variable_wins_over_the_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("IFSWEEP_COORDINATOR", raising=False)
    path = config_with(tmp_path, 'coordinator = "redis://10.0.0.1:6379/0"')
    assert load_config(path).run.coordinator == parse_coordinator("redis://10.0.0.1:6379/0")
    assert load_config(config_with(tmp_path, "")).run.coordinator is None  # none: nothing changes
    monkeypatch.setenv("IFSWEEP_COORDINATOR", "redis://10.0.0.2:6379/1?lease_s=5")
    assert load_config(path).run.coordinator == parse_coordinator("redis://10.0.0.2:6379/1?lease_s=5")


SLURM = {
    "SLURM_ARRAY_JOB_ID": "812",
    "SLURM_ARRAY_TASK_COUNT": "4",
    "SLURM_ARRAY_TASK_MIN": "1",
    "SLURM_ARRAY_TASK_MAX": "4",
    "SLURM_ARRAY_TASK_STEP": "1",
}


def test_partition_from_a_slurm_array_counts_from_its_lowest_task() -> None:
    assert partition_from_env({}) is None
    # sbatch --array=1-4: tasks 1..4 are partitions 0..3
    got = [partition_from_env(SLURM | {"SLURM_ARRAY_TASK_ID": str(t)}) for t in (1, 2, 3, 4)]
    assert got == [(Partition(i, 4), "SLURM_ARRAY_TASK_ID") for i in range(4)]
    zero_based = SLURM | {
        "SLURM_ARRAY_TASK_MIN": "0",
        "SLURM_ARRAY_TASK_MAX": "3",
        "SLURM_ARRAY_TASK_ID": "0",
    }
    assert partition_from_env(zero_based) == (Partition(0, 4), "SLURM_ARRAY_TASK_ID")


@pytest.mark.parametrize(
    ("env", "says"),
    [
        (SLURM | {"SLURM_ARRAY_TASK_ID": "2", "SLURM_ARRAY_TASK_MAX": "7"}, "contiguous range"),  # 1,3,5,7
        (SLURM | {"SLURM_ARRAY_TASK_ID": "3", "SLURM_ARRAY_TASK_STEP": "2"}, "step 2"),
        ({"SLURM_ARRAY_TASK_ID": "3"}, "SLURM_ARRAY_TASK_COUNT is not set"),
        (SLURM | {"SLURM_ARRAY_TASK_ID": "x"}, "SLURM_ARRAY_TASK_ID='x': expected a whole number"),
        ({"JOB_COMPLETION_INDEX": "2"}, "set it to the Job's completions"),
        ({"JOB_COMPLETION_INDEX": "4", "IFSWEEP_PARTITION_COUNT": "4"}, "need 0 <= index < count"),
    ],
)
def test_partition_from_a_bad_environment_says_what_to_fix(env: dict[str, str], says: str) -> None:
    with pytest.raises(ValueError) as e:
        partition_from_env(env)
    assert says in str(e.value)


def test_partition_from_a_kubernetes_indexed_job() -> None:
    env = {"JOB_COMPLETION_INDEX": "3", "IFSWEEP_PARTITION_COUNT": "4"}
    assert partition_from_env(env) == (Partition(3, 4), "JOB_COMPLETION_INDEX and IFSWEEP_PARTITION_COUNT")


def test_run_takes_its_partition_from_the_job_array(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The flag wins over the environment; a bad environment is a usage error (exit 2) before anything
    runs. (The runs below stop at the config's missing judge data, after the partition is decided.)"""
    cfg = tmp_path / "missing.toml"
    monkeypatch.setenv("JOB_COMPLETION_INDEX", "1")
    assert main(["run", str(cfg)]) == 2
    assert "IFSWEEP_PARTITION_COUNT is not" in capsys.readouterr().err
    monkeypatch.setenv("IFSWEEP_PARTITION_COUNT", "3")
    assert main(["run", str(cfg)]) == 2
    err = capsys.readouterr().err
    assert "partition 1/3 (from JOB_COMPLETION_INDEX and IFSWEEP_PARTITION_COUNT)" in err
    assert main(["run", str(cfg), "--partition", "0/2"]) == 2
    assert "partition 1/3" not in capsys.readouterr().err
