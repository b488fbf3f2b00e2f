"""The house as docs/ARCHITECTURE.md draws it (issue 24): its list of rooms is the tree's package
folders, no folder holds more than 15 modules, no function is over 60 lines (a nested function counted
on its own), and no module of the product imports another that imports it back, at module level or
inside a function (imports read with ast, `if TYPE_CHECKING:` ones included)."""

from __future__ import annotations

import ast
import re
import tomllib
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TOPS = ("api", "runner", "providers", "metrics", "benchmarks", "simulator")
MAX_MODULES = 15
MAX_LINES = 60
# A room in the document: a table row whose first cell is a folder in backticks, `runner/store/`.
ROOM_RE = re.compile(r"^\|\s*`([a-z_]+(?:/[a-z_]+)*)/`\s*\|")


def package_folders() -> list[str]:
    """Every folder of the product that is a Python package, relative to the repository."""
    found = []
    for top in TOPS:
        for init in (REPO / top).rglob("__init__.py"):
            found.append(init.parent.relative_to(REPO).as_posix())
    return sorted(found)


def documented_rooms() -> list[str]:
    text = (REPO / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("\n## Rooms", 1)[1].split("\n## ", 1)[0]
    return [m[1] for line in section.splitlines() if (m := ROOM_RE.match(line))]


def product_files() -> Iterator[Path]:
    for top in TOPS:
        yield from sorted((REPO / top).rglob("*.py"))


def module_names() -> dict[Path, str]:
    """Each product file's import name, from pyproject's package-dir (api/ is `ifsweep` itself)."""
    setup = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    roots = {folder: package for package, folder in setup["package-dir"].items()}
    names = {}
    for path in product_files():
        rel = path.relative_to(REPO).with_suffix("")
        parts = list(rel.parts)
        base = roots[parts[0]]
        tail = parts[1:-1] if parts[-1] == "__init__" else parts[1:]
        names[path] = ".".join([base, *tail])
    return names


def imports_of(path: Path, name: str, known: set[str]) -> set[str]:
    """The product modules `path` (module `name`) imports, anywhere in it."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            for a in node.names:
                if f"{source}.{a.name}" in known:  # a submodule: `from ifsweep import metrics`
                    out.add(f"{source}.{a.name}")
                elif source in known:
                    out.add(source)
    out.discard(name)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def own_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """A function's lines, less those of the functions and classes defined inside it."""
    assert node.end_lineno is not None
    lines = node.end_lineno - node.lineno + 1
    inner = [
        c
        for c in ast.walk(node)
        if c is not node and isinstance(c, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    ]
    for c in inner:
        assert c.end_lineno is not None
        if not any(
            o is not c and o.lineno <= c.lineno and c.end_lineno <= (o.end_lineno or 0) for o in inner
        ):
            lines -= c.end_lineno - c.lineno + 1
    return lines


def test_the_documented_rooms_are_the_package_folders() -> None:
    rooms, folders = documented_rooms(), package_folders()
    assert len(rooms) == len(set(rooms)), "a room is listed twice"
    assert sorted(set(folders) - set(rooms)) == [], "package folders docs/ARCHITECTURE.md does not list"
    assert sorted(set(rooms) - set(folders)) == [], "rooms docs/ARCHITECTURE.md lists that are not there"


def test_every_package_folder_is_a_package_of_the_install() -> None:
    """pyproject.toml lists the packages a wheel holds: a folder it leaves out imports in an editable
    checkout and is missing from `pip install .` (as metrics/sampling/ once was)."""
    tool = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    dirs: dict[str, str] = tool["package-dir"]
    installed = set()
    for pkg in tool["packages"]:
        top = max((p for p in dirs if pkg == p or pkg.startswith(p + ".")), key=len)
        installed.add("/".join([dirs[top], *pkg[len(top) :].split(".")[1:]]))
    assert sorted(set(package_folders()) - installed) == [], "package folders pyproject.toml does not install"
    assert sorted(installed - set(package_folders())) == [], "packages pyproject.toml lists that are gone"


# A line a merge left unresolved: seven of one marker character at the start of the line.
CONFLICT_RE = re.compile(r"^(?:<{7}|={7}|>{7})(?: |$)", re.MULTILINE)
TEXT_SUFFIXES = {
    ".py",
    ".md",
    ".toml",
    ".txt",
    ".html",
    ".css",
    ".js",
    ".json",
    ".sh",
    ".cfg",
    ".yml",
    ".yaml",
}


def test_no_file_holds_a_merge_left_unresolved() -> None:
    """A conflict resolved by hand once left its markers in docs/ARCHITECTURE.md, under a table the
    rooms test still read; every text file of the project is held to none."""
    roots = [*(REPO / top for top in TOPS), REPO / "docs", REPO / "tests", REPO / "perf", REPO / ".ci"]
    files = [REPO / "README.md", REPO / "pyproject.toml"]
    files += [f for root in roots for f in root.rglob("*") if f.is_file() and f.suffix in TEXT_SUFFIXES]
    marked = [
        f"{f.relative_to(REPO)}:{text.count(chr(10), 0, m.start()) + 1}"
        for f in files
        if (m := CONFLICT_RE.search(text := f.read_text(encoding="utf-8", errors="replace")))
    ]
    assert marked == [], f"merge conflict markers left in: {marked}"


def test_no_folder_holds_more_than_15_modules() -> None:
    crowded = {
        folder: n
        for folder in package_folders()
        if (n := len(list((REPO / folder).glob("*.py")))) > MAX_MODULES
    }
    assert crowded == {}


def test_no_function_is_over_60_lines() -> None:
    long = []
    for path in product_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and own_lines(node) > MAX_LINES:
                long.append(f"{path.relative_to(REPO)}:{node.lineno} {node.name} ({own_lines(node)} lines)")
    assert long == []


def test_no_import_cycle() -> None:
    names = module_names()
    known = set(names.values())
    graph = {name: imports_of(path, name, known) for path, name in names.items()}
    assert cycles(graph) == []


def test_the_checks_see_what_they_look_for(tmp_path: Path) -> None:
    """The readers on small cases: a cycle through a function-level import, a nested function counted
    apart, a relative import."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    src = tmp_path / "m.py"
    src.write_text(
        "def outer():\n    from .sibling import x\n    def inner():\n        return 1\n    return inner\n"
    )
    (func,) = [n for n in ast.parse(src.read_text()).body if isinstance(n, ast.FunctionDef)]
    assert own_lines(func) == 3
    assert imports_of(src, "pkg.m", {"pkg.sibling", "pkg.m"}) == {"pkg.sibling"}
