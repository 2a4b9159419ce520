"""The Kustomize base, the migration and the example deployment, rendered by ``kubectl kustomize`` (offline) and
checked object by object: the gateway's probes and termination grace, the HPA alone owning the replica count, the
PodDisruptionBudget, the config file mounted from a ConfigMap, secrets only by reference, the migration Job named
per release and kept out of the rollout, the Ingress's TLS and stream-safe timeouts, and non-root containers
everywhere."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from routing.config.file.parse import parse_config, read_config_file
from routing.core.durations import parse_duration
from tests.gateway_process import ROOT

BASE = ROOT / "deploy" / "k8s" / "base"
MIGRATE = ROOT / "deploy" / "k8s" / "migrate"
EXAMPLE = ROOT / "deploy" / "k8s" / "example"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
SECRET_NAMES = ("DJANGO_SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "REDIS_URL", "GOMODEL_MASTER_KEY",
                "OPENAI_API_KEY", "ANTHROPIC_API_KEY")
# The margin the README asks for beyond GOMODEL_SHUTDOWN_GRACE: the audit flush after the drain.
FLUSH_MARGIN_SECONDS = 20


def render(folder: Path) -> list[dict[str, Any]]:
    done = subprocess.run([KUBECTL, "kustomize", str(folder)], capture_output=True, text=True, timeout=60,
                          check=False)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    return render(BASE)


@pytest.fixture(scope="module")
def migration() -> list[dict[str, Any]]:
    return render(MIGRATE)


@pytest.fixture(scope="module")
def example() -> list[dict[str, Any]]:
    return render(EXAMPLE)


def one(objects: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def config_map(objects: list[dict[str, Any]], prefix: str) -> dict[str, Any]:
    """The generated ConfigMap whose name is ``prefix`` plus Kustomize's content hash."""
    found = [o for o in objects if o["kind"] == "ConfigMap" and re.fullmatch(rf"{prefix}-[a-z0-9]{{10}}",
                                                                              o["metadata"]["name"])]
    assert len(found) == 1, f"expected one generated ConfigMap {prefix}-<hash>"
    return found[0]


def pod_specs(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every pod template's spec, by ``Kind/name``."""
    return {f"{o['kind']}/{o['metadata']['name']}": o["spec"]["template"]["spec"]
            for o in objects if o["kind"] in ("Deployment", "Job")}


def gateway_container(objects: list[dict[str, Any]]) -> dict[str, Any]:
    spec = one(objects, "Deployment", "gomodel-gateway")["spec"]["template"]["spec"]
    (container,) = spec["containers"]
    return dict(container)


def test_it_renders_every_piece_and_no_secret_object(rendered: list[dict[str, Any]]) -> None:
    kinds = sorted(f"{o['kind']}/{o['metadata']['name']}" for o in rendered if o["kind"] != "ConfigMap")
    assert kinds == [
        "Deployment/gomodel-beat", "Deployment/gomodel-gateway", "Deployment/gomodel-worker",
        "HorizontalPodAutoscaler/gomodel-gateway", "PodDisruptionBudget/gomodel-gateway",
        "Service/gomodel-gateway",
    ]
    assert not [o for o in rendered if o["kind"] == "Secret"]
    # The migration is applied on its own, before the rollout: applied with the base it would run beside it.
    assert not [o for o in rendered if o["kind"] == "Job"]


def test_the_gateway_is_ready_on_health_ready_and_alive_on_health(rendered: list[dict[str, Any]]) -> None:
    container = gateway_container(rendered)
    assert container["readinessProbe"]["httpGet"] == {"path": "/health/ready", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/health", "port": "http"}
    assert container["ports"] == [{"name": "http", "containerPort": 8000}]
    # The image's own command is the production server: the Deployment must not replace it.
    assert "command" not in container
    assert "args" not in container


def test_the_termination_grace_covers_the_gateways_own_grace_and_the_audit_flush(
    rendered: list[dict[str, Any]],
) -> None:
    spec = one(rendered, "Deployment", "gomodel-gateway")["spec"]["template"]["spec"]
    env = config_map(rendered, "gomodel-env")["data"]
    grace = parse_duration(env["GOMODEL_SHUTDOWN_GRACE"])
    pause = 0
    pre_stop = spec["containers"][0].get("lifecycle", {}).get("preStop", {})
    if pre_stop:
        assert pre_stop["exec"]["command"][0] == "sleep"
        pause = int(pre_stop["exec"]["command"][1])
    assert spec["terminationGracePeriodSeconds"] >= pause + grace + FLUSH_MARGIN_SECONDS


def test_the_hpa_scales_the_gateway_and_the_pdb_keeps_all_but_one(rendered: list[dict[str, Any]]) -> None:
    hpa = one(rendered, "HorizontalPodAutoscaler", "gomodel-gateway")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment",
                                             "name": "gomodel-gateway"}
    assert 2 <= hpa["spec"]["minReplicas"] < hpa["spec"]["maxReplicas"]
    pdb = one(rendered, "PodDisruptionBudget", "gomodel-gateway")
    gateway = one(rendered, "Deployment", "gomodel-gateway")
    # The HPA owns the count: a replicas field would set it back on every apply.
    assert "replicas" not in gateway["spec"]
    selector = gateway["spec"]["selector"]["matchLabels"]
    assert pdb["spec"]["selector"]["matchLabels"] == selector
    assert pdb["spec"]["maxUnavailable"] == 1
    service = one(rendered, "Service", "gomodel-gateway")
    assert service["spec"]["selector"] == selector
    assert service["spec"]["ports"][0]["targetPort"] == "http"
    assert all(gateway["spec"]["template"]["metadata"]["labels"][k] == v for k, v in selector.items())


def test_the_config_file_is_a_config_map_mounted_where_gomodel_config_points(
    rendered: list[dict[str, Any]],
) -> None:
    config = config_map(rendered, "gomodel-config")
    assert config["data"]["config.yaml"] == (BASE / "config.yaml").read_text()
    env = config_map(rendered, "gomodel-env")["data"]
    spec = one(rendered, "Deployment", "gomodel-gateway")["spec"]["template"]["spec"]
    volume = next(v for v in spec["volumes"] if v.get("configMap", {}).get("name") == config["metadata"]["name"])
    mount = next(m for m in spec["containers"][0]["volumeMounts"] if m["name"] == volume["name"])
    assert mount.get("readOnly") is True
    assert env["GOMODEL_CONFIG"] == f"{mount['mountPath']}/config.yaml"
    assert {"configMapRef": {"name": env_name(rendered)}} in spec["containers"][0]["envFrom"]


def env_name(rendered: list[dict[str, Any]]) -> str:
    return str(config_map(rendered, "gomodel-env")["metadata"]["name"])


@pytest.mark.django_db
def test_the_config_file_is_a_valid_gateway_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    # The provider keys it names, as the Secret would provide them.
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-openai")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-anthropic")
    parsed = parse_config(read_config_file(str(BASE / "config.yaml")))
    assert parsed["tier_routes"]


def test_every_secret_is_a_secret_key_ref_and_no_value_is_written(
    rendered: list[dict[str, Any]], migration: list[dict[str, Any]],
) -> None:
    for where, spec in pod_specs(rendered + migration).items():
        needed = ("DJANGO_SECRET_KEY", "DATABASE_URL") + (() if where.startswith("Job/") else ("CELERY_BROKER_URL",))
        for container in spec["containers"]:
            env = {e["name"]: e for e in container.get("env", [])}
            for name in needed:
                assert name in env, f"{where}: {name} missing"
            for name, entry in env.items():
                if name in SECRET_NAMES:
                    assert "value" not in entry, f"{where}: {name} is written as a literal"
                    assert entry["valueFrom"]["secretKeyRef"]["name"] == "gomodel-secrets"
                    assert entry["valueFrom"]["secretKeyRef"]["key"] == name
            for source in container.get("envFrom", []):
                assert "secretRef" not in source  # every secret is named where it is used
    for config in (o for o in rendered if o["kind"] == "ConfigMap"):
        assert not set(config["data"]) & set(SECRET_NAMES), f"{config['metadata']['name']} holds a secret"
    gateway_env = {e["name"] for e in gateway_container(rendered)["env"]}
    assert set(SECRET_NAMES) <= gateway_env


def test_the_job_migrates_and_beat_runs_once(rendered: list[dict[str, Any]], migration: list[dict[str, Any]]) -> None:
    (job,) = migration
    assert job["kind"] == "Job"
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["gomodel", "migrate", "--noinput"]
    assert job["spec"]["template"]["spec"]["restartPolicy"] in ("OnFailure", "Never")
    assert job["spec"]["ttlSecondsAfterFinished"] > 0  # a finished release's Job does not pile up
    beat = one(rendered, "Deployment", "gomodel-beat")
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"]["type"] == "Recreate"
    assert beat["spec"]["template"]["spec"]["containers"][0]["command"][:4] == ["celery", "-A", "gomodel_site",
                                                                               "beat"]
    worker = one(rendered, "Deployment", "gomodel-worker")
    assert worker["spec"]["template"]["spec"]["containers"][0]["command"][:4] == ["celery", "-A", "gomodel_site",
                                                                                 "worker"]


def test_every_pod_runs_as_non_root_with_a_read_only_root(
    rendered: list[dict[str, Any]], migration: list[dict[str, Any]],
) -> None:
    images = {o["metadata"]["name"] for o in rendered + migration if o["kind"] in ("Deployment", "Job")}
    assert len(images) == 4
    for where, spec in pod_specs(rendered + migration).items():
        assert spec["securityContext"]["runAsNonRoot"] is True, where
        assert spec["securityContext"]["runAsUser"] != 0, where
        assert spec["automountServiceAccountToken"] is False, where
        for container in spec["containers"]:
            assert container["image"].startswith("gomodel-gateway:"), where
            security = container["securityContext"]
            assert security["allowPrivilegeEscalation"] is False, where
            assert security["readOnlyRootFilesystem"] is True, where
            assert security["capabilities"]["drop"] == ["ALL"], where


def test_the_settings_the_base_sets_pass_check_deploy(rendered: list[dict[str, Any]], tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
           **config_map(rendered, "gomodel-env")["data"], "DJANGO_SECRET_KEY": secrets.token_urlsafe(50)}
    env["GOMODEL_CONFIG"] = ""  # the mounted file does not exist here; `check` never applies it anyway
    done = subprocess.run([sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def release_migration(tmp_path: Path, suffix: str) -> dict[str, Any]:
    """The migration Job rendered through an overlay of a release, as docs/production.md describes one."""
    overlay = tmp_path / suffix
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(yaml.safe_dump({
        "resources": [os.path.relpath(MIGRATE, overlay)], "nameSuffix": suffix,
        "images": [{"name": "gomodel-gateway", "newName": "registry.example.com/gomodel-gateway",
                    "newTag": suffix.lstrip("-").replace("-", ".")}],
    }))
    (job,) = render(overlay)
    return job


def test_each_release_applies_a_migration_job_of_its_own(tmp_path: Path) -> None:
    first, second = release_migration(tmp_path, "-1-4-0"), release_migration(tmp_path, "-1-5-0")
    # A Job's pod template cannot change: the second release's image under the first one's name would be refused.
    assert first["metadata"]["name"] == "gomodel-migrate-1-4-0"
    assert second["metadata"]["name"] == "gomodel-migrate-1-5-0"
    assert second["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example.com/gomodel-gateway:1.5.0"
    # The secret it reads is the deployment's own, not renamed by the suffix.
    refs = {e["valueFrom"]["secretKeyRef"]["name"] for e in second["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert refs == {"gomodel-secrets"}


def test_the_example_migrates_with_the_image_it_rolls_out(example: list[dict[str, Any]]) -> None:
    (job,) = render(EXAMPLE / "migrate")
    assert job["metadata"]["name"] == "gomodel-migrate-1-4-0"
    assert not [o for o in example if o["kind"] == "Job"]
    gateway_image = one(example, "Deployment", "gomodel-gateway")["spec"]["template"]["spec"]["containers"][0]["image"]
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == gateway_image
    assert job["metadata"]["name"].endswith("-" + gateway_image.rsplit(":", 1)[1].replace(".", "-"))


def test_the_ingress_ends_tls_and_keeps_a_silent_stream_open(example: list[dict[str, Any]]) -> None:
    from django.conf import settings

    ingress = one(example, "Ingress", "gomodel-gateway")
    annotations = ingress["metadata"]["annotations"]
    # ingress-nginx's default read timeout (60 s between two reads) would cut a stream silent for longer; the
    # gateway ends a stream itself after GOMODEL_STREAM_IDLE_TIMEOUT, so the ingress must wait longer than that.
    for name in ("proxy-read-timeout", "proxy-send-timeout"):
        assert int(annotations[f"nginx.ingress.kubernetes.io/{name}"]) > settings.GOMODEL_STREAM_IDLE_TIMEOUT
    assert annotations["nginx.ingress.kubernetes.io/proxy-buffering"] == "off"
    body_limit = annotations["nginx.ingress.kubernetes.io/proxy-body-size"]
    assert body_limit.endswith("m")
    assert int(body_limit[:-1]) * 1024 * 1024 > settings.GOMODEL_MAX_BODY_BYTES
    (tls,) = ingress["spec"]["tls"]
    hosts = [rule["host"] for rule in ingress["spec"]["rules"]]
    assert tls["secretName"]
    assert tls["hosts"] == hosts
    env = config_map(example, "gomodel-env")["data"]
    assert env["DJANGO_ALLOWED_HOSTS"].split(",") == hosts
    assert env["DJANGO_HTTPS"] == "true"
    assert env["DJANGO_SECURE_PROXY_SSL_HEADER"] == "X-Forwarded-Proto"  # ingress-nginx sets it on every request


def test_the_ingress_routes_the_public_paths_to_the_gateway_and_no_probe_or_metrics(
    example: list[dict[str, Any]],
) -> None:
    ingress = one(example, "Ingress", "gomodel-gateway")
    service = one(example, "Service", "gomodel-gateway")
    (rule,) = ingress["spec"]["rules"]
    paths = rule["http"]["paths"]
    for entry in paths:
        backend = entry["backend"]["service"]
        assert backend["name"] == service["metadata"]["name"]
        assert backend["port"]["name"] in {port["name"] for port in service["spec"]["ports"]}

    def routed(path: str) -> bool:
        return any(path == p["path"] if p["pathType"] == "Exact"
                   else path == p["path"] or path.startswith(p["path"].rstrip("/") + "/") for p in paths)

    for public in ("/v1/chat/completions", "/v1/messages", "/admin/", "/audit/", "/static/admin/css/base.css", "/"):
        assert routed(public), public
    for internal in ("/metrics", "/health", "/health/ready"):
        assert not routed(internal), internal
