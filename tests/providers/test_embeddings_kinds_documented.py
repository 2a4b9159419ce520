"""The README's configuration reference names exactly the provider kinds the gateway sends embeddings to."""

from __future__ import annotations

import re
from pathlib import Path

from routing.core.table import PROVIDER_KINDS
from routing.providers.embeddings import serves_embeddings

README = Path(__file__).resolve().parents[2] / "README.md"


def documented_kinds() -> set[str]:
    line = next(line for line in README.read_text().splitlines()
                if "its provider kind must have an embeddings endpoint" in line)
    listed = line.split("its provider kind must have an embeddings endpoint", 1)[1].split(")", 1)[0]
    return set(re.findall(r"`([a-z_]+)`", listed))


def test_the_readme_lists_every_kind_with_embeddings_and_no_other() -> None:
    assert documented_kinds() == {kind for kind in PROVIDER_KINDS if serves_embeddings(kind)}
