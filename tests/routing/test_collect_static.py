"""The demo collects static files once, and again only when a source file changed or the result is gone."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from routing.management.collect_static import collect_static_when_changed


@pytest.fixture
def sources(tmp_path: Path, settings: Any) -> Path:
    """One source folder as the only finder, collected by the production storage into a folder of the test."""
    source = tmp_path / "source"
    (source / "site").mkdir(parents=True)
    (source / "site" / "look.css").write_text("body { color: #123456; }\n" * 100)
    settings.STATICFILES_DIRS = [str(source)]
    settings.STATICFILES_FINDERS = ["django.contrib.staticfiles.finders.FileSystemFinder"]
    settings.STATIC_ROOT = str(tmp_path / "collected")
    settings.STORAGES = {**settings.STORAGES,
                         "staticfiles": {"BACKEND": "servestatic.storage.CompressedManifestStaticFilesStorage"}}
    return source


def hashed_name(settings: Any, name: str) -> str:
    manifest = json.loads((Path(settings.STATIC_ROOT) / "staticfiles.json").read_text())
    return str(manifest["paths"][name])


def test_it_collects_hashed_and_compressed_files_on_the_first_run(sources: Path, settings: Any) -> None:
    assert collect_static_when_changed() is True
    hashed = Path(settings.STATIC_ROOT) / hashed_name(settings, "site/look.css")
    assert hashed.name != "look.css"
    assert hashed.is_file()
    assert hashed.with_name(hashed.name + ".gz").is_file()
    assert hashed.with_name(hashed.name + ".br").is_file()


def test_it_skips_collecting_when_nothing_changed(sources: Path, settings: Any) -> None:
    assert collect_static_when_changed() is True
    assert collect_static_when_changed() is False


def test_it_collects_again_when_a_source_file_changes(sources: Path, settings: Any) -> None:
    collect_static_when_changed()
    before = hashed_name(settings, "site/look.css")
    look = sources / "site" / "look.css"
    look.write_text("body { color: #654321; }\n")
    stat = look.stat()
    os.utime(look, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # a distinct time on any filesystem
    assert collect_static_when_changed() is True
    assert hashed_name(settings, "site/look.css") != before


def test_it_collects_again_when_a_source_file_is_added(sources: Path, settings: Any) -> None:
    collect_static_when_changed()
    (sources / "site" / "extra.js").write_text("console.log('hi');\n")
    assert collect_static_when_changed() is True
    assert hashed_name(settings, "site/extra.js").startswith("site/extra.")


def test_it_collects_again_when_the_collected_files_are_gone(sources: Path, settings: Any) -> None:
    collect_static_when_changed()
    shutil.rmtree(settings.STATIC_ROOT)
    assert collect_static_when_changed() is True
    assert (Path(settings.STATIC_ROOT) / hashed_name(settings, "site/look.css")).is_file()
