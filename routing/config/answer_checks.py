"""Operator-registered answer checks: a contract names a Python callable by its dotted path.

The callable takes the accepted-to-be ``routing.core.answer.Answer`` and returns None when the answer is
acceptable, or a short message saying why not. It runs on the request path, so it must be fast and pure.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from typing import cast

from routing.core.validate import AnswerCheck


@lru_cache(maxsize=256)
def resolve_validator(dotted_path: str) -> AnswerCheck:
    """The callable at ``package.module.function``; ValueError with a readable message otherwise."""
    module_name, _, attribute = dotted_path.strip().rpartition(".")
    if not module_name or not attribute:
        raise ValueError(f'"{dotted_path}" is not a dotted path such as myapp.checks.invoice_total')
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f'cannot import module "{module_name}": {exc}') from None
    target = getattr(module, attribute, None)
    if target is None:
        raise ValueError(f'module "{module_name}" has no attribute "{attribute}"')
    if not callable(target):
        raise ValueError(f'"{dotted_path}" is not callable')
    return cast(AnswerCheck, target)  # its signature cannot be checked before it runs on an answer
