"""Help with public names: the slash-free alias of a model's name, and the nearest names to a misspelt one.

Slash-free aliases. Some clients read a ``/`` in a model name as a provider prefix of their own (the OpenAI
Agents SDK answers ``Unknown prefix: sim-anthropic`` for ``sim-anthropic/claude``), so every model whose public
name has a slash is also callable by that name with each ``/`` spelled ``--``: ``sim-anthropic--claude``. An
alias is the same model under another spelling: the request is routed, limited, audited and answered exactly as
for the public name. An alias never shadows a public name, and the configuration refuses one that would meet
another name (``alias_collisions``); the table leaves out any that slipped through.

Nearest names. An unknown or misspelt name is answered with up to three close names (``difflib``'s ratio,
0.6 or more, closest first), so ``nomral`` gets "Did you mean `normal`?". The caller passes only the names
the asker may see.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, TypeVar, overload

ALIAS_SEPARATOR = "--"  # stands for each "/" of a public name
MAX_SUGGESTIONS = 3
_CUTOFF = 0.6  # difflib's own default: "nomral" -> "normal" is 0.83, "gpt-4o" -> "claude" is 0.17

V = TypeVar("V")
T = TypeVar("T")


def slash_free_alias(name: str) -> str | None:
    """The slash-free alias of ``name`` (``openai/gpt-4o`` -> ``openai--gpt-4o``), or None without a slash."""
    return name.replace("/", ALIAS_SEPARATOR) if "/" in name else None


def alias_collisions(model_names: Iterable[str], other_names: Iterable[str]) -> dict[str, str]:
    """``{model name: problem}`` for each model whose alias is another public name or another model's alias.

    ``model_names`` are the concrete models' public names; ``other_names`` every other public name (virtual
    models, tier and category aliases). Both of two models sharing an alias are reported.
    """
    models = list(dict.fromkeys(model_names))
    taken = set(models) | set(other_names)
    owners: dict[str, list[str]] = {}
    for name in models:
        alias = slash_free_alias(name)
        if alias is not None:
            owners.setdefault(alias, []).append(name)
    problems: dict[str, str] = {}
    for alias, names in owners.items():
        for name in names:
            if alias in taken:
                problems[name] = (f'its slash-free alias "{alias}" is already a public name; rename one of '
                                  f"the two")
            elif len(names) > 1:
                others = ", ".join(f'"{other}"' for other in names if other != name)
                problems[name] = f'its slash-free alias "{alias}" is also the alias of {others}; rename one'
    return problems


def model_aliases(model_names: Iterable[str], other_names: Iterable[str]) -> dict[str, str]:
    """``{alias: model name}`` for every model whose alias collides with nothing (see ``alias_collisions``)."""
    models = list(model_names)
    refused = alias_collisions(models, other_names)
    out: dict[str, str] = {}
    for name in models:
        alias = slash_free_alias(name)
        if alias is not None and name not in refused:
            out[alias] = name
    return out


def nearest_names(name: str, candidates: Iterable[str], *, limit: int = MAX_SUGGESTIONS) -> list[str]:
    """Up to ``limit`` of ``candidates`` closest to ``name``, closest first; compared case-folded."""
    folded: dict[str, str] = {}
    for candidate in candidates:
        folded.setdefault(candidate.casefold(), candidate)
    # An alias differs from its model by the separator only: compare with "/" read as the separator too, and
    # name one spelling of each model: the one the asker used (a name with a slash, unless they wrote none).
    wanted = name.casefold().replace("/", ALIAS_SEPARATOR)
    slash_free = "/" not in name and ALIAS_SEPARATOR in name
    keys: dict[str, str] = {}
    for key in folded:
        spelled = key.replace("/", ALIAS_SEPARATOR)
        if spelled not in keys or ("/" in keys[spelled]) == slash_free:
            keys[spelled] = key
    matches = difflib.get_close_matches(wanted, list(keys), n=limit, cutoff=_CUTOFF)
    return list(dict.fromkeys(folded[keys[match]] for match in matches))


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """`` Did you mean `a` or `b`?`` (with its leading space) for the nearest names, "" when none is close."""
    found = nearest_names(name, candidates)
    if not found:
        return ""
    quoted = [f"`{n}`" for n in found]
    listed = quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]
    return f" Did you mean {listed}?"


class AliasedModels(Mapping[str, V]):
    """The table's models by public name, also answering lookups by slash-free alias.

    Iteration, ``len`` and ``items()`` see each model once, under its public name, so whatever walks every
    model (health, probes, provider limits) never sees an alias; ``models[alias]``, ``.get(alias)`` and
    ``alias in models`` answer the model itself.
    """

    __slots__ = ("_by_name", "aliases")

    def __init__(self, by_name: Mapping[str, V], aliases: Mapping[str, str]) -> None:
        self._by_name = by_name
        self.aliases = aliases  # alias -> public name

    # ``get`` and ``[]`` without raising on the way: the request path asks for names that are not models (a
    # virtual model's, a tier alias's) several times a request, and Mapping.get would raise and catch a KeyError
    # for each.
    def __getitem__(self, name: str) -> V:
        found = self._by_name.get(name)
        if found is not None:
            return found
        canonical = self.aliases.get(name)
        if canonical is None:
            raise KeyError(name)
        return self._by_name[canonical]

    @overload
    def get(self, name: str, /) -> V | None: ...
    @overload
    def get(self, name: str, /, default: V | T) -> V | T: ...
    def get(self, name: str, /, default: Any = None) -> Any:
        found = self._by_name.get(name)
        if found is not None:
            return found
        canonical = self.aliases.get(name)
        return default if canonical is None else self._by_name.get(canonical, default)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name or name in self.aliases

    def __iter__(self) -> Iterator[str]:
        return iter(self._by_name)

    def __len__(self) -> int:
        return len(self._by_name)

    def __repr__(self) -> str:
        return f"AliasedModels({dict(self._by_name)!r}, aliases={dict(self.aliases)!r})"
