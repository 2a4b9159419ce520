"""The OpenTelemetry exporter's settings, from the standard ``OTEL_*`` variables (read by gomodel_site/settings.py).

Only what the gateway does is accepted: traces over OTLP/HTTP with protobuf bodies, optionally gzip-compressed.
A variable asking for anything else (``grpc``, ``http/json``, another exporter) stops start-up naming it rather
than exporting nothing in silence. The traces-specific variable wins over the general one, as the OpenTelemetry
specification says; the endpoint of ``OTEL_EXPORTER_OTLP_ENDPOINT`` gets ``/v1/traces`` appended, the one of
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is used as it is.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from routing.core.trace_sampler import Sampler

DEFAULT_SERVICE_NAME = "gomodel"


@dataclass(frozen=True, slots=True)
class TracingConfig:
    """Where and how spans are exported; None in the settings means tracing is off."""

    url: str  # the full traces URL the exporter posts to
    headers: tuple[tuple[str, str], ...]  # sent with every export (may carry the backend's token: never logged)
    resource: tuple[tuple[str, str], ...]  # service.name first
    sampler: Sampler
    compression: str  # "gzip" or "none"
    timeout_s: float  # one export's bound
    max_queue_spans: int
    max_batch_spans: int
    schedule_delay_s: float  # the longest a span waits in the queue before it is sent

    @property
    def origin(self) -> str:
        """``scheme://host[:port]`` of the URL: all of it a log line shows (a path or query may hold a token)."""
        parts = urlsplit(self.url)
        return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


class OtelSettingError(ValueError):
    """A variable's value cannot be used; the message starts with the variable's name."""


def traces_url(base: str, traces: str) -> str:
    """The traces URL from the two endpoint variables ("" when neither is set); OtelSettingError for a bad one."""
    if traces.strip():
        name, url = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", traces.strip()
    elif base.strip():
        name, url = "OTEL_EXPORTER_OTLP_ENDPOINT", base.strip().rstrip("/") + "/v1/traces"
    else:
        return ""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number in range
    except ValueError:
        raise OtelSettingError(f"{name}: not a URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise OtelSettingError(f"{name}: expected an http:// or https:// URL with a host")
    if parts.username or parts.password:
        raise OtelSettingError(f"{name}: give credentials in OTEL_EXPORTER_OTLP_HEADERS, not in the URL")
    return url


def parse_pairs(name: str, text: str) -> list[tuple[str, str]]:
    """``key1=value1,key2=value2`` with percent-encoded values (the W3C Baggage form OTEL_* lists use)."""
    pairs = []
    for item in text.split(","):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise OtelSettingError(f"{name}: expected key=value pairs separated by commas")
        pairs.append((unquote(key), unquote(value.strip())))
    return pairs


def _header_pairs(name: str, text: str) -> list[tuple[str, str]]:
    pairs = parse_pairs(name, text)
    for key, value in pairs:
        if not key.isascii() or any(c in key for c in " \t:()<>@,;\"/[]?={}") or not key.isprintable():
            raise OtelSettingError(f"{name}: {key[:40]!r} is not a header name")
        if any(c in value for c in "\r\n\0"):
            raise OtelSettingError(f"{name}: the value of {key[:40]!r} holds a line break")  # never the value
    return pairs


def _choice(name: str, raw: str, allowed: tuple[str, ...]) -> str:
    value = raw.strip().lower()
    if value not in allowed:
        raise OtelSettingError(f"{name}: the gateway supports {' or '.join(allowed)}, got {raw.strip()[:40]!r}")
    return value


def _millis(name: str, raw: str, default_ms: int, *, minimum: int, maximum: int) -> float:
    if not raw.strip():
        return default_ms / 1000
    try:
        value = int(raw.strip())
    except ValueError:
        raise OtelSettingError(f"{name}: expected a whole number of milliseconds, got {raw.strip()[:40]!r}") from None
    if not minimum <= value <= maximum:
        raise OtelSettingError(f"{name}: expected {minimum} to {maximum} milliseconds, got {value}")
    return value / 1000


def _count(name: str, raw: str, default: int, *, maximum: int) -> int:
    if not raw.strip():
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise OtelSettingError(f"{name}: expected a whole number, got {raw.strip()[:40]!r}") from None
    if not 1 <= value <= maximum:
        raise OtelSettingError(f"{name}: expected 1 to {maximum}, got {value}")
    return value


def tracing_config(read: Callable[[str], str]) -> TracingConfig | None:
    """The exporter's settings from the variables ``read`` returns ("" when unset); None when tracing is off."""
    if read("OTEL_SDK_DISABLED").strip().lower() == "true":
        return None
    exporter = read("OTEL_TRACES_EXPORTER").strip().lower()
    if exporter == "none":
        return None
    if exporter and exporter != "otlp":
        raise OtelSettingError(f"OTEL_TRACES_EXPORTER: the gateway exports traces over otlp only, "
                               f"got {exporter[:40]!r}")
    url = traces_url(read("OTEL_EXPORTER_OTLP_ENDPOINT"), read("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))
    if not url:
        return None

    def either(general: str, specific: str) -> tuple[str, str]:
        value = read(specific)
        return (specific, value) if value.strip() else (general, read(general))

    name, protocol = either("OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
    if protocol.strip():
        _choice(name, protocol, ("http/protobuf",))
    name, compression = either("OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION")
    compression = _choice(name, compression, ("gzip", "none")) if compression.strip() else "none"
    name, timeout = either("OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
    timeout_s = _millis(name, timeout, 10_000, minimum=1, maximum=600_000)
    # Headers: the general list, then the traces list, whose entries win on the same name.
    headers = dict(_header_pairs("OTEL_EXPORTER_OTLP_HEADERS", read("OTEL_EXPORTER_OTLP_HEADERS")))
    headers.update(_header_pairs("OTEL_EXPORTER_OTLP_TRACES_HEADERS", read("OTEL_EXPORTER_OTLP_TRACES_HEADERS")))
    resource = dict(parse_pairs("OTEL_RESOURCE_ATTRIBUTES", read("OTEL_RESOURCE_ATTRIBUTES")))
    service = read("OTEL_SERVICE_NAME").strip() or resource.pop("service.name", "") or DEFAULT_SERVICE_NAME
    resource.pop("service.name", None)
    try:
        sampler = Sampler.parse(read("OTEL_TRACES_SAMPLER"), read("OTEL_TRACES_SAMPLER_ARG"))
    except ValueError as exc:
        name = "OTEL_TRACES_SAMPLER_ARG" if str(exc).startswith("expected a ratio") else "OTEL_TRACES_SAMPLER"
        raise OtelSettingError(f"{name}: {exc}") from None
    max_queue = _count("OTEL_BSP_MAX_QUEUE_SIZE", read("OTEL_BSP_MAX_QUEUE_SIZE"), 2048, maximum=1_000_000)
    max_batch = _count("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", read("OTEL_BSP_MAX_EXPORT_BATCH_SIZE"),
                       min(512, max_queue),
                       maximum=max_queue)
    delay_s = _millis("OTEL_BSP_SCHEDULE_DELAY", read("OTEL_BSP_SCHEDULE_DELAY"), 5000, minimum=1, maximum=600_000)
    return TracingConfig(url=url, headers=tuple(headers.items()),
                         resource=(("service.name", service), *resource.items()), sampler=sampler,
                         compression=compression, timeout_s=timeout_s, max_queue_spans=max_queue,
                         max_batch_spans=max_batch, schedule_delay_s=delay_s)
