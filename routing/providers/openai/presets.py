"""OpenAI-compatible hosts as provider kinds of their own, with each host's quirks as explicit rules.

A preset kind speaks the OpenAI chat completions format (routing.providers.openai.adapter) at a known
base URL, and its rules turn the OpenAI body the gateway would send into one the host accepts: a
parameter the host refuses is dropped (when dropping it cannot change what a correct answer is), renamed
(when the host spells it differently), or refused before sending with a 400 naming the parameter (when
dropping it would silently change the answer). Every rule is in ``PRESETS`` below, one place;
docs/providers.md has the same table.

Rules read the body after the gateway's own changes (the Anthropic translation, ``stream_options``), so
a refusal names the parameter as the OpenAI form spells it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from routing.providers.common.shape import is_set
from routing.providers.errors import CapabilityError

DROP = "drop"
RENAME = "rename"
REFUSE = "refuse"
DROP_MESSAGE_FIELD = "drop_message_field"


@dataclass(frozen=True, slots=True)
class Rule:
    """One quirk: what happens to ``param`` on its way to the host, and why (shown in a refusal)."""

    action: str  # DROP, RENAME, REFUSE or DROP_MESSAGE_FIELD
    param: str
    reason: str
    to: str = ""  # RENAME: the host's name for the parameter
    # REFUSE: whether the value asks for what the host cannot do (default: any value that asks for something)
    refuses: Callable[[Any], bool] = is_set
    # Whether the rule applies to the upstream model name (default: every model of the host)
    for_model: Callable[[str], bool] = field(default=lambda upstream: True)


@dataclass(frozen=True, slots=True)
class Preset:
    kind: str
    label: str
    base_url: str  # used when the provider's base_url is left empty
    needs_key: bool = True  # False: a local server; no Authorization header is sent without a key
    rules: tuple[Rule, ...] = ()
    forwarded_headers: tuple[str, ...] = ()  # client headers passed on to the host (lower case)


def _more_than_one(value: Any) -> bool:
    return value is not None and value != 1


_CLIENT_HINTS = ("user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier")

PRESETS: dict[str, Preset] = {preset.kind: preset for preset in (
    Preset("mistral", "Mistral", "https://api.mistral.ai/v1", rules=(
        Rule(RENAME, "max_completion_tokens", "Mistral names the output limit max_tokens", to="max_tokens"),
        Rule(RENAME, "seed", "Mistral names the seed random_seed", to="random_seed"),
        Rule(DROP, "stream_options", "Mistral refuses stream_options and reports usage on every stream anyway"),
        *(Rule(DROP, hint, "Mistral refuses fields it does not know; this one is a client hint")
          for hint in _CLIENT_HINTS),
        Rule(REFUSE, "logprobs", "Mistral's chat API returns no log probabilities"),
        Rule(REFUSE, "top_logprobs", "Mistral's chat API returns no log probabilities"),
        Rule(REFUSE, "logit_bias", "Mistral's chat API has no logit_bias"),
    )),
    Preset("groq", "Groq", "https://api.groq.com/openai/v1", rules=(
        Rule(REFUSE, "logprobs", "Groq answers 400 to logprobs"),
        Rule(REFUSE, "top_logprobs", "Groq answers 400 to top_logprobs"),
        Rule(REFUSE, "logit_bias", "Groq answers 400 to logit_bias"),
        Rule(REFUSE, "n", "Groq returns one choice: n must be 1", refuses=_more_than_one),
        Rule(DROP_MESSAGE_FIELD, "name", "Groq answers 400 to messages[].name; the name is a hint"),
    )),
    Preset("deepseek", "DeepSeek", "https://api.deepseek.com/v1", rules=(
        Rule(REFUSE, "logprobs", "deepseek-reasoner answers 400 to logprobs",
             for_model=lambda upstream: "reasoner" in upstream),
        Rule(REFUSE, "top_logprobs", "deepseek-reasoner answers 400 to top_logprobs",
             for_model=lambda upstream: "reasoner" in upstream),
    )),
    Preset("together", "Together AI", "https://api.together.xyz/v1"),
    Preset("fireworks", "Fireworks AI", "https://api.fireworks.ai/inference/v1"),
    Preset("openrouter", "OpenRouter", "https://openrouter.ai/api/v1",
           forwarded_headers=("http-referer", "x-title")),
    Preset("ollama", "Ollama", "http://localhost:11434/v1", needs_key=False, rules=(
        Rule(REFUSE, "n", "Ollama returns one choice whatever n says: n must be 1", refuses=_more_than_one),
    )),
    Preset("vllm", "vLLM", "http://localhost:8000/v1", needs_key=False),
    Preset("lmstudio", "LM Studio", "http://localhost:1234/v1", needs_key=False),
)}

PRESET_KINDS = tuple(PRESETS)


def apply_rules(preset: Preset, payload: dict[str, Any], *, upstream: str) -> dict[str, Any]:
    """``payload`` (the OpenAI body for the host) with the preset's rules applied; CapabilityError for a
    refused parameter. The payload is a shallow copy of the client's body: messages are copied before a
    rule changes them."""
    for rule in preset.rules:
        if not rule.for_model(upstream):
            continue
        if rule.action == DROP_MESSAGE_FIELD:
            _drop_message_field(payload, rule.param)
            continue
        if rule.param not in payload:
            continue
        if rule.action == DROP:
            del payload[rule.param]
        elif rule.action == RENAME:
            value = payload.pop(rule.param)
            if rule.to not in payload:
                payload[rule.to] = value
        elif rule.action == REFUSE and rule.refuses(payload[rule.param]):
            raise CapabilityError(rule.param, f"'{rule.param}' is not accepted by {preset.label}: {rule.reason}",
                                  rule.param)
    return payload


def _drop_message_field(payload: dict[str, Any], name: str) -> None:
    messages = payload.get("messages")
    if not isinstance(messages, list) or not any(isinstance(m, dict) and name in m for m in messages):
        return
    payload["messages"] = [
        {k: v for k, v in message.items() if k != name} if isinstance(message, dict) else message
        for message in messages
    ]
