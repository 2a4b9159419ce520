"""Shape checks of a client's request body: a 400 naming the field, before anything else looks at it.

Only what the gateway itself relies on, or what every provider would refuse anyway, is checked here; the
adapters refuse what a particular target cannot translate. Unknown fields pass through untouched.

The body is parsed here too (``parse_body``), once, before any of the checks: a number no provider can take
(``1e999``, ``NaN``, ``Infinity``) is refused naming its field, where a later ``json.dumps`` would have sent it
upstream as the literal ``Infinity``.
"""

from __future__ import annotations

import json
import math
from typing import Any, TypeGuard

import orjson

from routing.gateway.gateway_error import GatewayError
from routing.ops.settings_cache import cached_settings
from routing.providers.errors import Inbound
from routing.schema.patterns import pattern_problems

# Objects and arrays inside one another, the body itself being the first. Far more than any request needs
# (a tool schema 25 levels deep fits) and far less than what makes Python's recursion run out downstream.
MAX_NESTING = 64
OPENAI_ROLES = ("system", "developer", "user", "assistant", "tool", "function")
ANTHROPIC_ROLES = ("user", "assistant")
RESPONSE_FORMATS = ("text", "json_object", "json_schema")
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


def _fail(param: str, message: str) -> GatewayError:
    return GatewayError(400, f"{param}: {message}", param=param, code="invalid_request", error_class="permanent")


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _check_types(body: dict[str, Any], fields: dict[str, tuple[str, Any]]) -> None:
    for name, (expected, check) in fields.items():
        if name in body and body[name] is not None and not check(body[name]):
            raise _fail(name, f"expected {expected}, got {type(body[name]).__name__}")


def _check_positive_int(body: dict[str, Any], name: str) -> None:
    value = body.get(name)
    if value is not None and (not _is_int(value) or value < 1):
        raise _fail(name, f"expected a positive integer, got {value!r}"[:200])


def _check_choice_count(body: dict[str, Any]) -> None:
    """``n`` answers are billed as ``n`` answers: past GOMODEL_MAX_N one request could spend a key's budget
    many times over before a single answer is counted."""
    n = body.get("n")
    limit = int(cached_settings.GOMODEL_MAX_N)
    if n is not None and n > limit:  # a positive integer by now
        raise _fail("n", f"expected at most {limit} (GOMODEL_MAX_N), got {n}"[:200])


def _check_content(content: Any, path: str, *, allow_none: bool) -> None:
    if content is None and allow_none:
        return
    if isinstance(content, str):
        return
    if not isinstance(content, list):
        raise _fail(path, "expected a string or a list of content parts")
    for i, part in enumerate(content):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise _fail(f"{path}[{i}]", "expected an object with a string `type`")


def _check_tools(tools: Any, *, anthropic: bool) -> None:
    if tools is None:
        return
    if not isinstance(tools, list):
        raise _fail("tools", "expected a list")
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise _fail(f"tools[{i}]", "expected an object")
        if anthropic:
            if not isinstance(tool.get("name"), str) or not tool["name"]:
                raise _fail(f"tools[{i}].name", "expected a non-empty string")
        elif tool.get("type", "function") == "function":
            function = tool.get("function")
            if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
                raise _fail(f"tools[{i}].function.name", "expected a non-empty string")


def check_body(body: dict[str, Any], inbound: Inbound) -> None:
    """Raise GatewayError(400) naming the first field that breaks the endpoint's schema."""
    model = body.get("model")
    if not isinstance(model, str) or not model.strip():
        raise _fail("model", "required: the name of a model, virtual model or tier alias")
    _check_types(body, {"stream": ("true or false", lambda v: isinstance(v, bool)),
                        "temperature": ("a number", _is_number), "top_p": ("a number", _is_number),
                        "metadata": ("an object", lambda v: isinstance(v, dict))})
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise _fail("messages", "required: a non-empty list of messages")
    if inbound == "anthropic":
        _check_anthropic(body, messages)
    else:
        _check_openai(body, messages)


def _check_openai(body: dict[str, Any], messages: list[Any]) -> None:
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _fail(f"messages[{i}]", "expected an object with `role` and `content`")
        role = message.get("role")
        if role not in OPENAI_ROLES:
            raise _fail(f"messages[{i}].role", f"expected one of {', '.join(OPENAI_ROLES)}")
        _check_content(message.get("content"), f"messages[{i}].content",
                       allow_none=role in ("assistant", "function"))
        if role == "tool" and not isinstance(message.get("tool_call_id"), str):
            raise _fail(f"messages[{i}].tool_call_id", "required for a tool message")
    for name in ("max_tokens", "max_completion_tokens", "n"):
        _check_positive_int(body, name)
    _check_choice_count(body)
    _check_types(body, {"stream_options": ("an object", lambda v: isinstance(v, dict)),
                        "seed": ("an integer", _is_int),
                        "stop": ("a string or a list of strings",
                                 lambda v: isinstance(v, str) or (isinstance(v, list)
                                                                  and all(isinstance(s, str) for s in v)))})
    _check_tools(body.get("tools"), anthropic=False)
    response_format = body.get("response_format")
    if response_format is not None:
        if not isinstance(response_format, dict) or response_format.get("type") not in RESPONSE_FORMATS:
            raise _fail("response_format.type", f"expected one of {', '.join(RESPONSE_FORMATS)}")
        if response_format["type"] == "json_schema":
            spec = response_format.get("json_schema")
            if not isinstance(spec, dict) or not isinstance(spec.get("schema", {}), dict):
                raise _fail("response_format.json_schema", "expected an object with a `schema` object")
    effort = body.get("reasoning_effort")
    if effort is not None and effort not in REASONING_EFFORTS:
        raise _fail("reasoning_effort", f"expected one of {', '.join(REASONING_EFFORTS)}")


def _check_anthropic(body: dict[str, Any], messages: list[Any]) -> None:
    max_tokens = body.get("max_tokens")
    if not _is_int(max_tokens) or max_tokens < 1:
        raise _fail("max_tokens", "required: a positive integer")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise _fail(f"messages[{i}]", "expected an object with `role` and `content`")
        if message.get("role") not in ANTHROPIC_ROLES:
            raise _fail(f"messages[{i}].role", "expected user or assistant")
        _check_content(message.get("content"), f"messages[{i}].content", allow_none=False)
    system = body.get("system")
    if system is not None:
        _check_content(system, "system", allow_none=False)
    _check_types(body, {"stop_sequences": ("a list of strings",
                                           lambda v: isinstance(v, list) and all(isinstance(s, str) for s in v)),
                        "thinking": ("an object", lambda v: isinstance(v, dict)),
                        "top_k": ("an integer", _is_int)})
    _check_tools(body.get("tools"), anthropic=True)


_CONTAINERS = (dict, list)


def parse_body(raw: bytes) -> Any:
    """The JSON value ``raw`` holds; GatewayError(400) when it is not JSON, nests too deeply, or holds a
    number that is not finite or a string that is not Unicode text, naming that field.

    orjson reads the usual body, and refuses exactly the ones that need a closer look: ``NaN`` and
    ``Infinity`` literals, numbers past a double's range (``1e999``), integers past 64 bits, lone surrogate
    escapes, invalid JSON. Only such a body is read again, with Python's json, to tell which: invalid JSON
    is refused as such, a valid body is walked for the field to name (a big integer is fine), so a usual
    request pays for one orjson parse and no walk.
    """
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        pass
    try:
        data = json.loads(raw.decode("utf-8"), parse_constant=float)  # NaN and Infinity read, to be named
    except ValueError as exc:  # json.JSONDecodeError and UnicodeDecodeError alike
        raise GatewayError(400, f"The request body is not valid JSON: {exc}", code="invalid_json",
                           error_class="permanent") from None
    except RecursionError:  # the parser itself gave up, hundreds of levels past MAX_NESTING
        raise nesting_error() from None
    check_nesting(data)  # first, so the walk below is at most MAX_NESTING deep
    _check_sendable(data)
    return data


_NOT_TEXT = "expected Unicode text; a lone surrogate escape such as \\ud800 is not a character"


def _is_text(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_sendable(body: Any) -> None:
    """Raise GatewayError(400) naming the first value, in the body's order, that no provider can be sent."""
    stack: list[tuple[str, Any]] = [("", body)]
    while stack:
        path, node = stack.pop()
        if type(node) is float and not math.isfinite(node):
            raise _fail(path or "body", f"expected a finite number, got {node!r} (JSON has no NaN or Infinity)")
        elif type(node) is str and not _is_text(node):
            raise _fail(path or "body", _NOT_TEXT)
        elif type(node) is dict:
            for key in node:
                if not _is_text(key):
                    raise _fail(path or "body", f"a member's name: {_NOT_TEXT}")
            stack.extend((f"{path}.{key}" if path else key, value) for key, value in reversed(node.items()))
        elif type(node) is list:
            stack.extend((f"{path}[{i}]", node[i]) for i in range(len(node) - 1, -1, -1))


def check_nesting(body: Any) -> None:
    """Raise GatewayError(400) when ``body`` nests objects and arrays deeper than MAX_NESTING.

    One pass over the containers, level by level and without recursion; ``type() in`` rather than
    ``isinstance``, because this runs on every request and costs a microsecond for a usual chat body.
    """
    level = [body]
    depth = 1
    while level:
        if depth > MAX_NESTING:
            raise nesting_error()
        deeper: list[Any] = []
        add = deeper.append
        for node in level:
            for child in node.values() if type(node) is dict else node:
                if type(child) in _CONTAINERS:
                    add(child)
        level = deeper
        depth += 1


def nesting_error() -> GatewayError:
    return GatewayError(400, f"The request body nests objects and arrays deeper than {MAX_NESTING} levels.",
                        code="json_too_deep", error_class="permanent")


def check_tool_schemas(body: dict[str, Any]) -> None:
    """Raise GatewayError(400) naming the tool whose parameter schema has a pattern RE2 cannot run.

    Tool calls are validated against these schemas, with patterns on RE2 (routing/schema/engine.py);
    refused here, before any upstream call, the client hears which tool and which pattern.
    """
    for field in ("tools", "functions"):
        tools = body.get(field)
        if not isinstance(tools, list):
            continue
        for i, tool in enumerate(tools):
            if not isinstance(tool, dict):
                continue
            function = tool.get("function")
            places = [("function.parameters", function.get("parameters") if isinstance(function, dict) else None),
                      ("parameters", tool.get("parameters")), ("input_schema", tool.get("input_schema"))]
            for name, schema in places:
                problems = pattern_problems(schema) if isinstance(schema, dict) else []
                if problems:
                    raise _fail(f"{field}[{i}].{name}", f"the JSON schema cannot be used: {problems[0]}")
