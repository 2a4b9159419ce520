"""Code and diagnostics in a request's text: the ``code`` signal of the tier classifier.

``code_evidence`` returns what shows code in a text (a fenced block, a diff, a stack trace, ``panic:``, ...)
or "". The text is the join of the conversation's texts that ``routing.core.features`` builds, in which
every line follows a newline.
"""

from __future__ import annotations

import re

# Code and diagnostics. A fenced block (```) and Go's "panic:" count anywhere; every other diagnostic counts
# at the start of a line (after spaces or tabs), where git, compilers and runtimes print it. Why this shape:
# ``_LINE_START`` begins with a newline, which the regex engine finds with a fast scan, and then tests a few
# literals, so the whole text costs about one pass plus a little per line, where a dozen substring searches
# or a general multi-line regex would cost ten times more. A rule's regex runs only on a line that starts
# with its prefix and contains its marker, reads at most ``_MAX_LINE_CHARS`` characters, and has no nested
# quantifiers, so a text of nothing but "at ..." lines stays cheap too.
# (prefix, marker the line must contain, regex the line must match or None, evidence)
_LINE_RULES: tuple[tuple[str, str, re.Pattern[str] | None, str], ...] = (
    ("diff --git ", "", None, "diff --git"),
    ("@@ -", " @@", re.compile(r"@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@"), "unified diff"),
    ("Traceback (most recent call last)", "", None, "Python traceback"),
    ('File "', '", line ', re.compile(r'File "[^"]+", line \d+'), "Python traceback"),
    ("goroutine ", " [", re.compile(r"goroutine \d+ \["), "Go stack trace"),
    ("thread '", "' panicked at ", re.compile(r"thread '[^']*' panicked at "), "Rust panic"),
    ('Exception in thread "', "", None, "Java exception"),
    (
        "at ",
        ")",
        re.compile(r"at [\w$.<>/-]++\((?:[\w$-]++\.(?:java|kt|scala|groovy)(?::\d+)?|Native Method|Unknown Source)\)"),
        "JVM stack trace",
    ),
    (
        "at ",
        ":",
        re.compile(r"at (?:(?:async |new )?[^\s()]++(?: \[as [^\]\s]++\])? \()?[^\s()]+:\d+:\d+\)?"),
        "JavaScript stack trace",
    ),
    ("at ", ":line ", re.compile(r"at [^\s(]++\([^)]*+\) in .+:line \d+"), ".NET stack trace"),
)


_MAX_LINE_CHARS = 2_000  # a real stack frame or hunk header is far shorter
_RULES_BY_PREFIX: dict[str, list[tuple[str, str, re.Pattern[str] | None, str]]] = {}
for _rule in _LINE_RULES:
    _RULES_BY_PREFIX.setdefault(_rule[0], []).append(_rule)
# The prefix is captured, so a candidate line is checked against its own rules only.
_LINE_START = re.compile("\n[ \t]*+(?=(" + "|".join(re.escape(prefix) for prefix in _RULES_BY_PREFIX) + "))")


def code_evidence(text: str) -> str:
    """What shows code or diagnostics in ``text``, where every line follows a newline: the first rule that fires,
    or ""."""
    # A one-character test is a memchr, far cheaper than a substring search, and usually answers alone.
    if "`" in text and "```" in text:
        return "fenced code block"
    if ":" in text and "panic:" in text:
        return "panic:"
    match = _LINE_START.search(text)
    while match:  # searched again from where the last match ended: a third cheaper than ``finditer``
        start = match.end()
        end = text.find("\n", start, start + _MAX_LINE_CHARS)
        line = text[start : end if end >= 0 else start + _MAX_LINE_CHARS]
        for _prefix, marker, pattern, evidence in _RULES_BY_PREFIX[match.group(1)]:
            if marker in line and (pattern is None or pattern.match(line)):
                return evidence
        match = _LINE_START.search(text, start)
    return ""
