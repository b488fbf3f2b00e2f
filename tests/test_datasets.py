"""The pinned, verified download: a real HTTP server on 127.0.0.1 serves the shared benchmark files (or a
tampered copy), and runner.engine.datasets fetches them into a temporary cache."""

from __future__ import annotations

import hashlib
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ifsweep import benchmarks
from ifsweep.benchmarks.base import DataFile, Release
from ifsweep.benchmarks.cfbench import CFBench
from ifsweep.benchmarks.records import DataError
from ifsweep.benchmarks.releases import CFBENCH, EIFBENCH, FOLLOWBENCH, INFOBENCH
from ifsweep.runner.engine.datasets import (
    DownloadError,
    cache_root,
    ensure_release,
    file_digests,
    git_blob_sha1,
)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "benchmarks"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="shared benchmark data not present")

CFBENCH_FILE = "data/cfbench_data.json"


@dataclass
class Server:
    root: Path
    url: str
    requests: list[str] = field(default_factory=list)


def _serve(root: Path) -> Iterator[Server]:
    seen: list[str] = []

    class Handler(SimpleHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            super().do_GET()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), partial(Handler, directory=str(root)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield Server(root, f"http://127.0.0.1:{httpd.server_address[1]}", seen)
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture
def shared_server() -> Iterator[Server]:
    if not SHARED.is_dir():
        pytest.skip("shared benchmark data not present")
    yield from _serve(SHARED)


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("IFSWEEP_CACHE_DIR", str(root))
    for name in benchmarks.names():
        monkeypatch.delenv(f"IFSWEEP_DATA_BASE_URL_{name.upper()}", raising=False)
    return root


def test_git_blob_of_known_content(tmp_path: Path) -> None:
    assert git_blob_sha1(b"hello") == hashlib.sha1(b"blob 5\0hello").hexdigest()
    assert git_blob_sha1(b"hello") == "b6fc4c620b67d95f953a5c1c1230aaab5db5a1b0"  # git hash-object
    assert git_blob_sha1(b"") == "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
    path = tmp_path / "hello"
    path.write_bytes(b"hello")
    assert file_digests(path) == (hashlib.sha256(b"hello").hexdigest(), git_blob_sha1(b"hello"))


def test_cache_root_precedence(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "")
    monkeypatch.setenv("IFSWEEP_CACHE_DIR", "")
    assert cache_root() == tmp_path / "home" / ".cache" / "ifsweep"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_root() == tmp_path / "xdg" / "ifsweep"
    monkeypatch.setenv("IFSWEEP_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_root() == tmp_path / "mine"


@needs_shared
def test_pins_match_the_shared_checksums() -> None:
    sums = {}
    for line in (SHARED / "SHA256SUMS").read_text().splitlines():
        digest, path = line.split(maxsplit=1)
        sums[path.removeprefix("./")] = digest
    folders = {"FollowBench": FOLLOWBENCH, "CFBench": CFBENCH, "EIFBench": EIFBENCH}
    pinned = 0
    for folder, release in folders.items():
        for entry in release.files:
            if entry.sha256 is not None:
                assert sums[f"{folder}/{entry.relpath}"] == entry.sha256
                pinned += 1
            else:
                assert entry.git_blob is not None and len(entry.git_blob) == 40
    assert pinned == 12 + 1 + 1
    assert len(FOLLOWBENCH.files) == 12
    assert all(
        benchmarks.get(n).release.revision in benchmarks.get(n).release.base_url for n in benchmarks.names()
    )
    assert INFOBENCH.files == (
        DataFile("InfoBench.json", sha256="66a2ee8d70208a7a879a17f471ba0ffd097b698265ea4796be99a273fdcc6559"),
    )


def test_download_verifies_and_reuses_the_cache(
    shared_server: Server, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IFSWEEP_DATA_BASE_URL_CFBENCH", f"{shared_server.url}/CFBench/")
    root = ensure_release("cfbench", CFBENCH)
    assert root == cache / "cfbench" / CFBENCH.revision
    target = root / CFBENCH_FILE
    assert target.read_bytes() == (SHARED / "CFBench" / CFBENCH_FILE).read_bytes()
    assert shared_server.requests == [f"/CFBench/{CFBENCH_FILE}"]
    assert sorted(p.name for p in target.parent.iterdir()) == ["cfbench_data.json"]

    assert ensure_release("cfbench", CFBENCH) == root
    assert len(shared_server.requests) == 1  # verified from the cache, not fetched again

    target.write_bytes(target.read_bytes()[:-10])  # a truncated cache file is never used
    ensure_release("cfbench", CFBENCH)
    assert len(shared_server.requests) == 2
    assert hashlib.sha256(target.read_bytes()).hexdigest() == CFBENCH.files[0].sha256


def test_argument_overrides_env_and_files_selects(
    shared_server: Server, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IFSWEEP_DATA_BASE_URL_FOLLOWBENCH", "http://127.0.0.1:9/nothing-here")
    wanted = ["data/content_constraints.json", "data_zh/style_constraints.json"]
    root = ensure_release(
        "followbench", FOLLOWBENCH, base_url=f"{shared_server.url}/FollowBench", files=wanted
    )
    assert shared_server.requests == [f"/FollowBench/{relpath}" for relpath in wanted]
    assert sorted(str(p.relative_to(root)) for p in root.rglob("*.json")) == wanted
    with pytest.raises(ValueError, match=r"not in the pinned release: data/nope\.json"):
        ensure_release("followbench", FOLLOWBENCH, files=["data/nope.json"])


@needs_shared
def test_tampered_file_is_refused_and_not_cached(tmp_path: Path, cache: Path) -> None:
    mirror = tmp_path / "mirror"
    (mirror / "data").mkdir(parents=True)
    original = (SHARED / "CFBench" / CFBENCH_FILE).read_bytes()
    tampered = original.replace("主需".encode(), "次需".encode(), 1)
    (mirror / CFBENCH_FILE).write_bytes(tampered)
    for server in _serve(mirror):
        with pytest.raises(DownloadError) as info:
            ensure_release("cfbench", CFBENCH, base_url=server.url)
        assert len(server.requests) == 1
    error = info.value
    assert isinstance(error, DataError)
    message = str(error)
    assert CFBENCH_FILE in message
    assert CFBENCH.files[0].sha256 is not None and CFBENCH.files[0].sha256 in message
    assert hashlib.sha256(tampered).hexdigest() in message
    assert error.expected == f"sha256 {CFBENCH.files[0].sha256}"
    assert error.actual == f"sha256 {hashlib.sha256(tampered).hexdigest()}"
    leftovers = [p for p in cache.rglob("*") if p.is_file()]
    assert leftovers == []


def test_git_blob_pins_are_checked_on_download(tmp_path: Path, cache: Path) -> None:
    content = "一条我们自己写的记录\n".encode() * 100
    (tmp_path / "srv" / "data").mkdir(parents=True)
    (tmp_path / "srv" / "data" / "x.json").write_bytes(content)
    good = Release("unused", "rev1", (DataFile("data/x.json", git_blob=git_blob_sha1(content)),))
    wrong = "0" * 40
    bad = Release("unused", "rev2", (DataFile("data/x.json", git_blob=wrong),))
    for server in _serve(tmp_path / "srv"):
        root = ensure_release("mine", good, base_url=server.url)
        assert (root / "data" / "x.json").read_bytes() == content
        with pytest.raises(
            DownloadError, match=f"expected git blob {wrong}, got git blob {git_blob_sha1(content)}"
        ):
            ensure_release("mine", bad, base_url=server.url)
    assert not (cache / "mine" / "rev2" / "data" / "x.json").exists()


def test_missing_file_and_refused_pins(tmp_path: Path, cache: Path) -> None:
    (tmp_path / "empty").mkdir()
    release = Release("unused", "rev", (DataFile("data/x.json", sha256="0" * 64),))
    for server in _serve(tmp_path / "empty"):
        with pytest.raises(
            DownloadError, match=r"data/x\.json: download from http://127\.0\.0\.1:\d+/data/x\.json"
        ):
            ensure_release("mine", release, base_url=server.url)
    unpinned = Release("unused", "rev", (DataFile("data/x.json"),))
    with pytest.raises(ValueError, match="no pinned digest"):
        ensure_release("mine", unpinned, base_url="http://127.0.0.1:9")
    escaping = Release("unused", "rev", (DataFile("../../x.json", sha256="0" * 64),))
    with pytest.raises(ValueError, match="leaves the release directory"):
        ensure_release("mine", escaping, base_url="http://127.0.0.1:9")
    with pytest.raises(ValueError, match="release name"):
        ensure_release("../up", release)
    assert [p for p in cache.rglob("*") if p.is_file()] == []


@needs_shared
def test_downloaded_release_loads_as_cfbench(shared_server: Server, cache: Path) -> None:
    root = ensure_release("cfbench", CFBENCH, base_url=f"{shared_server.url}/CFBench")
    assert sum(1 for _ in CFBench().load(root, {})) == 1000
    shutil.rmtree(cache)


def test_file_mirror_and_bad_cache_with_bad_mirror(tmp_path: Path, cache: Path) -> None:
    content = b'[{"own": "fixture"}]\n'
    (tmp_path / "m" / "data").mkdir(parents=True)
    (tmp_path / "m" / "data" / "x.json").write_bytes(content)
    release = Release("unused", "rev", (DataFile("data/x.json", sha256=hashlib.sha256(content).hexdigest()),))
    root = ensure_release("mine", release, base_url=(tmp_path / "m").as_uri())
    assert (root / "data" / "x.json").read_bytes() == content
    # The cached copy goes bad and the mirror now serves other bytes: the error is raised and the bad
    # cached file is gone rather than left for a later run to trust.
    (root / "data" / "x.json").write_bytes(b"[]")
    (tmp_path / "m" / "data" / "x.json").write_bytes(b"[1]")
    with pytest.raises(DownloadError, match=hashlib.sha256(b"[1]").hexdigest()):
        ensure_release("mine", release, base_url=(tmp_path / "m").as_uri())
    assert [p for p in cache.rglob("*") if p.is_file()] == []
