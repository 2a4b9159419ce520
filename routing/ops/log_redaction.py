"""A logging filter that masks anything shaped like an API key, so no provider key reaches a log line.

Three rules, applied in this order:

1. A value given to a name that carries a key, whatever the value looks like: ``api-key: …``, ``api_key=…``,
   ``'x-api-key': '…'``, ``x-goog-api-key``, ``Ocp-Apim-Subscription-Key``, a bare ``key=…`` (Gemini's query
   parameter), and AWS's ``aws_secret_access_key``, ``aws_session_token`` and ``X-Amz-Security-Token``.
   Headers are where keys travel, and Azure's keys have no prefix to recognise them by (32 hex digits; 84
   characters on newer resources), so the name is the surest sign.
2. Keys by their shape: OpenAI (``sk-…``, ``sk-proj-…``), Anthropic (``sk-ant-…``), Google (``AIza…``), the
   gateway's own keys (``gm-…``), and bearer tokens.
3. A bare token of exactly 32 hex digits, which is what an Azure key looks like out of context, unless it is
   a version-4 UUID in hex. The gateway writes its request and attempt ids (and the upstream answer ids it
   makes up) that way, and they must stay readable to follow a request through the log; a random Azure key
   looks like one by chance 1 time in 64. Other 32-hex values (session digests, trace ids, MD5 sums) are
   masked too: losing one in a log costs little, a leaked key costs a lot.

A masked value keeps its first four characters, enough to tell two keys apart, never enough to use one.
"""

from __future__ import annotations

import logging
import re

# Rule 1: the name, its separator (quotes, ':' or '='), then the value. ``key`` alone only as a whole word, so
# ``prompt_cache_key`` and ``Idempotency-Key`` values stay as they are.
NAMED_KEY_PATTERN = re.compile(
    r"(?i)(?P<name>(?<![A-Za-z0-9_-])(?:ocp-apim-subscription-key|subscription[-_]key|x-goog-api-key|x-api-key"
    r"|x-amz-security-token|(?:aws[-_])?secret[-_]access[-_]key|(?:aws[-_])?session[-_]token"
    r"|api[-_]?key|key))(?P<sep>['\"]?\s*[:=]\s*['\"]?)(?P<value>[A-Za-z0-9._~+/=\-]{16,})"
)
# Rule 2.
SECRET_PATTERN = re.compile(
    r"(sk-(?:proj-|ant-[a-z0-9]+-)?[A-Za-z0-9_\-]{16,}|AIza[0-9A-Za-z_\-]{20,}|gm-[A-Za-z0-9_\-]{20,}"
    r"|(?i:bearer)\s+[A-Za-z0-9._\-]{16,})"
)
# Rule 3.
HEX32_PATTERN = re.compile(r"(?<![0-9A-Za-z])[0-9a-fA-F]{32}(?![0-9A-Za-z])")
UUID4_HEX = re.compile(r"[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}")

MASK = "…[redacted]"


def _mask(value: str) -> str:
    return value[:4] + MASK


def redact(text: str) -> str:
    """``text`` with every key-like value masked (see the module docstring for what counts)."""
    text = NAMED_KEY_PATTERN.sub(lambda m: m.group("name") + m.group("sep") + _mask(m.group("value")), text)
    text = SECRET_PATTERN.sub(lambda m: _mask(m.group(0)), text)
    return HEX32_PATTERN.sub(lambda m: m.group(0) if UUID4_HEX.fullmatch(m.group(0)) else _mask(m.group(0)), text)


class RedactSecretsFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and record.exc_text is None:
            # Format the traceback now so that it can be scrubbed too.
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True
