"""The README's "Code layout" table against the tree: every path it names exists, and it names what it must.

The table's first column is a folder (its first backticked path, e.g. `routing/gateway/`); a backticked path in
the second column is relative to that folder unless it starts from the repository root (`routing/`, `audit/`,
`gomodel_site/`). A backticked word looks like a path when it ends with ``/`` or with a file's extension
(``.py``, ``.yaml``, ...), holds no space and does not start with ``/`` (a URL path such as `/static/`). A path
names itself and every folder between it and its row's folder (`background/prober.py` names `background/`).

The rules: every path under `routing/`, `audit/` or `gomodel_site/` exists; every Python package under `routing/`
or `audit/` is named; every module at the top of the request path's folders (below) is named.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHECKED_ROOTS = ("routing", "audit", "gomodel_site")
PACKAGE_ROOTS = ("routing", "audit")
MODULE_FOLDERS = ("routing/gateway", "routing/api", "routing/clients", "routing/config")

_TICKED = re.compile(r"`([^`]+)`")
_FILE = re.compile(r"\.(py|pyi|yaml|yml|toml|json|js|css|html|txt|md)$")  # not a dotted module (`routing.core`)


def table_rows(readme: str) -> list[tuple[str, str]]:
    """The (where, what) cells of the table under "## Code layout", header and rule left out."""
    section = readme.split("\n## Code layout\n", 1)[1].split("\n#", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")] if line.startswith("|") else []
        if len(cells) >= 2 and cells[0] != "where" and not set(cells[0]) <= set("-"):
            rows.append((cells[0], cells[1]))
    return rows


def _path_like(word: str) -> bool:
    return " " not in word and not word.startswith("/") and (word.endswith("/") or bool(_FILE.search(word)))


def named_paths(rows: list[tuple[str, str]]) -> tuple[set[str], set[str]]:
    """The paths the table writes (relative to the root, a folder with a trailing ``/``), and the folders they name
    on the way down from their row's folder."""
    written: set[str] = set()
    folders: set[str] = set()
    for where, what in rows:
        where_words = [w for w in _TICKED.findall(where) if _path_like(w)]
        if not where_words:
            continue
        base = where_words[0]
        written.update(where_words)
        for word in _TICKED.findall(what):
            if not _path_like(word):
                continue
            path = word if word.split("/", 1)[0] in CHECKED_ROOTS and "/" in word else base + word
            written.add(path)
            parts = path.rstrip("/").split("/")
            for end in range(len(base.rstrip("/").split("/")), len(parts)):
                folders.add("/".join(parts[:end]) + "/")
    return written, folders


def missing_paths(written: set[str], root: Path) -> list[str]:
    checked = (p for p in written if p.split("/", 1)[0] in CHECKED_ROOTS)
    return sorted(p for p in checked if not ((root / p).is_dir() if p.endswith("/") else (root / p).is_file()))


def unnamed_packages(named: set[str], root: Path) -> list[str]:
    packages = (init.parent for top in PACKAGE_ROOTS for init in (root / top).rglob("__init__.py"))
    return sorted(p for p in (package.relative_to(root).as_posix() + "/" for package in packages) if p not in named)


def unnamed_modules(written: set[str], root: Path) -> list[str]:
    modules = (m for folder in MODULE_FOLDERS for m in sorted((root / folder).glob("*.py")) if m.name != "__init__.py")
    return [p for p in (m.relative_to(root).as_posix() for m in modules) if p not in written]


def _table() -> tuple[set[str], set[str]]:
    return named_paths(table_rows((ROOT / "README.md").read_text(encoding="utf-8")))


def test_every_path_the_table_names_exists() -> None:
    written, _ = _table()
    assert missing_paths(written, ROOT) == []


def test_every_package_is_in_the_table() -> None:
    written, folders = _table()
    assert unnamed_packages(written | folders, ROOT) == []


def test_every_module_of_the_request_path_folders_is_in_the_table() -> None:
    written, _ = _table()
    assert unnamed_modules(written, ROOT) == []


def test_the_rules_catch_a_wrong_path_an_unnamed_package_and_an_unnamed_module(tmp_path: Path) -> None:
    for name in ("routing/__init__.py", "routing/gateway/__init__.py", "routing/gateway/engine.py",
                 "routing/gateway/extra.py", "routing/gateway/background/__init__.py",
                 "routing/gateway/background/prober.py", "routing/unlisted/__init__.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    readme = ("# x\n\n## Code layout\n\n| where | what lives there | may import |\n|---|---|---|\n"
              "| `routing/gateway/` | `engine.py`, `background/prober.py`, `gone.py`, `RoutingTable`, `/v1/` | x |\n"
              "| `routing/` top level | `models.py`, the `routing.core` rule | anything |\n\n## Next\n")
    written, folders = named_paths(table_rows(readme))
    assert missing_paths(written, tmp_path) == ["routing/gateway/gone.py", "routing/models.py"]
    assert unnamed_packages(written | folders, tmp_path) == ["routing/unlisted/"]
    assert unnamed_modules(written, tmp_path) == ["routing/gateway/extra.py"]
