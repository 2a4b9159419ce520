"""deploy/compose.yaml, parsed: every service the production set-up needs, two gateway replicas on the image's
own command behind HAProxy, health checks, the start-up order, and no secret written in the file."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from tests.gateway_process import ROOT

DEPLOY = ROOT / "deploy"


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return dict(yaml.safe_load((DEPLOY / "compose.yaml").read_text()))


def test_it_has_every_service(compose: dict[str, Any]) -> None:
    assert set(compose["services"]) == {"postgres", "redis", "migrate", "gateway", "worker", "beat", "haproxy",
                                        "prometheus", "grafana"}


def test_two_gateway_replicas_run_the_images_production_command(compose: dict[str, Any]) -> None:
    gateway = compose["services"]["gateway"]
    assert gateway["deploy"]["replicas"] == 2
    assert "command" not in gateway  # the Dockerfile's CMD: the README's production command
    assert gateway["build"] == {"context": "..", "dockerfile": "deploy/Dockerfile"}
    assert (DEPLOY / gateway["build"]["context"] / gateway["build"]["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
    assert "/health/ready" in " ".join(gateway["healthcheck"]["test"])
    # The drain (GOMODEL_SHUTDOWN_GRACE) and the audit flush fit before Compose sends SIGKILL.
    assert gateway["environment"]["GOMODEL_SHUTDOWN_GRACE"] == "30s"
    assert gateway["stop_grace_period"] == "60s"
    # prometheus_client's multiprocess directory starts empty at every container start.
    assert any(t.startswith("/run/gomodel-metrics:") for t in gateway["tmpfs"])


def test_every_long_running_service_has_a_health_check_and_the_order_is_migrate_first(
    compose: dict[str, Any],
) -> None:
    services = compose["services"]
    for name in ("postgres", "redis", "gateway", "worker", "prometheus", "grafana"):
        assert services[name]["healthcheck"]["test"], name
    assert services["migrate"]["command"] == ["gomodel", "migrate", "--noinput"]
    assert services["migrate"]["restart"] == "no"
    for name in ("gateway", "worker", "beat"):
        assert services[name]["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}, name
    assert services["migrate"]["depends_on"]["postgres"] == {"condition": "service_healthy"}
    assert services["worker"]["command"][:4] == ["celery", "-A", "gomodel_site", "worker"]
    assert services["beat"]["command"][:4] == ["celery", "-A", "gomodel_site", "beat"]


def test_the_gateway_worker_and_beat_share_one_environment_with_a_broker(compose: dict[str, Any]) -> None:
    services = compose["services"]
    env = services["gateway"]["environment"]
    for name in ("migrate", "worker", "beat"):
        assert services[name]["environment"] == env, name
    assert env["CELERY_BROKER_URL"].startswith(("redis://redis:", "amqp://"))
    assert env["REDIS_URL"].startswith("redis://redis:")
    assert env["DATABASE_URL"].startswith("postgres://")
    assert env["GOMODEL_CONFIG"] == "/etc/gomodel/config.yaml"
    mounts = services["gateway"]["volumes"]
    assert "./k8s/base/config.yaml:/etc/gomodel/config.yaml:ro" in mounts


def test_no_secret_is_written_in_the_file(compose: dict[str, Any]) -> None:
    """Secrets are ${VAR} references to deploy/.env; Compose stops naming the ones that are required."""
    env = compose["services"]["gateway"]["environment"]
    assert env["DJANGO_SECRET_KEY"].startswith("${DJANGO_SECRET_KEY:?")
    assert "${POSTGRES_PASSWORD:?" in env["DATABASE_URL"]
    for name in ("GOMODEL_MASTER_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        assert re.fullmatch(rf"\$\{{{name}:-\}}", env[name]), name
    assert compose["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"].startswith("${POSTGRES_PASSWORD:?")
    assert compose["services"]["grafana"]["environment"]["GF_SECURITY_ADMIN_PASSWORD"].startswith("${")
    example = (DEPLOY / "env.example").read_text()
    for name in ("POSTGRES_PASSWORD", "DJANGO_SECRET_KEY", "GRAFANA_ADMIN_PASSWORD"):
        assert re.search(rf"^{name}=$", example, re.M), f"env.example must list {name} with no value"
    assert "deploy/.env" in (ROOT / ".gitignore").read_text().split()


def test_haproxy_prometheus_and_grafana_get_their_files(compose: dict[str, Any]) -> None:
    services = compose["services"]
    for service, source in (("haproxy", "./haproxy/haproxy.cfg"), ("prometheus", "./prometheus/prometheus.yml"),
                            ("grafana", "./grafana/provisioning"), ("grafana", "./grafana/dashboards")):
        mount = next(v for v in services[service]["volumes"] if v.startswith(source + ":"))
        assert (DEPLOY / source).exists(), mount
    assert "8000:8000" in services["haproxy"]["ports"]
    scrape = yaml.safe_load((DEPLOY / "prometheus" / "prometheus.yml").read_text())["scrape_configs"]
    (job,) = scrape
    assert job["metrics_path"] == "/metrics"
    # One target per gateway replica (Docker's DNS), not the load balancer.
    assert job["dns_sd_configs"] == [{"names": ["gateway"], "type": "A", "port": 8000, "refresh_interval": "10s"}]
    datasource = yaml.safe_load((DEPLOY / "grafana/provisioning/datasources/prometheus.yaml").read_text())
    assert datasource["datasources"][0]["url"] == "http://prometheus:9090"
    dashboards = yaml.safe_load((DEPLOY / "grafana/provisioning/dashboards/gomodel.yaml").read_text())
    assert dashboards["providers"][0]["options"]["path"] == "/var/lib/grafana/dashboards"
