"""`ifsweep view` on a run too large to index at once: the real command serves its URL before its first
pass over the shards is done, says how far that pass is, and its counts converge to the records'."""

from __future__ import annotations

import re
import time
from pathlib import Path

from test_view import get, serving

from ifsweep.runner.store.shards import encode_line, record_key

MODELS, INSTANCES, WIDTH = 4, 10_000, 3


def satisfied(m: int, i: int, k: int) -> bool:
    return (7 * i + 3 * m + k) % 5 != 0


def write_run(run: Path, instances: int = INSTANCES) -> int:
    """A generation and one judge's verdict for every pair, written as shard lines; returns the lines."""
    (run / "shards").mkdir(parents=True)
    lines = []
    for m in range(MODELS):
        for i in range(instances):
            where = {"model": f"m{m}", "benchmark": "cfbench", "instance_id": f"i{i}"}
            gen_key = record_key(["g", m, i])
            text = f"answer {i} of model {m} " + "words " * 50
            lines.append(
                encode_line(
                    {"v": 2, "kind": "generation", "key": gen_key, "status": "ok", "text": text}
                    | where
                    | {"cost_usd": 0.001}
                )
            )
            rows = [
                {"constraint_idx": k, "constraint_type": f"t{k}", "satisfied": satisfied(m, i, k)}
                | {"status": "ok", "source": "judge"}
                for k in range(WIDTH)
            ]
            lines.append(
                encode_line(
                    {"v": 2, "kind": "verdict", "key": record_key(["v", m, i]), "status": "ok", "judge": "j0"}
                    | where
                    | {"gen_key": gen_key, "rows": rows}
                )
            )
    (run / "shards" / "main-00001.jsonl").write_bytes(b"".join(lines))
    return len(lines)


def progress(html: str) -> tuple[int, int | None] | None:
    """(records indexed, of how many) as the page says, or None once the first pass is done."""
    found = re.search(r"indexing: ([\d,]+)(?: of ([\d,]+))? records", html)
    if found is None:
        return None
    total = found.group(2)
    return int(found.group(1).replace(",", "")), int(total.replace(",", "")) if total else None


def matched(html: str) -> int:
    found = re.search(r'<span id="matched">(\d+)</span> of (\d+) instances', html)
    assert found is not None
    return int(found.group(1))


def test_the_url_is_served_before_the_index_is_complete_and_counts_converge(tmp_path: Path) -> None:
    run = tmp_path / "large"
    total = write_run(run)
    with serving(run) as url:
        first = progress(get(url, "/"))
        assert first is not None and first[0] < total, "the first page must come before the index is whole"
        seen = [first]
        listed_early = get(url, "/list/cfbench/m0")
        deadline = time.monotonic() + 300
        while (now := progress(get(url, "/"))) is not None:
            seen.append(now)
            assert time.monotonic() < deadline, seen[-3:]
            time.sleep(0.2)
        # What each page said was indexed only grew, and the whole was the lines of the shards.
        assert [n for n, _ in seen] == sorted(n for n, _ in seen)
        assert {t for _, t in seen if t is not None} <= {total}
        if progress(listed_early) is not None:
            assert matched(listed_early) <= INSTANCES
        # Done: every count is the records'.
        for m in range(MODELS):
            assert matched(get(url, f"/list/cfbench/m{m}")) == INSTANCES
            failed = sum(1 for i in range(INSTANCES) if not all(satisfied(m, i, k) for k in range(WIDTH)))
            assert matched(get(url, f"/list/cfbench/m{m}?failed=1")) == failed
        overview = get(url, "/")
        assert "indexing" not in overview and "damaged" not in overview
        for m in range(MODELS):
            row = re.search(rf'class="model">m{m}</a></td>(.*?)</tr>', overview, re.S)
            assert row is not None
            cells = re.findall(r"<td>(.*?)</td>", row.group(1))  # ..., pairs, judged, 3 flags, cost
            assert cells[-6:-4] == [f'<span class="num">{INSTANCES}</span>'] * 2


def test_lines_read_since_the_last_load_are_found_with_the_stores_precedence(tmp_path: Path) -> None:
    """A few lines after a large read wait for the next vectorized load of the key table; reads find
    them meanwhile, the newest per key, an error never replacing a success, as after the load."""
    from ifsweep.runner.view.index import RunIndex

    def gen(key: str, status: str, text: str) -> bytes:
        where = {"model": "m", "benchmark": "cfbench", "instance_id": key[:4]}
        return encode_line({"v": 2, "kind": "generation", "key": key, "status": status, "text": text} | where)

    run = tmp_path / "run"
    (run / "shards").mkdir(parents=True)
    shard = run / "shards" / "main-00001.jsonl"
    shard.write_bytes(b"".join(gen(record_key(["f", i]), "ok", f"filler {i}") for i in range(400)))
    index = RunIndex.build(run)
    ok_then_error, error_then_ok, retried = record_key("a"), record_key("b"), record_key("c")
    with open(shard, "ab") as f:
        f.write(gen(ok_then_error, "ok", "kept") + gen(ok_then_error, "error", "lost"))
        f.write(gen(error_then_ok, "error", "lost") + gen(error_then_ok, "ok", "kept"))
        f.write(gen(retried, "error", "first") + gen(retried, "error", "newest"))
        f.write(gen(record_key(["f", 3]), "error", "lost"))  # a loaded success, then a pending error
    assert index.refresh() == 7

    def texts() -> list[object]:
        keys = (ok_then_error, error_then_ok, retried, record_key(["f", 3]), record_key(["f", 4]))
        return [(index.record(k) or {}).get("text") for k in keys]

    want = ["kept", "kept", "newest", "filler 3", "filler 4"]
    assert texts() == want
    with open(shard, "ab") as f:  # enough new lines to load them all into the table
        f.write(b"".join(gen(record_key(["g", i]), "ok", "more") for i in range(100)))
    index.refresh()
    assert not index._recent and texts() == want


def test_a_shard_that_cannot_be_read_stops_the_first_pass_and_the_pages_say_so(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_run(run, instances=40)
    (run / "shards" / "main-00002.jsonl").mkdir()  # named as a shard, and not a file
    with serving(run) as url:
        deadline = time.monotonic() + 60
        while "indexing stopped" not in (html := get(url, "/")):
            assert time.monotonic() < deadline and "indexing" in html, html[-2000:]
            time.sleep(0.1)
        assert f"indexing stopped at {MODELS * 80:,} records: " in html and "Is a directory" in html
        assert matched(get(url, "/list/cfbench/m0")) == 40  # what was read is served


def test_a_link_followed_while_the_first_pass_reads_is_answered_once_it_is_done(tmp_path: Path) -> None:
    """The pair read last, asked for before the first pass reaches it (a bookmark, an export's link, a
    viewer started a moment ago): its page once the pass is done, not a Not found for a pair only not
    read yet. (CI met that 404 on a small run read slowly under load.)"""
    from test_view import instance_path

    run = tmp_path / "large"
    write_run(run)
    with serving(run) as url:
        html = get(url, instance_path("cfbench", f"m{MODELS - 1}", f"i{INSTANCES - 1}"))
        assert progress(get(url, "/")) is None  # the pass had not reached it: this page waited for it
    assert f"i{INSTANCES - 1}" in html and "answer" in html
