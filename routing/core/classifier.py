"""Features -> TierVerdict: the deterministic easy/hard decision of smart tier routing.

A request that explicitly asks for reasoning goes straight to hard. Otherwise its points are summed and a
score at or above the threshold (4 by default) selects hard:

======================================================  =========================================
signal                                                  points
======================================================  =========================================
``keywords``: an effort keyword in the latest user msg  +4
``code``: a fenced code block, diff or stack trace      +3
``tools``: tools declared                               +2, and +2 more at 5 tools or more
``structured_output``: a JSON schema / JSON mode        +2
``attachments``: images, audio or files                 +2
``context``: counted characters                         +1 at 2,000, +2 more at 8,000, +3 more at 32,000
``depth``: 7 conversation turns or more                 +1
======================================================  =========================================

Keywords are matched on the case-folded text (``str.casefold``, so "STEP BY STEP" and "Schritt für
Schritt" match whatever their case). A keyword matches as whole words where its edge is a letter or digit
of a script that separates words with spaces, and as a plain substring where the edge is a character of a
script without spaces (Chinese, Japanese, Korean, Thai) or where the keyword starts or ends with ``*``.
Spaces and hyphens inside a keyword match any run of spaces and hyphens ("step by step" = "step-by-step").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Literal

from routing.core.features import Features

Tier = Literal["easy", "hard"]

DEFAULT_THRESHOLD = 4
KEYWORD_POINTS = 4
CODE_POINTS = 3
TOOLS_POINTS = 2
MANY_TOOLS_AT = 5
MANY_TOOLS_POINTS = 2
STRUCTURED_OUTPUT_POINTS = 2
ATTACHMENT_POINTS = 2
CONTEXT_STEPS = ((2_000, 1), (8_000, 2), (32_000, 3))  # (counted characters, points added at that size)
DEPTH_AT = 7
DEPTH_POINTS = 1

DEFAULT_KEYWORDS: tuple[str, ...] = (
    # English
    "think hard", "think harder", "think deeply", "think carefully", "think it through", "think through",
    "ultrathink", "step by step", "root cause*", "prove", "proof", "analyze in depth", "analyse in depth",
    "in-depth analysis", "analyze thoroughly", "analyse thoroughly", "deep dive", "reason carefully",
    "reason through", "chain of thought", "first principles", "rigorous*",
    # German
    "Schritt für Schritt", "Schritt fuer Schritt", "schrittweise", "gründlich nachdenken",
    "gruendlich nachdenken", "denk gründlich nach", "denke gründlich nach", "genau nachdenken",
    "sorgfältig nachdenken", "gründlich analysieren", "eingehend analysieren", "tiefgehend analysieren",
    "detailliert analysieren", "Grundursache*", "*Ursachenanalyse*", "beweise", "beweisen",
    # Chinese (simplified and traditional)
    "一步一步", "一步步", "逐步", "根本原因", "根因", "仔细思考", "仔細思考", "认真思考", "認真思考",
    "深度思考", "深入思考", "深入分析", "彻底分析", "徹底分析", "好好想想", "仔细想想", "仔細想想",
    # Japanese
    "ステップバイステップ", "段階的に", "じっくり考え", "よく考えて",
)  # fmt: skip

_SEPARATOR = r"[\s\-\u2010\u2011]+"
_SPLIT_SEPARATORS = re.compile(_SEPARATOR)


@dataclass(frozen=True, slots=True)
class Signal:
    """One reason for the verdict: the signal's name, the points it added and what triggered it."""

    name: str
    points: int
    detail: str


@dataclass(frozen=True, slots=True)
class TierVerdict:
    """The tier a request deserves, its score and every signal that contributed."""

    tier: Tier
    score: int
    signals: tuple[Signal, ...]
    reasoning_shortcut: bool  # the request asked for reasoning, so it is hard whatever its score


def classify(
    features: Features, *, threshold: int = DEFAULT_THRESHOLD, keywords: Sequence[str] | None = None
) -> TierVerdict:
    """The verdict for one request; ``keywords`` None or empty means ``DEFAULT_KEYWORDS``."""
    matcher = keyword_matcher(tuple(keywords)) if keywords else _default_matcher()
    signals: list[Signal] = []
    if features.reasoning:
        signals.append(Signal("reasoning", 0, features.reasoning))
    keyword = matcher.first_match_folded(features.folded_user_text) if features.latest_user_text else None
    if keyword is not None:
        signals.append(Signal("keywords", KEYWORD_POINTS, keyword))
    if features.code_evidence:
        signals.append(Signal("code", CODE_POINTS, features.code_evidence))
    tool_count = len(features.tools)
    if tool_count:
        points = TOOLS_POINTS + (MANY_TOOLS_POINTS if tool_count >= MANY_TOOLS_AT else 0)
        signals.append(Signal("tools", points, f"{tool_count} tool{'s' if tool_count != 1 else ''}"))
    if features.structured_output:
        signals.append(Signal("structured_output", STRUCTURED_OUTPUT_POINTS, features.structured_output))
    if features.attachments:
        signals.append(Signal("attachments", ATTACHMENT_POINTS, _count_kinds(features.attachments)))
    context_points = 0
    for size, points in CONTEXT_STEPS:
        if features.total_chars >= size:
            context_points += points
    if context_points:
        signals.append(Signal("context", context_points, f"{features.total_chars} characters"))
    if features.message_count >= DEPTH_AT:
        signals.append(Signal("depth", DEPTH_POINTS, f"{features.message_count} turns"))
    if not signals:  # most requests: building a frozen dataclass would cost ~0.6 us
        return _NO_SIGNALS_HARD if threshold <= 0 else _NO_SIGNALS_EASY
    score = 0
    for signal in signals:
        score += signal.points
    shortcut = bool(features.reasoning)
    tier: Tier = "hard" if shortcut or score >= threshold else "easy"
    return TierVerdict(tier=tier, score=score, signals=tuple(signals), reasoning_shortcut=shortcut)


# The verdicts of a request without any signal, shared: they are immutable.
_NO_SIGNALS_EASY = TierVerdict(tier="easy", score=0, signals=(), reasoning_shortcut=False)
_NO_SIGNALS_HARD = TierVerdict(tier="hard", score=0, signals=(), reasoning_shortcut=False)  # at a threshold <= 0


def _count_kinds(kinds: tuple[str, ...]) -> str:
    counts: dict[str, int] = {}
    for kind in kinds:
        counts[kind] = counts.get(kind, 0) + 1
    return ", ".join(f"{count} {kind}{'s' if count != 1 else ''}" for kind, count in counts.items())


# (index in the configured list: the earliest match is reported, the keyword as configured, its regex)
_Keyword = tuple[int, str, "re.Pattern[str]"]


class KeywordMatcher:
    """Finds the first configured keyword in a text.

    Why not one big regex: Python's regex engine costs ~50 ns per character for an alternation of dozens of
    keywords, while ``str.__contains__`` scans at ~1 ns per character. Keywords are grouped by an anchor
    literal that every match contains; a group's regexes (each starting with a literal, which the engine
    also scans quickly) run only when its anchor occurs, and groups with non-ASCII anchors are skipped
    outright for ASCII text.
    """

    def __init__(self, keywords: Sequence[str]) -> None:
        self.keywords = tuple(keywords)
        compiled = [kw for kw in (compile_keyword(i, text) for i, text in enumerate(self.keywords)) if kw]
        chunks = {kw[1]: _chunks(kw[1]) for kw in compiled}
        candidates = {chunk for parts in chunks.values() for chunk in parts}
        # An anchor shared by many keywords means fewer scans, but a very short one ("in") occurs in almost
        # any text and then runs its regexes for nothing: prefer anchors of 4+ characters, then the one
        # found inside the most keywords, then the longer one.
        reach = {c: sum(any(c in part for part in parts) for parts in chunks.values()) for c in candidates}
        groups: dict[str, list[_Keyword]] = {}
        for kw in compiled:
            usable = [c for c in candidates if any(c in part for part in chunks[kw[1]])]
            anchor = max(usable, key=lambda c: (len(c) >= 4, reach[c], len(c), c))
            groups.setdefault(anchor, []).append(kw)
        self._groups = tuple((anchor, tuple(members)) for anchor, members in groups.items())
        self._ascii_groups = tuple(group for group in self._groups if group[0].isascii())

    def first_match(self, text: str) -> str | None:
        """The earliest keyword of the configured list found in ``text`` (case-folded here), or None."""
        return self.first_match_folded(text.casefold())

    def first_match_folded(self, folded: str) -> str | None:
        """``first_match`` for a text already case-folded (the category classifier shares the fold)."""
        best_index, best = len(self.keywords), None
        for anchor, members in self._ascii_groups if folded.isascii() else self._groups:
            if anchor in folded:
                for index, keyword, pattern in members:
                    if index >= best_index:
                        break
                    if pattern.search(folded):
                        best_index, best = index, keyword
                        break
        return best


@lru_cache(maxsize=16)
def keyword_matcher(keywords: tuple[str, ...]) -> KeywordMatcher:
    """The compiled matcher for a keyword list, built once per distinct list."""
    return KeywordMatcher(keywords)


@lru_cache(maxsize=1)
def _default_matcher() -> KeywordMatcher:
    return keyword_matcher(DEFAULT_KEYWORDS)  # without hashing the 60-keyword tuple on every request


def _chunks(keyword: str) -> list[str]:
    return [chunk for chunk in _SPLIT_SEPARATORS.split(keyword.strip().strip("*").casefold()) if chunk]


def compile_keyword(index: int, text: str) -> _Keyword | None:
    """The keyword's regex, written to start with a literal so that the engine scans for it quickly."""
    raw = text.strip()
    chunks = _chunks(raw)
    if not chunks:
        return None
    first = re.escape(chunks[0])
    pattern = first
    if not raw.startswith("*") and separates_words(chunks[0][0]):
        # "not preceded by a word character", placed after the literal to keep the fast literal scan.
        pattern += rf"(?<!\w{first})"
    pattern += "".join(_SEPARATOR + re.escape(chunk) for chunk in chunks[1:])
    if not raw.endswith("*") and separates_words(chunks[-1][-1]):
        pattern += r"(?!\w)"
    return (index, raw, re.compile(pattern))


# Scripts written without spaces between words: a keyword edge in one of them is matched as a substring.
_UNSPACED_SCRIPTS = ("CJK", "HIRAGANA", "KATAKANA", "HANGUL", "THAI", "LAO", "KHMER", "MYANMAR", "TIBETAN")


def separates_words(char: str) -> bool:
    """True for a letter or digit of a script that puts spaces between words (Latin, Cyrillic, Greek...)."""
    if not (char.isalnum() or char == "_"):
        return False
    name = unicodedata.name(char, "")
    return not any(name.startswith(script) for script in _UNSPACED_SCRIPTS)
