"""Which environment variables a provider key reference (``${NAME}``) may name.

A staff user who may edit providers chooses both the reference and the ``base_url`` the key is sent to. Were
every variable allowed, ``${DJANGO_SECRET_KEY}``, ``${DATABASE_URL}`` or ``${GOMODEL_MASTER_KEY}`` plus a
``base_url`` of their own would send the gateway's own secrets to them with the next request. So the names of
the gateway's settings and of infrastructure secrets are *reserved*, and the operator may narrow references
further with an allow-list (``GOMODEL_PROVIDER_KEY_ENV_ALLOW``). The settings module supplies the lists; this
module only decides, so the admin, the config file and the routing table compiler give the same answer.
A reference ``${NAME}`` is refused when ``NAME`` or ``NAME_FILE`` is reserved, since the value may come from
the file ``NAME_FILE`` names.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

# ``${OPENAI_API_KEY}``, or LiteLLM's ``os.environ/OPENAI_API_KEY``.
REFERENCE = re.compile(r"^(?:\$\{(?P<a>[A-Za-z_][A-Za-z0-9_]*)\}|os\.environ/(?P<b>[A-Za-z_][A-Za-z0-9_]*))$")
# An allow-list entry: a variable name, or a prefix followed by ``*`` (``OPENAI_*``).
ALLOW_ENTRY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\*?$")
# ``NAME_FILE`` names the file a reference's value is read from when ``NAME`` is unset.
FILE_SUFFIX = "_FILE"


def reference_variable(reference: str) -> str | None:
    """The environment variable a key reference names (``${OPENAI_API_KEY}`` -> ``OPENAI_API_KEY``)."""
    match = REFERENCE.match(reference.strip())
    if match is None:
        return None
    return match.group("a") or match.group("b")


def parse_allow_list(entries: Collection[str]) -> tuple[str, ...]:
    """The allow-list entries as given; ValueError naming the first one that is not ``NAME`` or ``PREFIX*``."""
    for entry in entries:
        if not ALLOW_ENTRY.match(entry):
            raise ValueError(f"{entry!r} is not a variable name or a prefix pattern such as OPENAI_*")
    return tuple(entries)


@dataclass(frozen=True, slots=True)
class ReferencePolicy:
    """The reserved names and the operator's allow-list; ``refusal`` says why a variable may not be named.

    Reserved names are compared without regard to case (``django_secret_key`` is refused too: refusing more
    costs nothing); the allow-list is compared exactly, as the environment is.
    """

    reserved_names: Collection[str] = ()  # upper case
    reserved_prefixes: tuple[str, ...] = ()
    reserved_suffixes: tuple[str, ...] = ()
    allowed: tuple[str, ...] = ()  # empty: any name that is not reserved

    def reserved_by(self, variable: str) -> str | None:
        """The rule that reserves ``variable`` or its file form ``variable_FILE`` (``DJANGO_*``, ``*_PASSWORD``,
        the name itself, ``AWS_WEB_IDENTITY_TOKEN_FILE``), or None.

        A reference falls back to the file ``NAME_FILE`` names when ``NAME`` is unset, so that form is checked
        too: ``${AWS_WEB_IDENTITY_TOKEN}`` would otherwise read the pod's identity token through the real
        variable ``AWS_WEB_IDENTITY_TOKEN_FILE``.
        """
        upper = variable.upper()
        return self._rule_for(upper) or self._rule_for(f"{upper}{FILE_SUFFIX}")

    def _rule_for(self, upper: str) -> str | None:
        if upper in self.reserved_names:
            return upper
        for prefix in self.reserved_prefixes:
            if upper.startswith(prefix):
                return f"{prefix}*"
        for suffix in self.reserved_suffixes:
            if upper.endswith(suffix):
                return f"*{suffix}"
        return None

    def is_allowed(self, variable: str) -> bool:
        if not self.allowed:
            return True
        return any(
            variable.startswith(entry[:-1]) if entry.endswith("*") else variable == entry for entry in self.allowed
        )

    def refusal(self, variable: str) -> str | None:
        """Why a provider key may not be read from ``variable``, or None when it may."""
        rule = self.reserved_by(variable)
        if rule is not None:
            matched = "" if rule == variable.upper() else f" ({rule})"
            return (
                f"{variable} is reserved{matched} for the gateway's own settings and infrastructure secrets, "
                "which are never sent to a provider; give the key a variable of its own, such as OPENAI_API_KEY"
            )
        if not self.is_allowed(variable):
            return f"{variable} is not in GOMODEL_PROVIDER_KEY_ENV_ALLOW ({', '.join(self.allowed)})"
        return None
