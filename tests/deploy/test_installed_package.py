"""The gateway installed from its wheel, run from a folder outside the checkout.

The wheel is built from a copy of the source tree (what ``pip install .`` builds) and installed into a virtual
environment of its own with no dependencies; the dependencies come from this test run's environment through a
``.pth`` line, so nothing is downloaded. Every command then runs with the installed package alone on the path:
``gomodel check``, ``gomodel migrate`` and ``collectstatic``, the gateway serving the admin and an auditor page
with their stylesheets, a Celery worker logging at INFO with no ``--loglevel``, and beat keeping its schedule
under ``var/`` of the folder it runs in.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
import time
import uuid
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

from tests.gateway_process import ROOT, free_port

pytestmark = [pytest.mark.slow, pytest.mark.services]

SOURCES = ("pyproject.toml", "README.md", "gomodel_site", "routing", "audit")
REDIS_BROKER = "redis://127.0.0.1:6379/0"


@dataclass(frozen=True)
class Installed:
    wheel: Path
    python: Path  # the fresh environment's interpreter
    bin: Path
    run_dir: Path  # an empty folder outside the checkout, where every command runs

    def env(self, **extra: str) -> dict[str, str]:
        """Only what a deployment sets: no PYTHONPATH, no test settings."""
        return {"PATH": f"{self.bin}:/usr/bin:/bin", "HOME": str(self.run_dir), "LANG": "C.UTF-8",
                "DJANGO_SECRET_KEY": "s" * 50, "DATABASE_URL": f"sqlite:///{self.run_dir}/gateway.sqlite3",
                "PYTHONUNBUFFERED": "1", **extra}

    def run(self, *args: str, timeout: float = 120, **extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(args, cwd=self.run_dir, env=self.env(**extra), capture_output=True, text=True,
                              timeout=timeout, check=False)


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("installed")
    source = base / "source"
    source.mkdir()
    for name in SOURCES:
        path = ROOT / name
        if path.is_dir():
            shutil.copytree(path, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(path, source / name)
    wheels = base / "wheels"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(wheels), str(source)],
                           capture_output=True, text=True, timeout=300, check=False)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = wheels.glob("gomodel_gateway-*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    python = venv / "bin" / "python"
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                           str(wheel)], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    # The dependencies, from this run's environment, after the new environment's own site-packages: the wheel's
    # packages are found first, and the checkout (an editable install there) is never on the path.
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    Path(purelib, "dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run_dir = base / "run"
    run_dir.mkdir()
    return Installed(wheel=wheel, python=python, bin=venv / "bin", run_dir=run_dir)


def test_the_wheel_carries_the_templates_the_static_files_and_the_gomodel_command(installed: Installed) -> None:
    names = zipfile.ZipFile(installed.wheel).namelist()
    for template in ("gomodel_site/templates/admin/base_site.html", "gomodel_site/templates/admin/dashboard.html",
                     "gomodel_site/templates/audit/history.html", "gomodel_site/templates/audit/revision.html"):
        assert template in names
    assert "routing/static/routing/playground.js" in names
    assert "routing/demo/demo.yaml" in names
    assert not [name for name in names if name.startswith("tests/")]
    (entry_points,) = [name for name in names if name.endswith(".dist-info/entry_points.txt")]
    assert "gomodel = gomodel_site.cli:main" in zipfile.ZipFile(installed.wheel).read(entry_points).decode()


def test_the_package_imported_is_the_installed_one(installed: Installed) -> None:
    done = installed.run(str(installed.python), "-c", "import gomodel_site, routing; print(gomodel_site.__file__); "
                         "print(routing.__file__)")
    assert done.returncode == 0, done.stderr
    for line in done.stdout.splitlines():
        assert line.startswith(str(installed.bin.parent)), line
        assert not line.startswith(str(ROOT)), line


def test_gomodel_check_passes_outside_the_checkout(installed: Installed) -> None:
    done = installed.run(str(installed.bin / "gomodel"), "check", "--fail-level", "WARNING")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout


@pytest.fixture(scope="module")
def served(installed: Installed) -> Iterator[str]:
    """The installed gateway, migrated and its static files collected, served on a free port; its base URL."""
    gomodel = str(installed.bin / "gomodel")
    for command in (["migrate", "--noinput"], ["collectstatic", "--noinput", "-v0"]):
        done = installed.run(gomodel, *command)
        assert done.returncode == 0, done.stdout + done.stderr
    done = installed.run(gomodel, "createsuperuser", "--noinput", "--username", "operator", "--email",
                         "operator@example.com", DJANGO_SUPERUSER_PASSWORD="installed-" + "p" * 20)
    assert done.returncode == 0, done.stdout + done.stderr
    port = free_port()
    log = installed.run_dir / "gateway.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(
            [str(installed.python), "-m", "granian", "--interface", "asgi", "--workers", "1", "--host", "127.0.0.1",
             "--port", str(port), "--log-level", "warning", "gomodel_site.asgi:application"],
            cwd=installed.run_dir, env=installed.env(), stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, log.read_text()
            try:
                if httpx2.get(f"{base}/health/ready", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield base
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def test_the_admin_and_the_auditor_pages_render_from_site_packages(installed: Installed, served: str) -> None:
    with httpx2.Client(base_url=served, timeout=30) as client:
        login = client.get("/admin/login/")
        assert login.status_code == 200
        stylesheets = re.findall(r'<link rel="stylesheet" href="([^"]+)"', login.text)
        assert stylesheets
        for href in stylesheets:
            sheet = client.get(href)
            assert sheet.status_code == 200, href
            assert sheet.headers["content-type"].startswith("text/css")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login.text)
        assert token is not None
        signed_in = client.post("/admin/login/?next=/admin/", data={
            "csrfmiddlewaretoken": token.group(1), "username": "operator", "password": "installed-" + "p" * 20,
        }, headers={"Referer": f"{served}/admin/login/"})
        assert signed_in.status_code == 302, signed_in.text[:500]
        dashboard = client.get("/admin/")
        assert dashboard.status_code == 200
        assert "/audit/" in dashboard.text  # the project's dashboard template, not Django's app list alone
        history = client.get("/audit/")
        assert history.status_code == 200
        assert "<h1" in history.text
        assert (installed.run_dir / "var" / "static").is_dir()  # collectstatic wrote under the working folder


def test_the_worker_logs_at_info_with_no_loglevel_given(installed: Installed) -> None:
    queue = f"installed-test-{uuid.uuid4().hex[:12]}"  # a queue of its own: it takes no other test's task
    log = installed.run_dir / f"{queue}.log"
    with open(log, "wb") as out:
        worker = subprocess.Popen(
            [str(installed.python), "-m", "celery", "-A", "gomodel_site", "worker", "-P", "solo", "-Q", queue,
             "-n", f"{queue}@%h", "--without-gossip", "--without-mingle"],
            cwd=installed.run_dir, env=installed.env(CELERY_BROKER_URL=REDIS_BROKER), stdout=out,
            stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while b" ready." not in log.read_bytes() and worker.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        text = log.read_text()
        assert re.search(r"INFO/MainProcess\] Connected to redis://", text), text[-2000:]
        assert re.search(r"INFO/MainProcess\] .*ready\.", text), text[-2000:]
    finally:
        worker.terminate()
        worker.wait(timeout=30)


def test_beat_keeps_its_schedule_under_var_of_its_folder(installed: Installed, tmp_path: Path) -> None:
    log = tmp_path / "beat.log"
    schedule = installed.run_dir / "var" / "celerybeat-schedule"
    with open(log, "wb") as out:
        beat = subprocess.Popen([str(installed.python), "-m", "celery", "-A", "gomodel_site", "beat"],
                                cwd=installed.run_dir, env=installed.env(CELERY_BROKER_URL=REDIS_BROKER),
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not list(schedule.parent.glob("celerybeat-schedule*")) and time.monotonic() < deadline:
            assert beat.poll() is None, log.read_text()
            time.sleep(0.2)
        assert list(schedule.parent.glob("celerybeat-schedule*")), log.read_text()
        while "beat: Starting..." not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        text = log.read_text()
        assert f"db -> {schedule}" in text
        assert "INFO/MainProcess] beat: Starting..." in text  # INFO by default, as the worker
    finally:
        beat.terminate()
        beat.wait(timeout=30)
    assert not list(installed.run_dir.glob("celerybeat-schedule*"))

