"""The cheap gates in front of the masking patterns answer exactly what their regular expressions would.

``mask_secrets`` runs its token patterns only on text holding a run of ten token characters, and ``preview``
masks numbers only in text holding a digit. Both gates are byte translations now, not regular expressions; a
gate that said no where the expression says yes would let a secret or a number through unmasked.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from audit.delivery.redact import _has_digit, _has_token_run, mask_secrets

TOKEN_RUN = re.compile(r"[A-Za-z0-9_\-+=]{10,}")
DIGIT = re.compile(r"\d")

# Token characters, their neighbours in ASCII, separators, non-ASCII letters and digits (Arabic-Indic three,
# full-width seven), a lone surrogate, and pieces of the secrets the patterns look for.
_PIECES = list("aZ09_-+=./~%@ :\"'\n\t,;é漢٣７\ud800") + ["sk-", "AKIA", "eyJ", "ghp_", "0123456789", "abcdefghi"]
_TEXTS = st.lists(st.sampled_from(_PIECES), max_size=80).map("".join)


@settings(max_examples=2000)
@given(_TEXTS | st.text(max_size=60))
def test_the_token_run_gate_is_the_regular_expression(text: str) -> None:
    assert _has_token_run(text) == (TOKEN_RUN.search(text) is not None)


@settings(max_examples=2000)
@given(_TEXTS | st.text(max_size=60))
def test_the_digit_gate_is_the_regular_expression(text: str) -> None:
    assert _has_digit(text) == (DIGIT.search(text) is not None)


def test_a_token_run_is_found_at_either_end_and_beside_non_ascii_text() -> None:
    assert _has_token_run("sk-abcdef123")  # ten token characters after "sk-"... and the whole is a run
    assert _has_token_run("é" + "a" * 10)
    assert _has_token_run("a" * 10 + "漢")
    assert not _has_token_run("a" * 9 + "é" + "a" * 9)  # a non-ASCII letter breaks a run: it is no token character
    assert not _has_token_run("abc.defgh.ijklm")
    assert _has_digit("٣")  # a Unicode decimal digit is \d too
    assert not _has_digit("one two")


def test_a_key_beside_non_ascii_text_is_still_masked() -> None:
    assert mask_secrets("clé: sk-proj-abcdefghijklmnop1234 漢字") == "clé: [secret] 漢字"
