"""The layer rules of the code base (README, "Code layout"), checked on every run.

Each package may import only what its row allows; the request path (gateway, api, clients) imports nothing
inside a function, where an import usually hides a cycle; the pure core does no I/O. The apps sit below the
project: ``gomodel_site`` names them (settings, URLs, the ASGI handler), so they never import it back, except
audit's publisher reaching the project's Celery app. Circles between any two modules: test_import_cycles.py.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

IO_FRAMEWORKS = ("django", "rest_framework", "httpx", "httpx2", "prometheus_client", "celery", "kombu", "redis",
                 "psycopg", "jsonschema", "yaml", "httptools", "aiohttp", "yarl", "uvloop", "granian")
IO_STDLIB = ("socket", "ssl", "asyncio", "subprocess", "urllib", "http", "os", "pathlib", "io", "shutil", "tempfile",
             "logging", "time")
IO_CALLS = ("open", "print", "input")


@dataclass(frozen=True)
class Rule:
    package: str  # dotted package the rule governs
    forbidden: tuple[str, ...]  # module prefixes it may not import
    allowed_project: tuple[str, ...] | None = None  # when set, the only project modules it may import
    no_function_imports: bool = False
    exempt: tuple[str, ...] = ()  # module prefixes the forbidden list does not cover


RULES = (
    Rule("routing.core", IO_FRAMEWORKS + IO_STDLIB + ("audit",), allowed_project=("routing.core",)),
    Rule("routing.providers", IO_FRAMEWORKS + ("audit",), allowed_project=("routing.core", "routing.providers")),
    Rule("routing.simulator", ("audit",), allowed_project=("routing.simulator",)),
    Rule("routing.schema", ("django", "audit"), allowed_project=("routing.schema",)),
    # The config models sit below the request path: they may use the core, the schema engine and the config.
    Rule("routing.models", ("routing.gateway", "routing.api", "routing.clients", "routing.ops")),
    Rule("routing.clients", ("routing.gateway", "routing.api", "routing.config", "routing.ops", "audit"),
         no_function_imports=True),
    Rule("routing.config", ("routing.gateway", "routing.api")),
    Rule("routing.ops", ("routing.gateway", "routing.api")),
    # The gateway reaches the database only through the stores in routing.clients.
    Rule("routing.gateway", ("routing.api", "django.db", "routing.models"), no_function_imports=True),
    Rule("routing.api", (), no_function_imports=True),
    Rule("audit", ("routing", "gomodel_site"), exempt=("gomodel_site.celery",)),
    # Settings are read through django.conf.settings; the project package is never imported by its apps.
    Rule("routing", ("gomodel_site",)),
)


@dataclass(frozen=True)
class Import:
    path: str
    line: int
    module: str
    in_function: bool


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """Every module an ``from X import a, b`` may name: X itself and X.a, X.b (a may be a submodule)."""
    base = node.module or ""
    if node.level:
        parent = module.split(".")
        parent = parent[: len(parent) - node.level + (1 if is_package else 0)]
        base = ".".join(parent + ([base] if base else []))
    return [base] + [f"{base}.{alias.name}" for alias in node.names]


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def imports_of(path: Path, module: str | None = None) -> Iterator[Import]:
    module = module or _module_name(path)
    tree = ast.parse(path.read_text(), filename=str(path))

    def visit(node: ast.AST, in_function: bool) -> Iterator[Import]:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            if isinstance(child, ast.Import):
                for alias in child.names:
                    yield Import(_shown(path), child.lineno, alias.name, in_function)
            elif isinstance(child, ast.ImportFrom):
                for name in _resolve(child, module, path.name == "__init__.py"):
                    yield Import(_shown(path), child.lineno, name, in_function)
            yield from visit(child, inner)

    yield from visit(tree, False)


def _matches(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _is_project(module: str) -> bool:
    return _matches(module, ("routing", "audit", "gomodel_site"))


def violations(rule: Rule, files: list[Path], module: str | None = None) -> list[str]:
    """One line per offending import statement, naming the first module it may not import."""
    found = []
    for path in files:
        seen_lines: set[int] = set()
        for imp in imports_of(path, module):
            problem = None
            if _matches(imp.module, rule.forbidden) and not _matches(imp.module, rule.exempt):
                problem = f"imports {imp.module}"
            elif (rule.allowed_project is not None and _is_project(imp.module)
                  and not _matches(imp.module, rule.allowed_project)):
                problem = f"imports {imp.module}, outside {', '.join(rule.allowed_project)}"
            elif rule.no_function_imports and imp.in_function and _is_project(imp.module):
                problem = f"imports {imp.module} inside a function"
            if problem and imp.line not in seen_lines:
                seen_lines.add(imp.line)
                found.append(f"{imp.path}:{imp.line} {problem}")
    return found


def files_of(package: str) -> list[Path]:
    folder = ROOT.joinpath(*package.split("."))
    return sorted(p for p in folder.rglob("*.py") if "migrations" not in p.parts)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.package)
def test_it_keeps_each_package_to_its_layer(rule: Rule) -> None:
    assert violations(rule, files_of(rule.package)) == []


def test_it_keeps_routing_core_free_of_io_calls() -> None:
    offenders = []
    for path in files_of("routing.core"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in IO_CALLS:
                offenders.append(f"{path.name}:{node.lineno} calls {node.func.id}()")
    assert offenders == []


def test_the_layer_check_catches_a_violation(tmp_path: Path) -> None:
    """The checker itself: a gateway module that imports the api, the database and a late import fails."""
    probe = tmp_path / "probe.py"
    probe.write_text("from routing.api import views\nfrom django.db import connection\n\n"
                     "def f():\n    from routing.gateway import engine\n")
    rule = next(r for r in RULES if r.package == "routing.gateway")
    assert violations(rule, [probe], module="routing.gateway.probe") == [
        "probe.py:1 imports routing.api",
        "probe.py:2 imports django.db",
        "probe.py:5 imports routing.gateway inside a function",
    ]


def test_the_core_rule_catches_a_project_import_and_io(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from routing.gateway.records import Call\nimport socket\nfrom .table import RoutingTable\n")
    rule = next(r for r in RULES if r.package == "routing.core")
    assert violations(rule, [probe], module="routing.core.probe") == [
        "probe.py:1 imports routing.gateway.records, outside routing.core",
        "probe.py:2 imports socket",
    ]


def test_the_project_rule_catches_an_app_importing_the_project(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("from gomodel_site.settings import provider_secret\n\n"
                     "def f():\n    from gomodel_site.celery import app\n")
    routing_rule = next(r for r in RULES if r.package == "routing")
    audit_rule = next(r for r in RULES if r.package == "audit")
    assert violations(routing_rule, [probe], module="routing.config.probe") == [
        "probe.py:1 imports gomodel_site.settings",
        "probe.py:4 imports gomodel_site.celery",
    ]
    assert violations(audit_rule, [probe], module="audit.probe") == ["probe.py:1 imports gomodel_site.settings"]
