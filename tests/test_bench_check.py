"""`ifsweep benchmarks check` on every data set beside the checkout, and through the pinned download
from a local HTTP server: the counts each benchmark's paper publishes."""

from __future__ import annotations

import functools
import re
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ifsweep import benchmarks
from ifsweep.runner.commands.checking import count_instances, parse_options
from ifsweep.runner.commands.cli import main
from ifsweep.runner.errors import UsageError


def check(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["benchmarks", "check", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def section(text: str, title: str) -> dict[str, list[int]]:
    """The rows of one `by <title>` table: label -> its numbers."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(f"by {title} "))
    rows: dict[str, list[int]] = {}
    for line in lines[start + 1 :]:
        if not line.startswith("    "):
            break
        label, *nums = re.split(r"\s{2,}", line.strip())
        rows[label] = [int(n) for n in nums]
    return rows


def total(text: str, name: str) -> int:
    match = re.search(rf"^  {name}\s+(\d+)$", text, re.MULTILINE)
    assert match, (name, text)
    return int(match.group(1))


def test_followbench_english(shared_benchmarks: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = check(capsys, "followbench", "--data", str(shared_benchmarks / "FollowBench"))
    assert code == 0, err
    assert (total(out, "instances"), total(out, "groups"), total(out, "constraints")) == (820, 164, 2460)
    assert section(out, "category") == {
        "content": [125, 375],
        "situation": [110, 330],
        "style": [150, 450],
        "format": [150, 450],
        "example": [200, 600],
        "mixed": [85, 255],
    }
    assert section(out, "level") == {str(lvl): [164, 164 * lvl] for lvl in range(1, 6)}
    assert sum(v[0] for v in section(out, "constraint type").values()) == 2460
    assert "by split" not in out and "sub-instructions" not in out


def test_followbench_chinese(shared_benchmarks: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = check(
        capsys, "followbench", "--data", str(shared_benchmarks / "FollowBench"), "--option", "language=zh"
    )
    assert code == 0, err
    assert "[language=zh]" in out.splitlines()[0]
    assert (total(out, "instances"), total(out, "groups")) == (790, 158)
    assert {k: v[0] for k, v in section(out, "category").items()} == {
        "content": 115,
        "situation": 110,
        "style": 150,
        "format": 150,
        "example": 200,
        "mixed": 65,
    }


def test_followbench_categories_option(shared_benchmarks: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = check(
        capsys,
        "followbench",
        "--data",
        str(shared_benchmarks / "FollowBench"),
        "--option",
        "categories=mixed,style",
    )
    assert code == 0, err
    assert total(out, "instances") == 235
    assert set(section(out, "category")) == {"mixed", "style"}


def assert_cfbench_counts(out: str) -> None:
    assert (total(out, "instances"), total(out, "groups"), total(out, "constraints")) == (1000, 1000, 4237)
    assert section(out, "split") == {"easy": [500, 1793], "hard": [500, 2444]}
    assert section(out, "priority") == {"primary": [1835], "secondary": [2402]}
    categories = section(out, "category")
    # About 200 domains: the largest are shown, the rest summed, and nothing is lost.
    assert len(categories) == 13 and any(k.startswith("... ") for k in categories)
    assert sum(v[0] for v in categories.values()) == 1000
    assert sum(v[1] for v in categories.values()) == 4237
    types = section(out, "constraint type")
    assert types["内容约束"] == [1385] and types["(none)"] == [129]
    assert sum(v[0] for v in types.values()) == 4237


def test_cfbench(shared_benchmarks: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = check(capsys, "cfbench", "--data", str(shared_benchmarks / "CFBench"))
    assert code == 0, err
    assert_cfbench_counts(out)
    code, out, err = check(
        capsys, "cfbench", "--data", str(shared_benchmarks / "CFBench"), "--option", "split=easy"
    )
    assert code == 0, err
    assert total(out, "instances") == 500 and section(out, "split") == {"easy": [500, 1793]}


def test_eifbench_party(shared_benchmarks: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = check(capsys, "eifbench", "--data", str(shared_benchmarks / "EIFBench"))
    assert code == 0, err
    assert total(out, "instances") == 100
    assert total(out, "sub-instructions") == 849
    assert total(out, "constraints") == 8025
    assert section(out, "split") == {"party": [100, 8025]}


def test_infobench_fixture(capsys: pytest.CaptureFixture[str]) -> None:
    fixture = benchmarks.get("infobench").fixture_dir()
    code, out, err = check(capsys, "infobench", "--data", str(fixture))
    assert code == 0, err
    assert (total(out, "instances"), total(out, "constraints")) == (10, 38)
    assert section(out, "split") == {"easy": [5, 15], "hard": [5, 23]}
    assert len(section(out, "category")) == 10


def test_counts_match_a_direct_load(shared_benchmarks: Path) -> None:
    bench = benchmarks.get("eifbench")
    c = count_instances(bench.load(shared_benchmarks / "EIFBench", {}))
    assert (c.instances, c.groups, c.sub_instructions, c.constraints) == (100, 100, 849, 8025)
    assert "priority" not in c.constraints_by  # EIFBench has no priorities: no table of "(none)"


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def serve() -> Iterator[functools.partial[str]]:
    servers: list[ThreadingHTTPServer] = []

    def start(root: Path) -> str:
        server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield functools.partial(start)
    for server in servers:
        server.shutdown()
        server.server_close()


def test_cfbench_without_data_downloads_the_pinned_file(
    shared_benchmarks: Path,
    serve: functools.partial[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = serve(shared_benchmarks / "CFBench")
    monkeypatch.setenv("IFSWEEP_DATA_BASE_URL_CFBENCH", base)
    code, out, err = check(capsys, "cfbench")
    assert code == 0, err
    assert_cfbench_counts(out)
    cached = Path(out.splitlines()[0].split("(", 1)[1].rsplit(")", 1)[0])
    assert (cached / "data" / "cfbench_data.json").read_bytes() == (
        shared_benchmarks / "CFBench" / "data" / "cfbench_data.json"
    ).read_bytes()

    # A mirror serving other bytes is refused by the pin, whatever it serves.
    bad_root = tmp_path / "mirror"
    (bad_root / "data").mkdir(parents=True)
    shutil.copy(shared_benchmarks / "CFBench" / "data" / "cfbench_data.json", bad_root / "data")
    with (bad_root / "data" / "cfbench_data.json").open("ab") as fh:
        fh.write(b"\n")
    monkeypatch.setenv("IFSWEEP_DATA_BASE_URL_CFBENCH", serve(bad_root))
    monkeypatch.setenv("IFSWEEP_CACHE_DIR", str(tmp_path / "fresh-cache"))
    code, out, err = check(capsys, "cfbench")
    assert code == 2 and "digest mismatch" in err and out == ""


def test_bad_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = check(capsys, "nobench", "--data", str(tmp_path))
    assert code == 2 and "unknown benchmark 'nobench'" in err
    code, _, err = check(capsys, "cfbench", "--data", str(tmp_path), "--option", "language=zh")
    assert code == 2 and "no option 'language'" in err
    code, _, err = check(capsys, "cfbench", "--data", str(tmp_path), "--option", "split=medium")
    assert code == 2 and "split" in err
    code, _, err = check(capsys, "cfbench", "--data", str(tmp_path / "missing"))
    assert code == 2 and "no such file or folder" in err
    # A file that breaks the schema is named, with its record and field.
    bad = tmp_path / "cfbench_data.json"
    bad.write_text('[{"idx": 0, "prompt": 3}]', encoding="utf-8")
    code, _, err = check(capsys, "cfbench", "--data", str(bad))
    assert code == 2 and str(bad) in err and "record 0" in err


def test_parse_options() -> None:
    assert parse_options(["language=zh", "categories=a,b"]) == {"language": "zh", "categories": ["a", "b"]}
    with pytest.raises(UsageError, match="expected KEY=VALUE"):
        parse_options(["language"])
    with pytest.raises(UsageError, match="given twice"):
        parse_options(["split=easy", "split=hard"])
