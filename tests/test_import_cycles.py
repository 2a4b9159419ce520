"""No import circles in the project: the modules of ``routing``, ``audit`` and ``gomodel_site`` form a one-way graph.

A circle works until someone imports its modules in another order (a worker, a management command, a test
alone), then fails with a half-initialised module; a lazy import inside a function only hides it. What counts:

- Every module under the three packages is a node (package ``__init__`` modules and migrations included).
- Every ``import`` and ``from ... import`` statement is an edge, wherever it sits: at module level, inside a
  function or method, under ``try``. Only the body of ``if TYPE_CHECKING:`` is left out: it never runs, and a
  type named only for the checker (a connection and the pool that owns it) is not an import.
- ``import a.b.c`` and ``from a.b import c`` (c a submodule) are edges to ``a.b.c``; ``from a.b import name``
  (name defined in ``a/b/__init__.py``) is an edge to ``a.b``. So an ``__init__`` that re-exports ``a.b.x``
  has an edge from the package to ``x``, and ``from a.b import name`` inside ``a.b.x`` closes a circle.
- Importing ``a.b.c`` runs ``a/__init__`` and ``a/b/__init__`` first: edges to those packages too, except to
  the importer's own packages, which Python has already started before the importer (a module importing a
  sibling through its full dotted name adds no edge to its package).
- Imports by string (``importlib``, Django's ``INSTALLED_APPS`` and ``include()``, Celery's autodiscovery)
  and imports of modules outside the project are not edges.

The test fails on any circle. ``KNOWN_KNOTS`` is where a knot that cannot be untied at once would be listed (so
that it can only shrink); it is empty.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("routing", "audit", "gomodel_site")


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    where: str  # path:line of the import statement


def modules_under(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Every module of ``packages`` under ``root``, by dotted name."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _statements(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of a module, in functions too, except those only the type checker sees."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                yield from _statements(ast.Module(body=[other], type_ignores=[]))
            continue
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        yield from _statements(child)


def _named(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: dict[str, Path]) -> list[str]:
    """The project modules one statement names (before the packages their import runs first)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            parent = module.split(".")
            parent = parent[: len(parent) - node.level + (1 if is_package else 0)]
            base = ".".join(parent + ([base] if base else []))
        names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
    targets = []
    for name in names:
        # ``import a.b.attr`` is not valid Python, but ``import a.b`` of a package is: keep the longest module.
        while name and name not in known:
            name = name.rpartition(".")[0]
        if name and name not in targets:
            targets.append(name)
    return targets


def _packages_of(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def import_edges(root: Path, packages: tuple[str, ...] = PROJECT) -> list[Edge]:
    known = modules_under(root, packages)
    edges = []
    for module, path in known.items():
        own = set(_packages_of(module)) | {module}
        shown = str(path.relative_to(root))
        for node in _statements(ast.parse(path.read_text(), filename=str(path))):
            for target in _named(node, module, path.name == "__init__.py", known):
                for step in [*_packages_of(target), target]:
                    if step in known and (step == target or step not in own):
                        edges.append(Edge(module, step, f"{shown}:{node.lineno}"))
    return edges


def _components(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The strongly connected components of ``graph`` (Tarjan, iterative: the project's chains are deep)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
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
                found.append(sorted(component))
    return found


def _one_circle(graph: dict[str, dict[str, str]], members: list[str]) -> list[str]:
    """A shortest circle through the first member, each step with the import that makes it."""
    inside = set(members)
    start = members[0]
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child not in inside or child in came_from:
                    continue
                came_from[child] = node
                if child == start:
                    following = []
                    break
                following.append(child)
            if start in came_from:
                break
        frontier = following
    path = [start]
    while len(path) == 1 or path[-1] != start:
        path.append(came_from[path[-1]])
    path.reverse()
    return [f"{a} -> {b} ({graph[a][b]})" for a, b in zip(path, path[1:], strict=False)]


def _graph(root: Path, packages: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """Each module's imports: target module -> where the first statement importing it sits."""
    graph: dict[str, dict[str, str]] = {module: {} for module in modules_under(root, packages)}
    for edge in import_edges(root, packages):
        graph[edge.source].setdefault(edge.target, edge.where)
    return graph


def _knots(graph: dict[str, dict[str, str]]) -> list[list[str]]:
    """The modules of each knot: two or more modules that reach each other, or one that imports itself."""
    return sorted(members for members in _components(graph) if len(members) > 1 or members[0] in graph[members[0]])


def import_circles(root: Path, packages: tuple[str, ...] = PROJECT) -> list[list[str]]:
    """One circle per knot, each a list of ``a -> b (path:line)`` steps."""
    graph = _graph(root, packages)
    return [_one_circle(graph, members) for members in _knots(graph)]


# The knots the project still has, listed so that they can only shrink: the test fails when another module joins
# one, when a new circle appears anywhere, and when a listed one is gone (then delete the entry). None is left.
KNOWN_KNOTS: list[list[str]] = []


def test_it_finds_no_import_circle_in_the_project() -> None:
    graph = _graph(ROOT, PROJECT)
    found = _knots(graph)
    assert [_one_circle(graph, members) for members in found if members not in KNOWN_KNOTS] == []
    assert found == KNOWN_KNOTS


def test_it_sees_every_module_and_imports_inside_functions() -> None:
    edges = {(e.source, e.target) for e in import_edges(ROOT)}
    # A lazy import in a function (the publisher reaches its Celery app only when a broker is configured).
    assert ("audit.delivery.publisher", "gomodel_site.celery") in edges
    # A package's re-export is an edge from the package to the module.
    assert ("routing.providers", "routing.providers.base") in edges


def _project(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_it_catches_a_circle_closed_inside_a_function(tmp_path: Path) -> None:
    root = _project(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import helper\n",
        "pkg/b.py": "def helper():\n    from pkg import a\n    return a\n",
    })
    assert import_circles(root, ("pkg",)) == [["pkg.a -> pkg.b (pkg/a.py:1)", "pkg.b -> pkg.a (pkg/b.py:2)"]]


def test_it_counts_a_package_re_export_as_an_edge(tmp_path: Path) -> None:
    root = _project(tmp_path, {
        "pkg/__init__.py": "from .a import name\n",
        "pkg/a.py": "name = 1\n\ndef f():\n    from pkg import name as again\n    return again\n",
    })
    assert import_circles(root, ("pkg",)) == [["pkg -> pkg.a (pkg/__init__.py:1)", "pkg.a -> pkg (pkg/a.py:4)"]]


def test_it_counts_the_package_an_outside_import_runs_first(tmp_path: Path) -> None:
    root = _project(tmp_path, {
        "pkg/__init__.py": "from pkg.a import name\n",
        "pkg/a.py": "from other.m import value as name\n",
        "pkg/b.py": "",
        "other/__init__.py": "",
        "other/m.py": "import pkg.b\nvalue = 1\n",
    })
    assert import_circles(root, ("pkg", "other")) == [[
        "other.m -> pkg (other/m.py:1)", "pkg -> pkg.a (pkg/__init__.py:1)", "pkg.a -> other.m (pkg/a.py:1)"]]


def test_it_accepts_siblings_under_a_re_exporting_package_and_type_only_imports(tmp_path: Path) -> None:
    root = _project(tmp_path, {
        "pkg/__init__.py": "from pkg.a import name\n",
        "pkg/a.py": "from pkg.b import name\n",
        "pkg/b.py": ("from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from pkg.a import name as seen\n\n"
                     "name = 1\n"),
    })
    assert import_circles(root, ("pkg",)) == []
