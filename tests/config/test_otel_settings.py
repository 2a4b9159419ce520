"""The OTEL_* variables: what turns tracing on, which variable wins, and a clear refusal of what the gateway
cannot do."""

from __future__ import annotations

import pytest

from routing.config.otel_settings import OtelSettingError, TracingConfig, tracing_config
from routing.core.trace_sampler import Sampler


def _config(**env: str) -> TracingConfig | None:
    return tracing_config(lambda name: env.get(name, ""))


def test_it_is_off_without_an_endpoint() -> None:
    assert _config() is None
    assert _config(OTEL_SERVICE_NAME="gw") is None


def test_the_general_endpoint_gets_the_traces_path_and_the_defaults_of_the_sdk() -> None:
    config = _config(OTEL_EXPORTER_OTLP_ENDPOINT="http://collector:4318/")
    assert config is not None
    assert config.url == "http://collector:4318/v1/traces"
    assert config.resource == (("service.name", "gomodel"),)
    assert config.sampler == Sampler("parentbased_always_on")
    assert (config.compression, config.timeout_s, config.max_queue_spans, config.max_batch_spans,
            config.schedule_delay_s) == ("none", 10.0, 2048, 512, 5.0)


def test_the_traces_endpoint_is_used_as_it_is_and_wins() -> None:
    config = _config(OTEL_EXPORTER_OTLP_ENDPOINT="http://a:4318",
                     OTEL_EXPORTER_OTLP_TRACES_ENDPOINT="https://b.example/otlp/traces?tenant=1")
    assert config is not None
    assert config.url == "https://b.example/otlp/traces?tenant=1"
    assert config.origin == "https://b.example"


def test_headers_are_percent_decoded_and_the_traces_list_wins() -> None:
    config = _config(OTEL_EXPORTER_OTLP_ENDPOINT="http://a:4318",
                     OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20abc,x-tenant=one",
                     OTEL_EXPORTER_OTLP_TRACES_HEADERS="x-tenant=two")
    assert config is not None
    assert dict(config.headers) == {"Authorization": "Bearer abc", "x-tenant": "two"}


def test_the_service_name_and_resource_attributes() -> None:
    config = _config(OTEL_EXPORTER_OTLP_ENDPOINT="http://a:4318", OTEL_SERVICE_NAME="edge-gw",
                     OTEL_RESOURCE_ATTRIBUTES="service.name=ignored,deployment.environment=prod,team=ml%2Fops")
    assert config is not None
    assert config.resource == (("service.name", "edge-gw"), ("deployment.environment", "prod"), ("team", "ml/ops"))
    named = _config(OTEL_EXPORTER_OTLP_ENDPOINT="http://a:4318", OTEL_RESOURCE_ATTRIBUTES="service.name=from-res")
    assert named is not None
    assert named.resource == (("service.name", "from-res"),)


def test_batching_sampling_compression_and_timeout_are_read() -> None:
    config = _config(OTEL_EXPORTER_OTLP_ENDPOINT="http://a:4318", OTEL_BSP_MAX_QUEUE_SIZE="100",
                     OTEL_BSP_SCHEDULE_DELAY="250", OTEL_EXPORTER_OTLP_TRACES_TIMEOUT="1500",
                     OTEL_EXPORTER_OTLP_COMPRESSION="gzip", OTEL_TRACES_SAMPLER="traceidratio",
                     OTEL_TRACES_SAMPLER_ARG="0.1", OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf")
    assert config is not None
    assert (config.max_queue_spans, config.max_batch_spans, config.schedule_delay_s, config.timeout_s,
            config.compression, config.sampler) == (100, 100, 0.25, 1.5, "gzip", Sampler("traceidratio", 0.1))


def test_the_sdk_switches_turn_it_off() -> None:
    assert _config(OTEL_EXPORTER_OTLP_ENDPOINT="http://a:4318", OTEL_SDK_DISABLED="true") is None
    assert _config(OTEL_EXPORTER_OTLP_ENDPOINT="http://a:4318", OTEL_TRACES_EXPORTER="none") is None


@pytest.mark.parametrize(("env", "named"), [
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "collector:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"),
    ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "ftp://c/v1/traces"}, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://u:p@c:4318"}, "OTEL_EXPORTER_OTLP_ENDPOINT"),
    ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:99999"}, "OTEL_EXPORTER_OTLP_ENDPOINT"),
    ({"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "OTEL_EXPORTER_OTLP_PROTOCOL"),
    ({"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/json"}, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"),
    ({"OTEL_EXPORTER_OTLP_COMPRESSION": "zstd"}, "OTEL_EXPORTER_OTLP_COMPRESSION"),
    ({"OTEL_EXPORTER_OTLP_TIMEOUT": "10s"}, "OTEL_EXPORTER_OTLP_TIMEOUT"),
    ({"OTEL_EXPORTER_OTLP_HEADERS": "no-equals-sign"}, "OTEL_EXPORTER_OTLP_HEADERS"),
    ({"OTEL_EXPORTER_OTLP_HEADERS": "bad name=x"}, "OTEL_EXPORTER_OTLP_HEADERS"),
    ({"OTEL_EXPORTER_OTLP_HEADERS": "a=b%0D%0Ac"}, "OTEL_EXPORTER_OTLP_HEADERS"),
    ({"OTEL_TRACES_SAMPLER": "sometimes"}, "OTEL_TRACES_SAMPLER"),
    ({"OTEL_TRACES_SAMPLER": "traceidratio", "OTEL_TRACES_SAMPLER_ARG": "2"}, "OTEL_TRACES_SAMPLER_ARG"),
    ({"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER"),
    ({"OTEL_BSP_MAX_QUEUE_SIZE": "0"}, "OTEL_BSP_MAX_QUEUE_SIZE"),
    ({"OTEL_BSP_MAX_QUEUE_SIZE": "10", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "20"}, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE"),
])
def test_it_refuses_a_value_it_cannot_use_naming_the_variable(env: dict[str, str], named: str) -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318", **env}
    with pytest.raises(OtelSettingError, match=f"^{named}:"):
        _config(**env)


def test_a_refused_header_never_shows_its_value() -> None:
    with pytest.raises(OtelSettingError) as caught:
        _config(OTEL_EXPORTER_OTLP_ENDPOINT="http://a:4318", OTEL_EXPORTER_OTLP_HEADERS="authorization=sk-1%0Ax")
    assert "sk-1" not in str(caught.value)
