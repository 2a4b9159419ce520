"""Provider key references (``${NAME}``) against the operator's rules, and their values.

The admin (``routing.models.validate_env_reference``), the config file and the routing table compiler (both in
``routing.config.file.providers``) all ask here, so a reference refused in one is refused in
all three. The compiler asks again for every stored row: a row written before a rule existed (or through the
ORM, bypassing the admin) must not send a reserved variable's value anywhere. Nothing here ever puts a value
in a message: problems name the reference, the variable and, for ``NAME_FILE``, the path.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from routing.core.key_references import ReferencePolicy, reference_variable


def reference_policy() -> ReferencePolicy:
    """The rules in force (read per call: tests and ``override_settings`` change them)."""
    return ReferencePolicy(
        reserved_names=settings.PROVIDER_KEY_ENV_RESERVED_NAMES,
        reserved_prefixes=tuple(settings.PROVIDER_KEY_ENV_RESERVED_PREFIXES),
        reserved_suffixes=tuple(settings.PROVIDER_KEY_ENV_RESERVED_SUFFIXES),
        allowed=tuple(settings.GOMODEL_PROVIDER_KEY_ENV_ALLOW),
    )


def variable_refusal(variable: str) -> str | None:
    """Why a provider key may not be read from ``variable``, or None when it may."""
    return reference_policy().refusal(variable)


@dataclass(frozen=True, slots=True)
class KeyLookup:
    """A reference's value, or why there is none (``problem`` names the variable or its file, never a value)."""

    value: str | None = None
    problem: str | None = None


def look_up(reference: str) -> KeyLookup:
    """The value ``reference`` stands for, read only when the rules allow its variable."""
    variable = reference_variable(reference)
    if variable is None:
        # Never echoed: it may be a raw key stored by mistake.
        return KeyLookup(problem="a stored key is not a reference such as ${OPENAI_API_KEY}; it is not used")
    refusal = variable_refusal(variable)
    if refusal is not None:
        return KeyLookup(problem=refusal)
    try:
        value = settings.PROVIDER_KEY_READER(variable)
    except ImproperlyConfigured as exc:
        return KeyLookup(problem=str(exc))
    if value is None:
        return KeyLookup(problem=f"environment variable {variable} is not set (nor {variable}_FILE)")
    return KeyLookup(value=value)
