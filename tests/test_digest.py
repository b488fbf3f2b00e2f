"""The shards' digest (runner/store/digest.py, issue 35 item 3): `status` and `report` read what earlier
readings kept and only the bytes past it, and give the figures of a reading from scratch after appends,
a writer killed mid-append (a real child process), a damaged line, a changed tail and a compaction."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from sweeps import toml_config, verdict_record

from ifsweep.runner.commands.cli import main
from ifsweep.runner.store.compact import compact
from ifsweep.runner.store.current import read_run
from ifsweep.runner.store.digest import DIGEST_DIR, scan_digest, scan_verdicts
from ifsweep.runner.store.shards import RunStore, record_key
from ifsweep.runner.watch.board import table_lines
from ifsweep.runner.watch.status import status_views
from ifsweep.simulator import SimConfig, SimulatorThread

NOW = 2_000_000_000.0  # one `now` for both readings' boards


def sweep(tmp_path: Path, out: Path, base: str, limit: int) -> None:
    cfg = tmp_path / f"sweep-{limit}.toml"
    cfg.write_text(toml_config(out, base, limit=limit))
    assert main(["run", str(cfg)]) == 0


def fresh_copy(run_dir: Path, where: Path) -> Path:
    """The run directory without anything a reader kept (same name: reports name the run by it)."""
    copy = where / run_dir.name
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(run_dir, copy, ignore=shutil.ignore_patterns("compact", "*.lock"))
    return copy


def figures(run_dir: Path) -> tuple[dict[str, Any], list[str]]:
    """status --json's figures and the board's lines, the run's path left out (the copy has another)."""
    board, report = status_views(run_dir, now=NOW)
    text = json.dumps([report.to_json(), table_lines(board)])
    found: tuple[dict[str, Any], list[str]] = tuple(json.loads(text.replace(str(run_dir), "RUN")))
    return found


def report_rows(run_dir: Path) -> pl.DataFrame:
    reading = read_run(run_dir)
    assert reading.rows is not None
    rows = reading.rows.collect()
    return rows.sort(rows.columns)


def parts(run_dir: Path) -> list[str]:
    return sorted(p.name for p in (run_dir / DIGEST_DIR).rglob("*.parquet") if ".v." not in p.name)


def test_the_digest_grows_with_appends_and_reads_as_a_fresh_reading(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with SimulatorThread(SimConfig(seed=3)) as sim:
        sweep(tmp_path, out, sim.base_url, 2)
        first = figures(out)
        kept = parts(out)
        assert kept and all(p.startswith("000000000000-") for p in kept)  # one part per shard, from byte 0
        sweep(tmp_path, out, sim.base_url, 4)  # a resume that appends to the same shard
    now = figures(out)
    grown = parts(out)
    # The second reading kept a part of the new bytes only, after the first one.
    assert len(grown) == len(kept) + 1 and set(kept) < set(grown)
    assert now == figures(fresh_copy(out, tmp_path / "fresh"))
    assert now != first  # the appends changed the figures: the digest did not stop at what it kept
    assert report_rows(out).equals(report_rows(tmp_path / "fresh" / "run"))


CHILD = textwrap.dedent(
    """
    import sys, time
    from ifsweep.runner.store.shards import RunStore, record_key
    store = RunStore.open(sys.argv[1], writer_id="main")
    i = 0
    while True:  # killed by the test
        key = record_key({"n": i // 3})
        # every third record retries an error of the key before it: the newest-per-key rule at work
        status = "error" if i % 3 == 1 else "ok"
        store.append({"v": 2, "kind": "generation", "key": key, "status": status, "model": f"m{i % 2}",
                      "benchmark": "followbench", "instance_id": str(i // 3), "cost_usd": 0.001,
                      "input_tokens": 5, "output_tokens": 7, "latency_s": 0.01, "ts": time.time(),
                      "error_kind": "timeout" if status == "error" else None})
        i += 1
        if i % 50 == 0:
            time.sleep(0.001)
    """
)


def generations(n: int, start: int) -> list[dict[str, Any]]:
    return [
        {
            "v": 2,
            "kind": "generation",
            "key": record_key({"more": i}),
            "status": "ok",
            "model": "m9",
            "benchmark": "cfbench",
            "cost_usd": 0.5,
            "ts": 1.0,
        }
        for i in range(start, start + n)
    ]


def test_polars_reads_the_lines_as_the_python_path_does(tmp_path: Path) -> None:
    """The digest's fast path (Polars' NDJSON reader) and its fallback (a Python row per record, the
    readers' own field rules) give the same frames, over a real sweep's lines and hand-made odd ones."""
    from ifsweep.runner.store.digest import _frames, _slow_frames
    from ifsweep.runner.store.shards import scan_shards

    out = tmp_path / "run"
    with SimulatorThread(SimConfig(seed=6)) as sim:
        sweep(tmp_path, out, sim.base_url, 2)
    with RunStore.open(out, writer_id="odd") as store:
        store.append({"v": 2, "kind": "intent", "key": record_key("i"), "label": "alpha", "worst_usd": 0.5})
        store.append(
            {"v": 2, "kind": "generation", "key": record_key("g"), "status": "error", "intents": ["x"]}
        )
        store.append({"v": 2, "kind": "batch", "key": record_key("b"), "state": "submitted", "ts": 3})
        old = {"v": 2, "kind": "verdict", "key": record_key("v"), "model": "alpha", "benchmark": "cfbench"}
        store.append({**old, "judge": "judge", "instance_id": "x", "scoring": "paper", "rows": []})
    lines = [(sl.offset, sl.line, sl.key, sl.is_error, sl.kind.encode()) for sl in scan_shards(out)]
    assert {k for *_, k in lines} >= {b"generation", b"judgment", b"verdict", b"intent", b"batch"}
    fast, slow = _frames(lines), _slow_frames(lines)
    assert fast[0].equals(slow[0]) and fast[1].equals(slow[1])


def test_a_writer_killed_mid_append_never_gives_the_digest_a_wrong_answer(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(run_dir)])
    try:
        shard = run_dir / "shards" / "main-00001.jsonl"
        deadline = time.monotonic() + 60
        readings = 0
        while readings < 16 and time.monotonic() < deadline:  # read while it writes: more parts than merge
            if shard.exists() and shard.stat().st_size > 0:
                scan = scan_digest if readings % 2 == 0 else scan_verdicts  # status's reading, report's
                frames, _ = scan(run_dir)
                pl.concat(frames).collect()  # every kept part decodes
                readings += 1
            time.sleep(0.05)
        assert readings == 16
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    with open(shard, "ab") as f:  # the kill as it would cut a line mid-write
        f.write(b'{"_c":"00000000","key":"ab')
    assert len(parts(run_dir)) <= 13  # merged as they grew
    killed = figures(run_dir)
    assert killed == figures(fresh_copy(run_dir, tmp_path / "fresh"))
    assert any("torn tail" in d for d in killed[0]["damaged"])
    # The writer comes back: it cuts the torn tail and appends over those bytes.
    with RunStore.open(run_dir, writer_id="main") as store:
        for rec in generations(20, 0):
            store.append(rec)
    resumed = figures(run_dir)
    assert resumed == figures(fresh_copy(run_dir, tmp_path / "fresh"))
    assert not resumed[0]["damaged"]
    assert {r["model"]: r["spent_usd"] for r in resumed[0]["rows"]}["m9"] == pytest.approx(10.0)


def test_a_damaged_line_is_never_kept_and_a_rewritten_tail_is_read_again(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with SimulatorThread(SimConfig(seed=4)) as sim:
        sweep(tmp_path, out, sim.base_url, 2)
    shard = sorted((out / "shards").glob("*.jsonl"))[0]
    data = bytearray(shard.read_bytes())
    middle = data.index(b"\n", len(data) // 2) + 30  # a byte inside a line in the middle
    data[middle] ^= 0x01
    shard.write_bytes(bytes(data))
    damaged = figures(out)
    assert len(damaged[0]["damaged"]) == 1 and "checksum mismatch" in damaged[0]["damaged"][0]
    # What was kept ends before the damaged line; the damage is reported on every reading.
    assert all(int(p.split("-")[1][:12]) <= middle for p in parts(out))
    assert figures(out) == damaged == figures(fresh_copy(out, tmp_path / "fresh"))

    # Mended, the shard is kept whole; then a tail rewritten under what a part covers (lines cut off,
    # others appended in their place, longer): the part no longer holds, the shard is read again.
    data[middle] ^= 0x01
    shard.write_bytes(bytes(data))
    assert not figures(out)[0]["damaged"]
    assert max(int(p.split("-")[1][:12]) for p in parts(out)) == len(data)
    data = shard.read_bytes()
    cut = data.rstrip(b"\n").rfind(b"\n") + 1
    with RunStore.open(out, writer_id="other") as store:  # a writer's line bytes, for the new tail
        for rec in generations(30, 100):
            store.append(rec)
    extra = (out / "shards" / "other-00001.jsonl").read_bytes()
    (out / "shards" / "other-00001.jsonl").unlink()
    shard.write_bytes(data[:cut] + extra)
    assert shard.stat().st_size > len(data)
    rewritten = figures(out)
    assert rewritten == figures(fresh_copy(out, tmp_path / "fresh"))
    assert {r["model"]: r["spent_usd"] for r in rewritten[0]["rows"]}["m9"] == pytest.approx(15.0)


def test_report_reads_the_compacted_parquet_then_the_digest_past_it(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with SimulatorThread(SimConfig(seed=5)) as sim:
        sweep(tmp_path, out, sim.base_url, 2)
        compact(out)
        compacted = report_rows(out)
        assert compacted.equals(report_rows(fresh_copy(out, tmp_path / "fresh")))
        sweep(tmp_path, out, sim.base_url, 4)  # the Parquet is stale now: the digest answers
    grown = report_rows(out)
    assert grown.height > compacted.height
    assert grown.equals(report_rows(fresh_copy(out, tmp_path / "fresh")))
    assert figures(out) == figures(tmp_path / "fresh" / "run")


def test_a_copied_run_keeps_its_own_parts_and_drops_the_ones_of_the_original(tmp_path: Path) -> None:
    """A copy of a run directory (other inodes) once had every reading parse each shard again: the
    original's longest part at byte 0 no longer held, yet shadowed the parts each reading kept."""
    out = tmp_path / "run"
    with SimulatorThread(SimConfig(seed=3)) as sim:
        sweep(tmp_path, out, sim.base_url, 4)
    expected = figures(fresh_copy(out, tmp_path / "fresh"))
    assert figures(out) == expected  # keeps the original's parts
    # The copy holds the original's parts, made from other files; one of them is planted as the
    # longest at byte 0 (as a bigger shard's merged part would be), past the copy's kept ones.
    copy = tmp_path / "copy" / "run"
    shutil.copytree(out, copy, ignore=shutil.ignore_patterns("*.lock"))
    part = next(p for p in (copy / DIGEST_DIR).rglob("000000000000-*.parquet") if ".v." not in p.name)
    meta = pl.read_parquet_metadata(part)
    end = int(meta["end"]) + 10**6
    longer = part.with_name(f"000000000000-{end:012d}.parquet")
    pl.read_parquet(part).write_parquet(longer, metadata={**meta, "end": str(end)})
    shutil.copy(
        part.with_name(part.name.replace(".parquet", ".v.parquet")),
        str(longer).replace(".parquet", ".v.parquet"),
    )
    assert figures(copy) == expected
    assert not longer.exists()  # another file's part is gone, not passed over
    kept = {p: p.stat().st_mtime_ns for p in (copy / DIGEST_DIR).rglob("*.parquet")}
    assert kept
    for p in kept:  # every part left was made from the copy's own shard
        if ".v." not in p.name:
            assert int(pl.read_parquet_metadata(p)["ino"]) == (copy / "shards" / p.parent.name).stat().st_ino
    assert figures(copy) == expected
    # The next reading parsed nothing again: it wrote no part.
    assert {p: p.stat().st_mtime_ns for p in (copy / DIGEST_DIR).rglob("*.parquet")} == kept


def test_report_rows_taken_a_part_at_a_time_are_the_newest_across_parts(tmp_path: Path) -> None:
    """The report's rows are chosen over every part's narrow columns, then exploded a part at a time
    (compact.py `_digest_rows`): a record in a later part that replaces one in an earlier part wins
    there, an error never replaces a success, and the rows are the ones compaction writes."""
    run = tmp_path / "run"
    with RunStore.open(run, writer_id="main") as store:
        for i in range(6):
            store.append(verdict_record(i, "m1", [True, False], ts=1.0))
    first = report_rows(run)  # keeps the first part
    with RunStore.open(run, writer_id="main") as store:
        store.append(verdict_record(1, "m1", [False, False, True], ts=2.0))  # same key, newer: replaces
        store.append(verdict_record(2, "m1", [False, True], "error", ts=2.0))  # an error: does not replace
        store.append(verdict_record(3, "m1", [True, True], ts=2.0, again=1))  # another key, its slot: wins
        store.append(verdict_record(6, "m1", [True], ts=2.0))
    rows = report_rows(run)
    assert len(parts(run)) == 2  # the second reading kept a part of the new bytes: two parts to choose across
    by = {
        (r["instance_id"], r["constraint_idx"]): (r["satisfied"], r["status"])
        for r in rows.iter_rows(named=True)
    }
    assert rows.height == first.height + 1 + 1 == 14  # i1 has a third row now, i6 is new
    assert [by[("i1", c)] for c in range(3)] == [(False, "ok"), (False, "ok"), (True, "ok")]
    assert [by[("i2", c)] for c in range(2)] == [(True, "ok"), (False, "ok")]
    assert [by[("i3", c)] for c in range(2)] == [(True, "ok"), (True, "ok")]
    compact(run)  # compaction's own reading of the shards: the rows the digest must give
    assert rows.equals(report_rows(run))


def test_a_kept_verdict_file_cut_short_is_read_again_not_trusted(tmp_path: Path) -> None:
    """`report` keeps a part's verdict records as Parquet bytes to decode later: one cut short (a disk
    gone bad under the run) is found when it is read, and the shard is read again from there."""
    out = tmp_path / "run"
    with SimulatorThread(SimConfig(seed=3)) as sim:
        sweep(tmp_path, out, sim.base_url, 2)
    expected = report_rows(out)  # keeps the parts
    (vfile,) = [p for p in (out / DIGEST_DIR).rglob("*.v.parquet")]
    vfile.write_bytes(vfile.read_bytes()[:-100])
    assert report_rows(out).equals(expected)
    assert report_rows(fresh_copy(out, tmp_path / "fresh")).equals(expected)
