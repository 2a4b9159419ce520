"""manage.py demo: the whole gateway on one machine, with simulated providers and no API key needed.

Migrates the database (SQLite unless DATABASE_URL says otherwise), collects the static files the admin needs
(once, and again only when they change), loads the demo configuration (an easy/hard tier route over adaptive
virtual models), starts the provider simulator and the gateway on 127.0.0.1, prints how to call it, and stops
both on Ctrl-C.

Both ports are options (``--port``, ``--simulator-port``; 0 picks a free simulator port), so two demos can run on
one host: the simulator starts first and the configuration is loaded with its address. Two demos from one
checkout need a database each (``DATABASE_URL``), or the second one's configuration replaces the first one's.
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx2
import yaml
from django.conf import settings
from django.contrib.auth.models import User
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser

from routing.management.collect_static import collect_static_when_changed
from routing.simulator import SimulatorProcess, start_simulator_process

DEMO_CONFIG = Path(__file__).resolve().parents[2] / "demo" / "demo.yaml"
SIMULATOR_PORT = 18001  # the default; the demo configuration's providers are pointed at the port actually used
CONFIG_SIMULATOR = "http://127.0.0.1:18001"  # the simulator address written in DEMO_CONFIG


class Command(BaseCommand):
    help = "Run the gateway with simulated providers on 127.0.0.1 (no API key needed)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000, help="Gateway port (default 8000).")
        parser.add_argument("--simulator-port", type=int, default=SIMULATOR_PORT,
                            help=f"Port of the simulated providers (default {SIMULATOR_PORT}; 0 picks a free one).")
        parser.add_argument("--check", action="store_true",
                            help="Start everything, send one request, and exit (for CI and smoke tests).")

    def handle(self, *args: Any, **options: Any) -> None:
        port, simulator_port = options["port"], options["simulator_port"]
        for option, value in (("--port", port), ("--simulator-port", simulator_port)):
            if not 0 <= value <= 65535:
                raise CommandError(f"{option}: {value} is not a port (0-65535)")
        if port == 0:
            raise CommandError("--port: give the gateway a port of its own (0 is for --simulator-port only)")
        # The simulator accepts any key; the providers reference this variable like a real deployment would
        # (not a GOMODEL_ name: those are reserved for the gateway's own settings).
        os.environ.setdefault("DEMO_PROVIDER_KEY", "demo-" + secrets.token_hex(8))
        Path(settings.VAR_DIR).mkdir(parents=True, exist_ok=True)
        call_command("migrate", verbosity=0)
        # The gateway serves the collected files itself, as in production: hashed names, gzip and Brotli.
        if collect_static_when_changed():
            self.stdout.write(f"Static files collected into {settings.STATIC_ROOT}")
        try:
            simulator = start_simulator_process(simulator_port, ready_timeout=60)
        except RuntimeError:
            raise CommandError(f"the simulator could not listen on 127.0.0.1:{simulator_port} (see above); "
                               f"--simulator-port 0 picks a free port") from None
        gateway: subprocess.Popen[bytes] | None = None
        try:
            self._load_config(simulator.base_url)
            password = self._admin_password()
            # The gateway's var/ and relative paths are the demo's own (settings.RUN_DIR), installed or not.
            root = Path(settings.RUN_DIR)
            # No key needed: the gateway serves clients on this machine without one (and says so in its log).
            env = dict(os.environ, PYTHONUNBUFFERED="1", GOMODEL_AUTH="open")
            gateway = subprocess.Popen(  # noqa: S603 - this interpreter, fixed arguments
                # The production server (README), one worker: the same limits on what a client may send (a header
                # section past granian's HTTP/1 buffer is a 431), the same lifespan.
                [sys.executable, "-m", "granian", "--interface", "asgi", "--workers", "1", "--host", "127.0.0.1",
                 "--port", str(port), "--log-level", "warning", "gomodel_site.asgi:application"],
                cwd=root, env=env,
            )
            self._wait_ready(f"http://127.0.0.1:{port}/health/ready", gateway, "gateway")
            self._print_instructions(port, password, simulator.base_url)
            if options["check"]:
                self._smoke(port)
                return
            while simulator.poll() is None and gateway.poll() is None:
                time.sleep(0.5)
            raise CommandError("a demo process stopped; see its output above")
        except KeyboardInterrupt:
            self.stdout.write("\nStopping the demo.")
        finally:
            self._stop(gateway, simulator)

    def _load_config(self, simulator_url: str) -> None:
        """Load the demo configuration with its providers pointed at the simulator that was started."""
        config = yaml.safe_load(DEMO_CONFIG.read_text())
        for provider in config["providers"]:
            provider["base_url"] = provider["base_url"].replace(CONFIG_SIMULATOR, simulator_url, 1)
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", dir=Path(settings.VAR_DIR),
                                         prefix="demo-config-") as file:
            yaml.safe_dump(config, file, sort_keys=False)
            file.flush()
            call_command("loadconfig", file.name, stdout=self.stdout)

    @staticmethod
    def _admin_password() -> str:
        password = secrets.token_urlsafe(9)
        user, _ = User.objects.get_or_create(username="admin", defaults={"is_staff": True, "is_superuser": True})
        user.is_staff = user.is_superuser = True
        user.set_password(password)
        user.save()
        return password

    @staticmethod
    def _stop(gateway: subprocess.Popen[bytes] | None, simulator: SimulatorProcess) -> None:
        if gateway is not None and gateway.poll() is None:
            gateway.send_signal(signal.SIGTERM)
        if gateway is not None:
            try:
                gateway.wait(timeout=10)
            except subprocess.TimeoutExpired:
                gateway.kill()
        simulator.stop()

    def _wait_ready(self, url: str, process: subprocess.Popen[bytes], name: str) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise CommandError(f"the {name} exited with status {process.returncode}")
            try:
                if httpx2.get(url, timeout=1).status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            time.sleep(0.2)
        raise CommandError(f"the {name} did not become ready at {url}")

    def _smoke(self, port: int) -> None:
        response = httpx2.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"model": "normal", "messages": [{"role": "user", "content": "Hello!"}]},
            timeout=30,
        )
        if response.status_code != 200:
            raise CommandError(f"the demo request failed with {response.status_code}: {response.text[:300]}")
        streamed = httpx2.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json={"model": "normal", "stream": True, "messages": [{"role": "user", "content": "Stream, please"}]},
            timeout=30,
        )
        if streamed.status_code != 200 or not streamed.text.rstrip().endswith("data: [DONE]"):
            raise CommandError(f"the demo stream failed with {streamed.status_code}: {streamed.text[-300:]}")
        responses = httpx2.post(
            f"http://127.0.0.1:{port}/v1/responses",
            json={"model": "normal", "input": "Hello from the Responses API!", "store": False},
            timeout=30,
        )
        if responses.status_code != 200 or responses.json().get("status") != "completed":
            raise CommandError(f"the demo Responses request failed with {responses.status_code}: "
                               f"{responses.text[:300]}")
        for model in ("sim-cohere/command-a-03-2025", "sim-bedrock/amazon.nova-lite-v1:0"):
            other = httpx2.post(f"http://127.0.0.1:{port}/v1/chat/completions", timeout=30,
                                json={"model": model, "messages": [{"role": "user", "content": "Hello!"}]})
            if other.status_code != 200:
                raise CommandError(f"the demo request to {model} failed with {other.status_code}: {other.text[:300]}")
        stylesheets = self._check_stylesheets(port)
        self.stdout.write(
            f"demo check passed: {response.headers.get('x-gomodel-target')} answered, "
            f"{streamed.headers.get('x-gomodel-target')} streamed, {stylesheets} admin stylesheets served"
        )

    def _check_stylesheets(self, port: int) -> int:
        """Fetch every stylesheet the admin's login page links; how many there are."""
        login = httpx2.get(f"http://127.0.0.1:{port}/admin/login/", timeout=30)
        if login.status_code != 200:
            raise CommandError(f"the admin login page failed with {login.status_code}")
        links = re.findall(r'<link rel="stylesheet" href="([^"]+)"', login.text)
        if not links:
            raise CommandError("the admin login page links no stylesheet")
        for link in links:
            sheet = httpx2.get(f"http://127.0.0.1:{port}{link}", timeout=30)
            if sheet.status_code != 200 or not sheet.headers.get("content-type", "").startswith("text/css"):
                raise CommandError(f"the stylesheet {link} answered {sheet.status_code}")
        return len(links)

    def _print_instructions(self, port: int, password: str, simulator_url: str) -> None:
        base = f"http://127.0.0.1:{port}"
        self.stdout.write(f"""
The gateway is running at {base}, its simulated providers at {simulator_url}.
No API key is needed from this machine (GOMODEL_AUTH=open): a key the gateway does not know is not
checked, and every answer served that way says X-GoModel-Auth: open. A key it knows is checked (its models,
limits, team and audit apply); create one while the demo runs, from any terminal:

  {createkey_command("my-app")}

  curl {base}/v1/chat/completions -H 'content-type: application/json' \\
    -d '{{"model": "normal", "messages": [{{"role": "user", "content": "Hello!"}}]}}' -i

  python3 -c "from openai import OpenAI; c = OpenAI(base_url='{base}/v1', api_key='unused'); \\
print(c.chat.completions.create(model='normal', messages=[{{'role': 'user', 'content': 'Hi'}}]).choices[0].message)"

  Streaming:  add "stream": true to the body (curl -N), or stream=True with the SDK.
  Responses:  curl {base}/v1/responses -H 'content-type: application/json' -d '{{"model": "normal", "input": "Hi"}}'
  Others:     the models sim-cohere/command-a-03-2025 (Cohere) and sim-bedrock/amazon.nova-lite-v1:0 (Bedrock)
  Explain:    curl {base}/v1/routing/explain -H 'content-type: application/json' -d '{{"model": "normal", \\
"messages": [{{"role": "user", "content": "Think step by step: why does this fail?"}}]}}'
  Models:     curl {base}/v1/models
  Metrics:    {base}/metrics
  Admin:      {base}/admin/   user admin, password {password}
  Auditors:   {base}/audit/

Press Ctrl-C to stop.
""")


def createkey_command(name: str) -> str:
    """A shell command that creates a key in this demo's database: the program that started the demo (manage.py
    or the installed ``gomodel``), with the environment it needs.

    The demo may run on the public fallback secret key only because it sets GOMODEL_DEMO (manage.py does so for
    ``demo`` alone): any other command against its database needs it too, or production's refusal to start without
    DJANGO_SECRET_KEY stops it. The database is named explicitly, since an installed gateway's default SQLite file
    is relative to the folder it runs in.
    """
    env = ["GOMODEL_DEMO=true"]  # a key's stored form is a plain SHA-256: the secret key it runs on does not matter
    database = settings.DATABASES["default"]
    if database["ENGINE"].endswith("sqlite3"):
        path = "/" + str(database["NAME"]).lstrip("/")  # absolute (settings made it so), one leading slash
        env.append(f"DATABASE_URL={shlex.quote('sqlite:///' + path)}")
    elif urlparse(settings.DATABASE_URL).password:
        env.append('DATABASE_URL="$DATABASE_URL"')  # the demo's own, from the environment: never printed
    else:
        env.append(f"DATABASE_URL={shlex.quote(settings.DATABASE_URL)}")
    program = Path(sys.argv[0])
    if program.suffix == ".py" and program.is_file():  # python manage.py demo
        command = [sys.executable, str(program.resolve())]
    elif program.is_file():  # the gomodel console script
        command = [str(program.resolve())]
    else:
        command = [sys.executable, "-m", "gomodel_site.cli"]
    return " ".join([*env, *(shlex.quote(part) for part in command), "createkey", shlex.quote(name)])
