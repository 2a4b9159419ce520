"""A logging filter that masks anything shaped like an API key, so no provider key reaches a log line."""

from __future__ import annotations

import logging
import re

# OpenAI (sk-..., sk-proj-...), Anthropic (sk-ant-...), Google (AIza...), gateway keys (gm-...), bearer tokens.
SECRET_PATTERN = re.compile(
    r"(sk-(?:proj-|ant-[a-z0-9]+-)?[A-Za-z0-9_\-]{16,}|AIza[0-9A-Za-z_\-]{20,}|gm-[A-Za-z0-9_\-]{20,}"
    r"|(?i:bearer)\s+[A-Za-z0-9._\-]{16,})"
)


def redact(text: str) -> str:
    return SECRET_PATTERN.sub(lambda m: m.group(0)[:4] + "…[redacted]", text)


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
