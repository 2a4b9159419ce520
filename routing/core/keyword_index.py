"""WordIndexMatcher: a long keyword list matched by looking the text's words up, not by searching for each keyword.

Same rules and the same answer as ``routing.core.classifier.KeywordMatcher`` (the earliest keyword of the
list that occurs, matched on the case-folded text; whole words where a keyword's edge is a letter or digit of
a script that separates words with spaces; ``*`` marks a stem), built for lists of a few hundred keywords,
where a substring search per keyword (~50 ns each on a chat message) would cost more than the whole request's
classification. Here the text is split into its words once, and:

* a keyword of one word is a set lookup;
* a stem (``debug*``) is looked up by its first four characters against the first four of every word;
* a phrase (``pros and cons``) is looked up by its first word, then confirmed with its regex;
* anything else (``c++``, ``*$$*``, Chinese keywords) is a plain substring search, confirmed with its regex;
  those with non-ASCII characters are skipped for an ASCII text.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from operator import itemgetter

from routing.core.classifier import compile_keyword, separates_words

_WORD = re.compile(r"\w+")
_STEM_KEY = 4  # stems are indexed by their first four bytes; a shorter stem is searched for as a substring
_STEM_PREFIX = itemgetter(slice(0, _STEM_KEY))  # a word's first four bytes, without a Python-level loop
# Bytes that end a word in an ASCII text: everything but [A-Za-z0-9_] (``\w`` in ASCII) and the bytes of
# non-ASCII characters, whose words are split again with the regex (see ``_words_of``).
_ASCII_BREAKS = bytes(i if chr(i).isascii() and (chr(i).isalnum() or i == 0x5F) or i >= 0x80 else 0x20
                      for i in range(256))

# (index in the list, keyword as configured, its regex)
_Entry = tuple[int, str, "re.Pattern[str]"]


def _words_of(folded: str, encoded: bytes) -> set[bytes]:
    r"""The distinct words (``\w+`` runs) of ``folded`` (``encoded`` is its UTF-8), UTF-8 encoded.

    Why bytes: ``re.findall(r"\w+")`` costs ~40 ns per character, while translating the encoded text's
    separators to spaces and splitting costs ~5; only a word holding non-ASCII characters (which may hide
    non-ASCII punctuation, or be Chinese text without spaces) is split again with the regex.
    """
    words = set(encoded.translate(_ASCII_BREAKS).split())
    if folded.isascii():
        return words
    for word in [w for w in words if not w.isascii()]:
        text = word.decode()
        if not text.isalnum():  # "möchte" is one word as it is; "„unterwegs“" or "你好，世界" are not
            words.discard(word)
            words.update(part.encode() for part in _WORD.findall(text))
    return words


class WordIndexMatcher:
    """Finds the earliest keyword of a list in a case-folded text (see the module docstring)."""

    __slots__ = ("keywords", "_words", "_stems", "_phrases", "_ascii_plain", "_other_plain", "_below_other")
    _other_plain: dict[str, tuple[tuple[str, _Entry], ...]]

    def __init__(self, keywords: Sequence[str]) -> None:
        self.keywords = tuple(keywords)
        self._words: dict[bytes, _Entry] = {}
        self._stems: dict[bytes, list[tuple[bytes, _Entry]]] = {}
        self._phrases: dict[bytes, list[_Entry]] = {}
        plain: list[tuple[str, str, _Entry]] = []
        for index, text in enumerate(self.keywords):
            entry = compile_keyword(index, text)
            if entry is None:
                continue
            raw = text.strip()
            body = raw.strip("*").casefold()
            words = _WORD.findall(body)
            whole = bool(words) and "".join(words) == "".join(body.split()).replace("-", "")
            starts_word = not raw.startswith("*") and separates_words(body[0])
            ends_word = separates_words(body[-1])
            key = body.encode()
            if whole and starts_word and len(words) == 1 and ends_word and not raw.endswith("*"):
                self._words.setdefault(key, entry)
            elif whole and starts_word and len(words) == 1 and len(key) >= _STEM_KEY:
                self._stems.setdefault(key[:_STEM_KEY], []).append((key, entry))
            elif whole and starts_word and len(words) > 1:
                self._phrases.setdefault(words[0].encode(), []).append(entry)
            else:
                plain.append((self._sentinel(body), body, entry))
        self._ascii_plain = tuple(item for item in plain if item[1].isascii())
        # The others (mostly Chinese) by their first character: only those whose first character is in the
        # text are searched for, found through the set of the text's characters.
        other: dict[str, list[tuple[str, _Entry]]] = {}
        for _sentinel, body, entry in plain:
            if not body.isascii():
                other.setdefault(body[0], []).append((body, entry))
        self._other_plain = {first: tuple(items) for first, items in other.items()}
        # A text without a UTF-8 lead byte as high as the lowest such first character's (German, French...)
        # skips them: deleting every lower byte is one C call, where max() over the text is a Python loop.
        lowest = min(other, default="\U0010ffff").encode()[0]
        self._below_other = bytes(range(lowest))

    @staticmethod
    def _sentinel(body: str) -> str:
        """A character the text must contain for ``body`` to occur: one rarer than a letter where there is one.

        Why: a one-character ``in`` is a memchr (~30 ns on a chat message), a substring search ~150 ns."""
        for char in body:
            if not char.isalnum():
                return char
        return body

    def first_match_folded(self, folded: str) -> str | None:
        """The earliest keyword of the list found in ``folded`` (already case-folded), or None."""
        encoded = folded.encode()
        words = _words_of(folded, encoded)
        found: list[_Entry] = [self._words[word] for word in words.intersection(self._words)]
        stems = self._stems
        for key in set(map(_STEM_PREFIX, words)).intersection(stems):
            found.extend(entry for stem, entry in stems[key] if any(w.startswith(stem) for w in words))
        for first_word in words.intersection(self._phrases):
            found.extend(entry for entry in self._phrases[first_word] if entry[2].search(folded))
        found.extend(entry for sentinel, body, entry in self._ascii_plain
                     if sentinel in folded and body in folded and entry[2].search(folded))
        if self._other_plain and encoded.translate(None, self._below_other):
            other = self._other_plain
            for char in set(folded).intersection(other):
                found.extend(entry for body, entry in other[char] if body in folded and entry[2].search(folded))
        return min(found)[1] if found else None
