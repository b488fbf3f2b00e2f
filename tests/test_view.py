"""`ifsweep view` against a real run: a sweep of the simulator with a panel of two judges (one flips and
garbles verdicts) and a model whose long prompts its server refuses, so the run holds disagreements,
unparsed replies and errors. The viewer runs as the real command in a subprocess and is read over raw
HTTP; what it shows is checked against the records in the shards, read independently."""

from __future__ import annotations

import http.client
import json
import re
import shutil
import socket
import subprocess
import sys
from collections import defaultdict
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from sweeps import stored_records

import ifsweep
from ifsweep import benchmarks
from ifsweep.runner.view.filters import Filters, select
from ifsweep.runner.view.index import RunIndex
from ifsweep.simulator import SimConfig, SimulatorThread

PRICE = {"input_per_mtok": 1.0, "output_per_mtok": 2.0}
BENCHES = ("cfbench", "infobench", "followbench")
JUDGES = (("j0", "sim-judge"), ("j1", "sim-judge-flip0.3-garble0.3"))
LIMIT = 6


def sweep_config(
    out: Path, base: str, small_base: str, data: dict[str, Path] | None = None
) -> dict[str, Any]:
    """Models alpha and beta, and `org/tiny` (an id holding "/", as model strings often do) on a server
    whose context window refuses most prompts."""
    models = [("alpha", "alpha", base), ("beta", "beta", base), ("org/tiny", "tiny", small_base)]
    return {
        "run": {"output_dir": str(out), "progress": "off", "concurrency": 8},
        "benchmarks": [
            {
                "name": b,
                "data": str((data or {}).get(b) or benchmarks.get(b).fixture_dir()),
                "limit": LIMIT,
                "reask": 1,
            }
            for b in BENCHES
        ],
        "models": [
            {
                "id": m,
                "model": f"openai/sim-{name}",
                "api_base": api,
                "price": PRICE,
                "params": {"max_tokens": 96},
            }
            for m, name, api in models
        ],
        "judges": [
            {"id": j, "model": f"openai/{name}", "api_base": base, "price": PRICE} for j, name in JUDGES
        ],
    }


def make_run(out: Path) -> Path:
    with SimulatorThread(SimConfig(seed=5)) as sim, SimulatorThread(SimConfig(context_window=40)) as small:
        result = ifsweep.run(sweep_config(out, sim.base_url, small.base_url))
    assert result.errors > 0, "the run must hold pairs in error"
    return out


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_run(tmp_path_factory.mktemp("view") / "run")


# ------------------------------------------------------------------------------------------ the records


def newest(run: Path, kind: str) -> dict[str, dict[str, Any]]:
    """Newest record per key (an error never replaces a success), read straight from the shards."""
    out: dict[str, dict[str, Any]] = {}
    for rec in stored_records(run, {kind}):
        old = out.get(rec["key"])
        if old is None or rec.get("status") != "error" or old.get("status") == "error":
            out[rec["key"]] = rec
    return out


Pair = tuple[str, str, str]


def verdicts_by_pair(run: Path) -> dict[Pair, dict[str, dict[str, Any]]]:
    out: dict[Pair, dict[str, dict[str, Any]]] = defaultdict(dict)
    for rec in newest(run, "verdict").values():
        out[(rec["benchmark"], rec["model"], rec["instance_id"])][rec["judge"]] = rec
    return out


def expected(run: Path, what: str, ctype: str = "") -> set[Pair]:
    """The pairs a filter must keep, decided from the verdict records' rows."""
    out = set()
    for pair, by_judge in verdicts_by_pair(run).items():
        rows = [
            (j, r)
            for j, v in by_judge.items()
            for r in v["rows"]
            if not ctype or r["constraint_type"] == ctype
        ]
        if what == "failed":
            hit = any(r["status"] == "ok" and r["satisfied"] is False for _, r in rows)
        elif what == "unparsed":
            hit = any(r["status"] == "unparsed" for _, r in rows)
        elif what == "errors":
            hit = any(r["status"] == "error" for _, r in rows) or any(
                v["status"] == "error" for v in by_judge.values()
            )
        elif what == "disagree":
            seen: dict[int, set[bool]] = defaultdict(set)
            for _, r in rows:
                if r["status"] == "ok":
                    seen[r["constraint_idx"]].add(r["satisfied"])
            hit = any(len(s) == 2 for s in seen.values())
        else:
            hit = bool(rows)
        if hit:
            out.add(pair)
    return out


# ------------------------------------------------------------------------------------------ the server


@pytest.fixture(scope="module")
def viewer(run_dir: Path) -> Iterator[str]:
    with serving(run_dir) as url:
        yield url


class serving:
    """`ifsweep view RUN --port 0` as a subprocess; its URL is read from what it prints."""

    def __init__(self, run: Path, *args: str) -> None:
        self.cmd = [sys.executable, "-m", "ifsweep", "view", str(run), "--port", "0", *args]
        self.proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> str:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        found = re.search(r"http://\S+", line)
        if found is None:
            self.proc.kill()
            raise AssertionError(f"no URL printed: {line!r} {self.proc.communicate()[1]}")
        return found.group(0)

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.terminate()
        self.proc.communicate(timeout=10)


def raw_request(url: str, target: str, method: str = "GET", host_header: str = "") -> tuple[int, bytes]:
    """One request with the target sent exactly as given (no client-side normalising)."""
    host, port = url.split("//")[1].rstrip("/").split(":")
    head = host_header or f"{host}:{port}"
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(f"{method} {target} HTTP/1.1\r\nHost: {head}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def get(url: str, path: str) -> str:
    status, body = raw_request(url, path)
    assert status == 200, (path, status, body[:300])
    return body.decode()


class Texts(HTMLParser):
    """The text of every element with one of `classes`, in document order, as (class, text)."""

    def __init__(self, classes: set[str]) -> None:
        super().__init__(convert_charrefs=True)
        self.classes, self.found, self._open = classes, [], []  # type: ignore[var-annotated]
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        cls = set((dict(attrs).get("class") or "").split())
        hit = cls & self.classes
        if hit and not self._open:
            self._open.append([hit.pop(), "", 0])
        elif self._open:
            self._open[-1][2] += 1

    def handle_endtag(self, tag: str) -> None:
        if self._open:
            if self._open[-1][2] == 0:
                cls, text, _ = self._open.pop()
                self.found.append((cls, text))
            else:
                self._open[-1][2] -= 1

    def handle_data(self, data: str) -> None:
        if self._open:
            self._open[-1][1] += data


def texts(html: str, *classes: str) -> list[tuple[str, str]]:
    p = Texts(set(classes))
    p.feed(html)
    return p.found


def instance_path(bench: str, model: str, iid: str) -> str:
    return f"/instance/{quote(bench, safe='')}/{quote(model, safe='')}/{quote(iid, safe='')}"


def judge_replies(run: Path, pair: Pair, judge: str) -> list[str]:
    """A judge's replies to a pair, in the order the calls were made (task, turn, ask)."""
    calls = [
        r
        for r in newest(run, "judgment").values()
        if (r["benchmark"], r["model"], r["instance_id"]) == pair and r["judge"] == judge
    ]
    return [r["text"] or "" for r in sorted(calls, key=lambda r: (r["task_idx"], r["turn_idx"], r["ask"]))]


# ------------------------------------------------------------------------------------------ tests


def test_instance_pages_show_the_stored_texts(run_dir: Path, viewer: str) -> None:
    gens = newest(run_dir, "generation")
    pairs = verdicts_by_pair(run_dir)
    shown = 0
    for pair, by_judge in sorted(pairs.items()):
        html = with_sent(get(viewer, instance_path(*pair)))
        gen = gens[next(iter(by_judge.values()))["gen_key"]]
        answer = [t for c, t in texts(html, "answer") if c == "answer"]
        assert answer == [gen["text"] or ""], pair
        replies = [t for _, t in texts(html, "reply")]
        assert replies == [r for j, _ in JUDGES for r in judge_replies(run_dir, pair, j)], pair
        inst = {
            i.instance_id: i for i in benchmarks.get(pair[0]).load(benchmarks.get(pair[0]).fixture_dir(), {})
        }[pair[2]]
        ctexts = [t for _, t in texts(html, "ctext")]
        assert ctexts == [c.text for c in inst.constraints], pair
        if pair[0] == "followbench":  # each level's added constraint (issue 36, item 3)
            assert ctexts and all(ctexts), pair
        if gen["status"] != "error":
            assert [t for _, t in texts(html, "prompt")] == [m.content for m in inst.messages], pair
            assert "matches the stored key" in html
        if gen.get("error_kind"):
            assert next(t for _, t in texts(html, "kind")) == gen["error_kind"]
        shown += 1
    assert shown > 20


def test_every_judge_call_is_shown_with_the_messages_that_hash_to_its_key(run_dir: Path, viewer: str) -> None:
    """A re-asked InFoBench conversation: each call's sent messages, rebuilt, are the ones its key covers."""
    from ifsweep.runner.store.keys import judge_key
    from ifsweep.runner.store.manifest import read_manifest

    manifest = read_manifest(run_dir)
    assert manifest is not None
    asked = [
        r for r in newest(run_dir, "judgment").values() if r["ask"] > 0 and r["benchmark"] == "infobench"
    ]
    assert asked, "the garbling judge must have been re-asked"
    rec = asked[0]
    path = instance_path(rec["benchmark"], rec["model"], rec["instance_id"])
    html = with_sent(get(viewer, path))
    turns = re.findall(
        r'<details class="turn" id="a[0-9a-f]+" data-key="([0-9a-f]+)"(?: open)?(?: data-built)?>'
        r'(.*?)<pre class="reply">',
        html,
        re.S,
    )
    assert rec["key"] in [k for k, _ in turns]
    spec = manifest.judges[rec["judge"]]
    for key, body in turns:
        sent = texts(body, "sent")
        roles = re.findall(r'<div class="role">(\w+)</div>', body)
        assert sent and len(roles) == len(sent)
        call = newest(run_dir, "judgment")[key]
        msgs = [{"role": r, "content": t} for r, (_, t) in zip(roles, sent, strict=True)]
        assert judge_key(manifest.judges[call["judge"]].endpoint, spec.params, msgs, call["ask"]) == key


@pytest.mark.parametrize("what", ["failed", "unparsed", "errors", "disagree"])
def test_filters_keep_exactly_the_pairs_the_records_say(run_dir: Path, viewer: str, what: str) -> None:
    index = RunIndex.build(run_dir)
    want = expected(run_dir, what)
    assert want, f"the run must hold pairs for the {what} filter"
    got = set()
    for (bench, model), group in index.groups.items():
        kept = select(
            group.values(), lambda iid, b=bench: index.types.get((b, iid), ()), Filters(**{what: True})
        )
        got |= {(bench, model, e.instance_id) for e in kept}
        html = get(viewer, f"/list/{quote(bench, safe='')}/{quote(model, safe='')}?{what}=1")
        assert f'<span id="matched">{len(kept)}</span>' in html
    assert got == want


def test_next_walks_the_filtered_list(run_dir: Path, viewer: str) -> None:
    listed = re.findall(
        r'<a href="([^"]+)" class="iid">([^<]+)</a>', get(viewer, "/list/cfbench/beta?failed=1")
    )
    want = {p[2] for p in expected(run_dir, "failed") if p[:2] == ("cfbench", "beta")}
    assert {iid for _, iid in listed} == want and len(listed) > 1
    walked, href = [], listed[0][0].replace("&amp;", "&")
    while href:
        html = get(viewer, href)
        walked.append(re.search(r'<h1 class="iid">([^<]+)</h1>', html).group(1))  # type: ignore[union-attr]
        assert f'<span class="at">{len(walked)} of {len(listed)}</span>' in html
        found = re.search(r'<a rel="next" href="([^"]+)"', html)
        href = found.group(1).replace("&amp;", "&") if found else ""
    assert walked == [iid for _, iid in listed]


def test_constraint_type_and_text_filters(run_dir: Path, viewer: str) -> None:
    index = RunIndex.build(run_dir)
    ctype = next(t for (b, _), ts in index.types.items() if b == "cfbench" for t in ts if t)
    want = {p for p in expected(run_dir, "failed", ctype) if p[0] == "cfbench" and p[1] == "alpha"}
    html = get(viewer, f"/list/cfbench/alpha?failed=1&type={quote(ctype)}")
    assert f'<span id="matched">{len(want)}</span>' in html
    assert set(re.findall(r'class="iid">([^<]+)<', html)) == {p[2] for p in want}
    # Text: a word of one answer finds that answer's pair (and the others holding it).
    gens = [
        g
        for g in newest(run_dir, "generation").values()
        if g["model"] == "beta" and g["benchmark"] == "cfbench"
    ]
    word = gens[0]["text"].split()[3]
    holding = {g["instance_id"] for g in gens if word.casefold() in (g["text"] or "").casefold()}
    html = get(viewer, f"/list/cfbench/beta?q={quote(word)}")
    assert holding <= set(re.findall(r'class="iid">([^<]+)<', html))


def searched(run: Path, bench: str, model: str, needle: str) -> set[str]:
    """The instances of (bench, model) whose id, answer or a judge reply holds `needle`, any case."""
    folded, out = needle.casefold(), set()
    gens = newest(run, "generation")
    for (b, m, iid), by_judge in verdicts_by_pair(run).items():
        if (b, m) != (bench, model):
            continue
        texts = [iid, gens[next(iter(by_judge.values()))["gen_key"]]["text"] or ""]
        texts += [r for j, _ in JUDGES for r in judge_replies(run, (b, m, iid), j)]
        if any(folded in t.casefold() for t in texts):
            out.add(iid)
    return out


def test_text_search_in_any_case_and_script(run_dir: Path, viewer: str) -> None:
    replies = [r["text"] for r in newest(run_dir, "judgment").values() if r["benchmark"] == "cfbench"]
    chinese = next(t for t in replies if t and not t.isascii())
    chinese = next(w for w in chinese.split() if not w.isascii())[:3]
    answer = next(
        g["text"] for g in newest(run_dir, "generation").values() if g["model"] == "alpha" and g["text"]
    )
    word = answer.split()[5]
    for needle in (chinese, word.upper(), word.lower(), f'{word} "', "YES"):
        want = searched(run_dir, "cfbench", "alpha", needle)
        html = get(viewer, f"/list/cfbench/alpha?q={quote(needle)}")
        assert set(re.findall(r'class="iid">([^<]+)<', html)) == want, needle
        assert f'<span id="matched">{len(want)}</span>' in html
    assert searched(run_dir, "cfbench", "alpha", chinese) and searched(run_dir, "cfbench", "alpha", word)


def test_the_overview_counts_match_the_records(run_dir: Path, viewer: str) -> None:
    html = get(viewer, "/")
    pairs = verdicts_by_pair(run_dir)
    for bench in BENCHES:
        for model in ("alpha", "beta", "org/tiny"):
            n = sum(1 for p in pairs if p[:2] == (bench, model))
            assert f'href="/list/{bench}/{quote(model, safe="")}"' in html
            assert n == LIMIT or bench == "followbench"
    errors = len({p for p in expected(run_dir, "errors")})
    assert errors > 0
    # The pairs in error by kind, as `ifsweep status` counts them.
    from ifsweep.runner.watch.status import status_report

    kinds = status_report(run_dir).errors_by_kind
    assert sum(kinds.values()) == errors
    assert "pairs in error: " + ", ".join(f"{k}: {n}" for k, n in kinds.items()) + " ·" in html


def test_traversal_gets_nothing_outside_the_run(run_dir: Path, viewer: str) -> None:
    secret = run_dir.parent / "secret.txt"
    secret.write_text("TOP-SECRET-CONTENT")
    targets = [
        "/static/../../etc/passwd",
        "/static/%2e%2e/%2e%2e/etc/passwd",
        "/static/..%2f..%2f..%2fetc%2fpasswd",
        "/static/%252e%252e%252fsecret.txt",
        "/static/..%5c..%5csecret.txt",
        "/static/../secret.txt",
        "/../secret.txt",
        "/%2e%2e/secret.txt",
        "/static//etc/passwd",
        "/static/viewer.css/../../secret.txt",
        "/instance/../../../etc/passwd",
        f"/static/{quote(str(secret), safe='')}",
        "http://127.0.0.1/../../etc/passwd",
    ]
    for target in targets:
        status, body = raw_request(viewer, target)
        assert status in (400, 404), (target, status)
        assert b"root:" not in body and b"TOP-SECRET" not in body, target
    status, body = raw_request(viewer, "/static/viewer.css")
    assert status == 200 and b"ifsweep view" in body


def test_another_site_by_a_rebound_name_gets_nothing(viewer: str) -> None:
    port = viewer.rstrip("/").rsplit(":", 1)[1]
    for host in (f"evil.example:{port}", "evil.example", f"127.0.0.1.evil.example:{port}"):
        status, body = raw_request(viewer, "/", host_header=host)
        assert status == 403 and b"Run " not in body, host
    for host in (f"localhost:{port}", f"127.0.0.1:{port}"):
        assert raw_request(viewer, "/", host_header=host)[0] == 200


def test_it_has_no_write_endpoints(viewer: str) -> None:
    for method in ("POST", "PUT", "DELETE", "PATCH"):
        for target in ("/", "/list/cfbench/alpha", "/static/viewer.css"):
            status, _ = raw_request(viewer, target, method)
            assert status == 405, (method, target)
    assert raw_request(viewer, "/", "HEAD")[0] == 200


def test_not_a_run_directory_exits_2(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ifsweep", "view", str(tmp_path), "--port", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert f"{tmp_path}: not a run directory" in out.stderr


def test_export_filters_without_export_are_refused(run_dir: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ifsweep", "view", str(run_dir), "--port", "0", "--failed", "--sample", "3"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 2
    assert "--failed, --sample: only with --export FILE.html" in out.stderr


def test_a_port_in_use_is_a_clear_error(run_dir: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        out = subprocess.run(
            [sys.executable, "-m", "ifsweep", "view", str(run_dir), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert out.returncode == 2
    assert f"port {port} on 127.0.0.1 is already in use" in out.stderr


def test_another_host_is_served_with_a_warning(run_dir: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ifsweep", "view", str(run_dir), "--port", "0", "--host", "0.0.0.0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert "http://0.0.0.0:" in line
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert "warning: --host 0.0.0.0" in err and "no login" in err
    # The default binds the loopback interface only.
    with serving(run_dir) as url:
        assert url.startswith("http://127.0.0.1:")


def test_the_index_reads_only_what_the_shards_gained(run_dir: Path, tmp_path: Path) -> None:
    """A copy of the run written in pieces, the last line cut mid-way as a live writer leaves it."""
    lines = b"".join(p.read_bytes() for p in sorted((run_dir / "shards").glob("*.jsonl"))).splitlines(
        keepends=True
    )
    run = tmp_path / "grow"
    (run / "shards").mkdir(parents=True)
    shard = run / "shards" / "main-00001.jsonl"
    half = len(lines) // 2
    shard.write_bytes(b"".join(lines[:half]) + lines[half][:20])
    index = RunIndex.build(run)
    assert index.version == half and not index.damaged
    with open(shard, "ab") as f:
        f.write(lines[half][20:])
        f.write(b"".join(lines[half + 1 :]))
    assert index.refresh() == len(lines) - half
    assert index.refresh() == 0
    whole = RunIndex.build(run_dir)
    assert {g: list(e) for g, e in index.groups.items()} == {g: list(e) for g, e in whole.groups.items()}
    for group, entries in whole.groups.items():
        for iid, e in entries.items():
            assert index.groups[group][iid].marks == e.marks
            assert index.groups[group][iid].calls == e.calls


def whole_overview(url: str, within_s: float = 30.0) -> str:
    """The overview once it says the server's first pass is done (it serves before that)."""
    import time

    deadline = time.monotonic() + within_s
    while "index whole" not in (overview := get(url, "/")) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert "index whole" in overview, overview
    return overview


def test_a_damaged_line_is_skipped_and_counted(run_dir: Path, tmp_path: Path) -> None:
    copy = tmp_path / "damaged"
    shutil.copytree(run_dir, copy)
    shard = sorted((copy / "shards").glob("*.jsonl"))[0]
    lines = shard.read_bytes().splitlines(keepends=True)
    victim = next(i for i, line in enumerate(lines) if b'"kind":"verdict"' in line)
    lines[victim] = lines[victim].replace(b'"rows":[', b'"rows":[ ', 1)  # checksum no longer matches
    shard.write_bytes(b"".join(lines))
    index = RunIndex.build(copy)
    assert len(index.damaged) == 1 and index.damaged[0].file == shard
    assert index.version == sum(p.read_bytes().count(b"\n") for p in (copy / "shards").glob("*.jsonl")) - 1
    with serving(copy) as url:
        assert "1 damaged shard lines skipped: shards/" in whole_overview(url)


def test_a_torn_last_line_ends_the_first_pass_and_is_named(run_dir: Path, tmp_path: Path) -> None:
    """A shard whose last line has no newline (a crash mid-write): the server's first pass ends, the
    overview says the index is whole and names the line, instead of "indexing: N of N" for ever."""
    copy = tmp_path / "torn"
    shutil.copytree(run_dir, copy)
    shard = sorted((copy / "shards").glob("*.jsonl"))[0]
    size = shard.stat().st_size
    with shard.open("ab") as fh:
        fh.write(shard.read_bytes()[:120])  # the start of a record, and no newline
    with serving(copy) as url:
        overview = whole_overview(url)
        assert "indexing" not in overview, overview
        named = texts(overview, "damaged")
        assert named == [
            (
                "damaged",
                f"1 damaged shard lines skipped: shards/{shard.name} offset {size}: 120 bytes without a "
                "newline (a torn last line)",
            )
        ], named
        assert raw_request(url, "/favicon.ico")[0] == 204


def test_shards_larger_than_one_read_are_indexed_whole(tmp_path: Path) -> None:
    """A shard of more than 16 MiB (the index reads in 16 MiB pieces), lines of every length across a
    piece's end: every record is found, and equals what the store reads."""
    from ifsweep.runner.store.shards import RunStore, record_key

    run, N = tmp_path / "big", 11000
    store = RunStore.open(run, write_through=False, fsync=False)
    try:
        for i in range(N):
            text = "x" * (1000 + i % 997) + f" answer {i}"
            store.append(
                {"v": 2, "kind": "generation", "key": record_key(["g", i]), "status": "ok", "text": text}
                | {"model": "m", "benchmark": "cfbench", "instance_id": f"i{i}", "cost_usd": 0.5}
            )
    finally:
        store.close()
    assert sum(p.stat().st_size for p in (run / "shards").glob("*.jsonl")) > 16 << 20
    index = RunIndex.build(run)
    assert not index.damaged and index.version == N
    group = index.groups[("cfbench", "m")]
    assert list(group) == [f"i{i}" for i in range(N)]
    stored = {r["key"]: r for r in stored_records(run, {"generation"})}
    for iid in ("i0", "i4095", f"i{N - 1}", *(f"i{i}" for i in range(0, N, 611))):
        key = group[iid].gen_key
        assert key is not None
        assert index.record(key) == stored[key.hex()]
    assert index.cost[("cfbench", "m", None)] == 0.5 * N
    index.close()


def pieces(html: str, name: str) -> Callable[[int], str]:
    """Text k of the shared pieces in the script `name` (each text is stored as numbers, base 36, into
    one list of distinct pieces), joined as viewer.js joins it."""
    found = re.search(rf'<script type="application/json" id="{name}">(.*?)</script>', html, re.S)
    assert found is not None
    data = json.loads(found.group(1))

    def text(k: int) -> str:
        out = []
        for x in data["pages"][k].split(","):
            first, _, last = x.partition("-")
            out += data["pieces"][int(first, 36) : int(last or first, 36) + 1]
        return "".join(out)

    return text


def with_sent(html: str) -> str:
    """A served instance page with every folded call and its sent messages in place, as opening them
    shows them (viewer.js builds each from the page's shared pieces)."""
    if 'id="ifsweep-sent"' not in html:
        return html
    text = pieces(html, "ifsweep-sent")
    pattern = re.compile(
        r'(<details class="(?:messages|turn)"[^>]*) data-sent="(\d+)">'
        r"(<summary>(?:(?!</summary>).)*</summary>)</details>",
        re.S,
    )
    while (m := pattern.search(html)) is not None:  # a call's body holds its messages' details
        filled = f"{m.group(1)} data-built>{m.group(3)}{text(int(m.group(2)))}</details>"
        html = html[: m.start()] + filled + html[m.end() :]
    return html


def built(html: str) -> str:
    """The export with each pair's page built from its shared pieces, as viewer.js builds the page
    shown."""
    text = pieces(html, "ifsweep-pages")

    def fill(m: re.Match[str]) -> str:
        return m.group(1) + text(int(m.group(2))) + "</section>"

    return re.sub(
        r'(<section class="export-instance" id="a[0-9a-f]+" data-page="(\d+)">)</section>', fill, html
    )


def test_the_export_holds_the_flagged_pairs_and_a_sample_and_needs_nothing_else(
    run_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "export.html"
    done = subprocess.run(
        [sys.executable, "-m", "ifsweep", "view", str(run_dir), "--export", str(out), "--sample", "5"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    html = built(out.read_text())
    flagged = expected(run_dir, "disagree") | expected(run_dir, "unparsed") | expected(run_dir, "errors")
    ids = re.findall(
        r'<section class="export-instance" [^>]+><nav.*?</nav><h1 class="iid">([^<]+)</h1>', html
    )
    assert len(ids) == len(flagged) + 5
    # Nothing loads from anywhere: no src or href leaves the file, no stylesheet or script is linked.
    assert not re.search(r'(src|href)="(?!#)', html)
    assert "<link" not in html and "@import" not in html and "url(" not in html
    # Each pair's answer is the stored one.
    gens = newest(run_dir, "generation")
    pairs = verdicts_by_pair(run_dir)
    sections = re.split(r'<section class="export-instance"', html)[1:]
    by_name = {}
    for s in sections:
        model = re.search(r"model <b>([^<]+)</b>", s)
        iid = re.search(r'<h1 class="iid">([^<]+)</h1>', s)
        bench = re.search(r'<p class="facts">([^ ]+) ·', s)
        assert model and iid and bench
        by_name[(bench.group(1), model.group(1), iid.group(1))] = s
    assert flagged <= set(by_name)
    for pair, s in by_name.items():
        gen = gens[next(iter(pairs[pair].values()))["gen_key"]]
        assert [t for _, t in texts(s, "answer")] == [gen["text"] or ""]


def test_export_filters_choose_the_pairs(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "failed.html"
    args = ["--model", "alpha", "--benchmark", "cfbench", "--failed", "--sample", "0"]
    done = subprocess.run(
        [sys.executable, "-m", "ifsweep", "view", str(run_dir), "--export", str(out), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    ids = set(re.findall(r'<h1 class="iid">([^<]+)</h1>', built(out.read_text())))
    assert ids == {p[2] for p in expected(run_dir, "failed") if p[:2] == ("cfbench", "alpha")}


def export_of(run_dir: Path, out: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "ifsweep", "view", str(run_dir), "--export", str(out), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return out.read_text()


def exported_pairs(html: str) -> list[tuple[str, str, str]]:
    """(benchmark, model, instance) of each pair's table row in the export's lists."""
    out = []
    for part in re.split(r'<section class="export-group"', html)[1:]:
        group = part.split("</section>", 1)[0]
        head = re.search(r"<h2>([^<]+) · ([^<]+)</h2>", group)
        assert head is not None
        out += [(head.group(1), head.group(2), i) for i in re.findall(r'class="iid">([^<]+)</', group)]
    return out


def test_an_export_filter_means_what_it_selects_and_a_sample_only_when_asked(
    run_dir: Path, tmp_path: Path
) -> None:
    disagree = expected(run_dir, "disagree")
    assert len(disagree) > 3
    only = exported_pairs(export_of(run_dir, tmp_path / "d.html", "--disagree"))
    assert sorted(only) == sorted(disagree)  # no random sample of the rest
    more = exported_pairs(export_of(run_dir, tmp_path / "d3.html", "--disagree", "--sample", "3"))
    assert len(more) == len(disagree) + 3 and disagree <= set(more)
    # --benchmark limits the overview too: one table's boards (one per judge), no other benchmark's
    html = export_of(run_dir, tmp_path / "cf.html", "--benchmark", "cfbench")
    boards = [b.strip() for b in re.findall(r"<section class=\"board\"><h2>([^<]+)<", html)]
    assert boards == ["CFBench"] * len(JUDGES), boards
    assert {b for b, _, _ in exported_pairs(html)} == {"cfbench"}


def test_a_small_export_takes_flagged_pairs_of_every_model_in_turn(run_dir: Path) -> None:
    from ifsweep.runner.view.export import Selection, choose

    index = RunIndex.build(run_dir)
    flagged = expected(run_dir, "disagree") | expected(run_dir, "unparsed") | expected(run_dir, "errors")
    groups = {p[:2] for p in flagged}
    assert len(groups) > 4
    chosen = choose(index, Selection(sample=2, limit=len(groups)))
    flagged_chosen = [c for c in chosen if c.why != "sample"]
    assert len(chosen) == len(groups) and len(flagged_chosen) == len(groups) - 2
    assert len({(c.bench, c.model) for c in flagged_chosen}) == len(flagged_chosen)  # one a group first
    assert all((c.bench, c.model, c.entry.instance_id) in flagged for c in flagged_chosen)
    assert len(choose(index, Selection(sample=0, limit=10_000))) == len(flagged)


def test_a_prompt_is_shown_only_from_the_data_the_run_was_made_from(tmp_path: Path) -> None:
    data = tmp_path / "cf"
    shutil.copytree(benchmarks.get("cfbench").fixture_dir(), data)
    target = next(p for p in sorted(data.rglob("*.json")))
    target.write_text(target.read_text().replace("。", "。 ", 1))  # this run's own data: not the sample's
    out = tmp_path / "run"
    with SimulatorThread() as sim:
        cfg = sweep_config(out, sim.base_url, sim.base_url, data={"cfbench": data})
        cfg["benchmarks"] = [dict(cfg["benchmarks"][0], limit=2)]
        cfg["models"] = cfg["models"][:1]
        assert ifsweep.run(cfg).status == "complete"
    iid = next(iter(verdicts_by_pair(out)))[2]
    path = instance_path("cfbench", "alpha", iid)
    with serving(out) as url:  # where the run read it, as its manifest says
        html = get(url, path)
        assert "matches the stored key" in html and texts(html, "prompt")
    inside = target.relative_to(data)
    data = data.rename(tmp_path / "moved")
    target = data / inside
    with serving(out) as url:  # moved: not among the places looked in by default
        html = get(url, path)
        assert "matches the stored key" not in html and "pass its directory with --data" in html
        assert not texts(html, "prompt")
    with serving(out, "--data", str(data)) as url:
        html = get(url, path)
        assert "matches the stored key" in html and texts(html, "prompt")
    target.write_text(target.read_text() + " ")  # the data changed since the run: no prompt is shown
    with serving(out, "--data", str(data)) as url:
        html = get(url, path)
        assert "matches the stored key" not in html and not texts(html, "prompt")


def test_pages_load_only_from_the_viewer(run_dir: Path, viewer: str) -> None:
    conn = http.client.HTTPConnection(viewer.split("//")[1].rstrip("/"), timeout=10)
    conn.request("GET", "/")
    resp = conn.getresponse()
    assert resp.status == 200
    assert "default-src 'self'" in (resp.getheader("Content-Security-Policy") or "")
    body = resp.read().decode()
    assert not re.search(r'(src|href)="(https?:)?//', body)
    conn.close()
