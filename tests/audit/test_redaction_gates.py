"""The cheap gates in front of the masking patterns answer exactly what their regular expressions would.

``mask_secrets`` runs its token patterns only on text holding a run of ten token characters (the long-token
pattern only on a run of 32), and ``preview`` looks for numbers only in text that holds six digits (or any
digit, when it is not ASCII). The gates are byte translations, not regular expressions; a gate that said no
where the expression would match would let a secret or a number through unmasked.
"""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from audit.delivery.redact import _DIGITS, _may_hold_number, _token_runs, mask_secrets, preview


def _has_token_run(text: str, length: int = 10) -> bool:
    return b"t" * length in _token_runs(text)


TOKEN_RUN = re.compile(r"[A-Za-z0-9_\-+=]{10,}")
LONG_TOKEN_RUN = re.compile(r"[A-Za-z0-9_\-+=]{32,}")

# Token characters, their neighbours in ASCII, separators, non-ASCII letters and digits (Arabic-Indic three,
# full-width seven), a lone surrogate, and pieces of the secrets the patterns look for.
_PIECES = list("aZ09_-+=./~%@ :\"'\n\t,;é漢٣７\ud800") + ["sk-", "AKIA", "eyJ", "ghp_", "0123456789", "abcdefghi"]
_TEXTS = st.lists(st.sampled_from(_PIECES), max_size=80).map("".join)


@settings(max_examples=2000)
@given(_TEXTS | st.text(max_size=60))
def test_the_token_run_gate_is_the_regular_expression(text: str) -> None:
    assert _has_token_run(text) == (TOKEN_RUN.search(text) is not None)
    assert _has_token_run(text, 32) == (LONG_TOKEN_RUN.search(text) is not None)


_NUMBERS = st.lists(st.sampled_from(list("0123456789 -.x٣") + ["12345", "4111 1111", "é"]), max_size=30).map("".join)


@settings(max_examples=3000)
@given(_NUMBERS | _TEXTS | st.text(max_size=60))
def test_the_number_gate_lets_every_number_through(text: str) -> None:
    if _DIGITS.search(text) is not None:
        assert _may_hold_number(text)
    if text.isascii():
        assert _may_hold_number(text) == (sum(c.isdigit() for c in text) >= 6)


def test_a_token_run_is_found_at_either_end_and_beside_non_ascii_text() -> None:
    assert _has_token_run("sk-abcdef123")  # ten token characters after "sk-"... and the whole is a run
    assert _has_token_run("é" + "a" * 10)
    assert _has_token_run("a" * 10 + "漢")
    assert not _has_token_run("a" * 9 + "é" + "a" * 9)  # a non-ASCII letter breaks a run: it is no token character
    assert not _has_token_run("abc.defgh.ijklm")
    assert _may_hold_number("order 4811-2233")
    assert not _may_hold_number("order 4821, answer 1")  # five digits cannot make a number of six
    assert _may_hold_number("order 48213, answer 1")  # six may: the expression decides
    assert _may_hold_number("١٢٣٤٥٦")  # Arabic-Indic digits are \d too
    assert not _may_hold_number("one two")


def test_a_key_beside_non_ascii_text_is_still_masked() -> None:
    assert mask_secrets("clé: sk-proj-abcdefghijklmnop1234 漢字") == "clé: [secret] 漢字"


def test_a_long_token_in_english_text_is_still_masked() -> None:
    token = "Zx9" * 12  # 36 token characters, digits and capitals among them
    text = f"consectetur adipiscing {token} incididunt"
    assert mask_secrets(text) == "consectetur adipiscing [secret] incididunt"
    assert preview("call 4111 1111 1111 1111 today") == "call [digits] today"
