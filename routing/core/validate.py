"""Validation before acceptance: every answer, the primary's included, passes one pipeline or fails.

An answer is returned, cached or counted as a success only after, in this order:

1. ``malformed``  the transport completed and the envelope parsed (the adapter says so);
2. ``truncated``  the finish reason is acceptable: no ``length`` (or ``content_filter``) cut when the
                  contract needs the whole output, and the contract's required finish reason if it has one;
3. ``tool_call``  tool calls only when allowed, only to tools the request declared, arguments that are
                  JSON objects valid against each tool's schema, and a call when the request forced one;
4. ``schema``     structured output parses as JSON and satisfies every original schema;
5. ``too_short``  the text meets the contract's minimum length;
6. ``custom``     the operator's checks for the workload pass.

The only normalisation is deterministic: surrounding whitespace is ignored when parsing and measuring.
Nothing is repaired: no code fences stripped, no missing field guessed, no tool argument rewritten. A
rejected answer is an attempt that failed with ErrorClass.INVALID_RESPONSE (``AnswerVerdict.as_outcome``).

Whose failure a rejection is: every stage but the first judges the answer against what this request asked of
it (its max_tokens, its schema or JSON mode, its tools, its workload's rules) with this request's prompt, which
the client wrote and which can talk any model out of any format. So only ``malformed`` counts against the
target's health; every other rejection is the request's own (``AttemptOutcome.client_caused``): it still falls
back, but it cools no target, for this caller or anyone else.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from routing.core.answer import FINISH_CONTENT_FILTER, FINISH_LENGTH, FINISH_TOOL_CALLS, Answer
from routing.core.contracts import EffectiveContract
from routing.core.outcome import AttemptOutcome, ErrorClass
from routing.core.requirements import DeclaredTool, ToolChoice

# (schema, instance) -> problems, empty when the instance is valid. The jsonschema-backed one lives in
# routing.schema.engine; core stays stdlib-only. Problems must not quote the instance (it is model output).
SchemaValidator = Callable[[Mapping[str, Any], Any], list[str]]
# An operator's workload check: None when the answer is acceptable, else why not.
AnswerCheck = Callable[[Answer], str | None]

MAX_DETAILS = 5
# The rejections that say something about the target rather than the request: an envelope that does not parse.
TARGET_VERDICTS = frozenset({"malformed"})


@dataclass(frozen=True, slots=True)
class ValidationRules:
    """What an acceptable answer looks like for one request (built from its EffectiveContract)."""

    refuse_truncation: bool = False
    required_finish_reason: str | None = None
    json_required: bool = False
    schemas: tuple[Mapping[str, Any], ...] = ()
    tools: tuple[DeclaredTool, ...] = ()
    tool_choice: ToolChoice = "auto"
    forced_tool: str | None = None
    min_output_chars: int | None = None
    extra_checks: tuple[AnswerCheck, ...] = ()

    @staticmethod
    def from_contract(
        contract: EffectiveContract, *, extra_checks: Sequence[AnswerCheck] = ()
    ) -> ValidationRules:
        """The rules for ``contract``; ``extra_checks`` are the workload's operator callables, resolved
        from ``contract.validator`` outside the core."""
        return ValidationRules(
            refuse_truncation=contract.refuse_truncation,
            required_finish_reason=contract.required_finish_reason,
            json_required=contract.json_required,
            schemas=contract.schemas,
            tools=contract.tools,
            tool_choice=contract.tool_choice,
            forced_tool=contract.forced_tool,
            min_output_chars=contract.min_output_chars,
            extra_checks=tuple(extra_checks),
        )


@dataclass(frozen=True, slots=True)
class AnswerVerdict:
    """The pipeline's decision: ``ok``, or the first failed stage as ``reason`` with short ``details``.

    ``details`` name what failed (a JSON path and the schema keyword, a tool name) without quoting the
    model's output, so they can go to the audit log as they are.
    """

    ok: bool
    reason: str = "ok"
    details: tuple[str, ...] = ()

    def as_outcome(self, *, latency_s: float, status: int = 200) -> AttemptOutcome:
        """The attempt's outcome: a success, or an INVALID_RESPONSE failure with this verdict's reason (the
        request's own failure unless the envelope was ``malformed``; see the module docstring)."""
        if self.ok:
            return AttemptOutcome.success(latency_s, status)
        outcome = AttemptOutcome.failure(
            ErrorClass.INVALID_RESPONSE, self.reason, status=status, latency_s=latency_s
        )
        return outcome if self.reason in TARGET_VERDICTS else outcome.by_client()


ACCEPTED = AnswerVerdict(ok=True)


def _reject(reason: str, *details: str) -> AnswerVerdict:
    return AnswerVerdict(ok=False, reason=reason, details=tuple(d[:300] for d in details[:MAX_DETAILS]))


def validate_answer(
    answer: Answer | None,
    rules: ValidationRules,
    *,
    schema_validator: SchemaValidator,
    transport_complete: bool = True,
) -> AnswerVerdict:
    """Run the acceptance pipeline on ``answer`` (None: the adapter could not parse the envelope).

    ``transport_complete`` is False when the body or stream ended before the provider said it was done.
    """
    if answer is None or not transport_complete:
        return _reject("malformed", "transport incomplete" if answer is not None else "envelope unparseable")
    for stage in (_finish_reason, _tool_calls):
        verdict = stage(answer, rules, schema_validator)
        if not verdict.ok:
            return verdict
    if not answer.tool_calls:
        # A turn that calls tools is not the final answer: its text (often a preamble) is not the
        # structured output, and the final turn is validated when it comes.
        for stage in (_structured_output, _min_length):
            verdict = stage(answer, rules, schema_validator)
            if not verdict.ok:
                return verdict
    return _custom(answer, rules)


def _finish_reason(answer: Answer, rules: ValidationRules, _: SchemaValidator) -> AnswerVerdict:
    finish = answer.finish_reason
    if rules.refuse_truncation and finish in (FINISH_LENGTH, FINISH_CONTENT_FILTER):
        return _reject("truncated", f"finish_reason={finish}")
    required = rules.required_finish_reason
    # A tool-calling turn ends with tool_calls by design when the request offered tools.
    tool_turn = finish == FINISH_TOOL_CALLS and bool(answer.tool_calls) and bool(rules.tools)
    if required is not None and finish != required and not tool_turn:
        return _reject("truncated", f"finish_reason={finish}, required {required}")
    return ACCEPTED


def _tool_calls(answer: Answer, rules: ValidationRules, validator: SchemaValidator) -> AnswerVerdict:
    if not answer.tool_calls:
        if rules.tool_choice == "required" or rules.forced_tool is not None:
            return _reject("tool_call", "the request requires a tool call and none was made")
        return ACCEPTED
    if rules.tool_choice == "none":
        return _reject("tool_call", "tool calls are not allowed for this request")
    declared = {tool.name: tool for tool in rules.tools}
    problems: list[str] = []
    for call in answer.tool_calls:
        tool = declared.get(call.name)
        if tool is None:
            problems.append(f"{call.name[:64]!r} is not a tool the request declared")
            continue
        if rules.forced_tool is not None and call.name != rules.forced_tool:
            problems.append(f"{call.name!r} called, the request forced {rules.forced_tool!r}")
            continue
        if tool.freeform:
            continue  # an OpenAI custom tool takes plain text
        problems.extend(
            f"{call.name}: {p}" for p in _json_problems(call.arguments, tool.parameters, validator)
        )
    if problems:
        return _reject("tool_call", *problems)
    return ACCEPTED


def _json_problems(text: str, schema: Mapping[str, Any] | None, validator: SchemaValidator) -> list[str]:
    try:
        value = json.loads(text.strip(), parse_constant=_refuse_constant)
    except (ValueError, RecursionError):  # nested past the parser's depth: not JSON anyone can use
        return ["arguments are not valid JSON"]
    if not isinstance(value, dict):
        return ["arguments are not a JSON object"]
    return validator(schema, value) if schema is not None else []


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _structured_output(answer: Answer, rules: ValidationRules, validator: SchemaValidator) -> AnswerVerdict:
    if not rules.json_required and not rules.schemas:
        return ACCEPTED
    text = answer.text.strip()
    try:
        value = json.loads(text, parse_constant=_refuse_constant)
    except (ValueError, RecursionError):
        return _reject("schema", "output is not valid JSON")
    problems: list[str] = []
    for schema in rules.schemas:
        problems.extend(validator(schema, value))
    if problems:
        return _reject("schema", *problems)
    return ACCEPTED


def _min_length(answer: Answer, rules: ValidationRules, _: SchemaValidator) -> AnswerVerdict:
    wanted = rules.min_output_chars
    if wanted is not None and len(answer.text.strip()) < wanted:
        return _reject("too_short", f"{len(answer.text.strip())} characters, at least {wanted} required")
    return ACCEPTED


def _custom(answer: Answer, rules: ValidationRules) -> AnswerVerdict:
    for check in rules.extra_checks:
        try:
            problem = check(answer)
        except Exception as exc:  # noqa: BLE001 - an operator's bug rejects the answer, visibly, not a 500
            problem = f"{_check_name(check)} raised {type(exc).__name__}"
        if problem:
            return _reject("custom", f"{_check_name(check)}: {problem}")
    return ACCEPTED


def _check_name(check: AnswerCheck) -> str:
    return getattr(check, "__qualname__", None) or type(check).__name__
