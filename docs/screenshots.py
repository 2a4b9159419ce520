"""Take the screenshots in README.md and docs/audit.md from the demo: ``.venv/bin/python docs/screenshots.py``.

Starts ``manage.py demo`` (the README's first command) on a fresh SQLite database of its own, sends it a few
dozen requests (easy and hard ones, a session that escalates, streams, tools, JSON mode, the Anthropic API) with
one scripted rate limit at the simulated provider so that a request falls back, and some from gateway keys of
two teams (made with ``manage.py createkey --team``), logs into the auditor pages as the demo's admin and saves
full-page PNGs over docs/audit-request.png, docs/audit-history.png, docs/audit-tuning.png and
docs/audit-spend.png. The browser is Debian's ``chromium`` package (``apt-get install chromium``) driven by
Playwright; the script stops on any console error, so a page that lost its styles or scripts is never saved.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx2
from playwright.sync_api import Page, sync_playwright

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SIMULATOR = "http://127.0.0.1:18001"  # the demo's simulator (routing/demo/demo.yaml)
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 900}

CODE = "```python\ndef total(items):\n    return sum(i.price for i in items) / len(items)\n```"
TRACE = ('Traceback (most recent call last):\n  File "shop.py", line 3, in total\n'
         "ZeroDivisionError: division by zero")
WEATHER_TOOL = {"type": "function", "function": {"name": "get_weather", "description": "Current weather",
                "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}
EASY = ["Hello! What can you do?", "Translate 'good morning' to French.", "Give me a name for a cat.",
        "What is the capital of Portugal?", "Summarise: the meeting moved to Tuesday.", "Thanks, that helps!",
        "Write a haiku about autumn.", "How many days are in a leap year?"]
HARD = [f"Think step by step: why does this fail on an empty cart?\n{CODE}\n{TRACE}",
        "Find the root cause: the nightly export doubles every invoice since the timezone change. " * 30,
        f"Refactor this for readability and explain each step.\n{CODE}",
        "Compare three designs for a rate limiter and think hard about their failure modes."]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def demo_env(workdir: Path) -> dict[str, str]:
    return dict(os.environ, DATABASE_URL=f"sqlite:///{workdir}/demo.sqlite3", AUDIT_SPOOL_DIR=str(workdir / "spool"))


def start_demo(port: int, workdir: Path) -> tuple[subprocess.Popen[str], str]:
    """``manage.py demo`` on a fresh database; the process and the admin password it printed."""
    env = demo_env(workdir)
    demo = subprocess.Popen([sys.executable, "manage.py", "demo", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, text=True)
    assert demo.stdout is not None
    password = None
    for line in demo.stdout:
        print(line, end="")
        found = re.search(r"user admin, password (\S+)", line)
        password = found.group(1) if found else password
        if "Press Ctrl-C to stop" in line:
            break
    if password is None or demo.poll() is not None:
        raise SystemExit(f"the demo did not start (exit status {demo.poll()})")
    # Keep reading its output so that the demo never blocks on a full pipe.
    threading.Thread(target=lambda: [print(line, end="") for line in demo.stdout or ()], daemon=True).start()
    return demo, password


def chat(client: httpx2.Client, content: str, **extra: Any) -> httpx2.Response:
    headers = extra.pop("headers", {})
    body = {"model": "normal", "messages": [{"role": "user", "content": content}], **extra}
    response = client.post("/v1/chat/completions", json=body, headers=headers)
    if response.status_code != 200:
        raise SystemExit(f"the demo answered {response.status_code}: {response.text[:300]}")
    return response


def send_traffic(client: httpx2.Client) -> str:
    """Requests of every kind; the id of a request that escalated its session and fell back once."""
    for i, text in enumerate(EASY * 2):
        chat(client, text, headers={"X-Session-Id": f"chat-{i % 5}"})
    for text in HARD:
        chat(client, text)
    # Between the two: each signal alone stays easy, two of them together escalate.
    chat(client, f"What does this do?\n{CODE}")
    chat(client, "What's the weather in Lisbon and in Porto?", tools=[WEATHER_TOOL])
    chat(client, "List three colours as JSON.", response_format={"type": "json_object"})
    chat(client, "Proofread this paragraph, please. " * 70)
    chat(client, "Which colours would suit this room? Answer as JSON. " * 45, response_format={"type": "json_object"})
    chat(client, "Tell me a short story.", stream=True)
    anthropic = client.post("/v1/messages", headers={"anthropic-version": "2023-06-01"},
                            json={"model": "normal", "max_tokens": 200,
                                  "messages": [{"role": "user", "content": "Hello from the Anthropic SDK"}]})
    if anthropic.status_code != 200:
        raise SystemExit(f"the demo answered {anthropic.status_code} on /v1/messages: {anthropic.text[:300]}")
    for attempt in range(10):
        session = {"X-Session-Id": f"checkout-bug-{attempt}"}
        chat(client, "Hi! I have a question about our shop's code.", headers=session)
        # The next call to gpt-5 is rate limited once: if the adaptive pick lands there, the request falls back.
        httpx2.post(f"{SIMULATOR}/_sim/faults", json={"model": "gpt-5", "fault": {"kind": "rate_limit", "times": 1}})
        hard = chat(client, HARD[0], headers=session)
        httpx2.delete(f"{SIMULATOR}/_sim/faults", params={"model": "gpt-5"})
        if hard.headers.get("x-gomodel-attempts") == "2":
            return hard.headers["x-request-id"]
    raise SystemExit("no hard request was routed to gpt-5 in ten tries")


# Keys of two teams, and how many easy and hard requests each sends (the spend page groups them).
TEAM_KEYS = {"platform": {"ci-bot": (6, 2), "web-app": (10, 1)}, "research": {"notebooks": (3, 4)}}


def create_team_keys(workdir: Path) -> dict[str, str]:
    """The teams and their keys in the demo's database; each key's secret by name."""
    env = dict(demo_env(workdir), GOMODEL_DEMO="true")  # the demo's settings, as `manage.py demo` sets them
    teams = "; ".join(f"Team.objects.create(name={team!r})" for team in TEAM_KEYS)
    subprocess.run([sys.executable, "manage.py", "shell", "-c", f"from routing.models import Team; {teams}"],
                   cwd=ROOT, env=env, check=True)
    secrets = {}
    for team, keys in TEAM_KEYS.items():
        for name in keys:
            done = subprocess.run([sys.executable, "manage.py", "createkey", name, "--team", team], cwd=ROOT, env=env,
                                  check=True, capture_output=True, text=True)
            secrets[name] = done.stdout.strip()
    return secrets


def send_team_traffic(client: httpx2.Client, secrets: dict[str, str]) -> None:
    """Easy and hard requests from each team's keys (once the gateway has loaded the new keys)."""
    deadline = time.monotonic() + 20
    for team_keys in TEAM_KEYS.values():
        for name, (easy, hard) in team_keys.items():
            auth = {"Authorization": f"Bearer {secrets[name]}"}
            texts = EASY[:easy] + HARD[:hard]
            for text in texts:
                body = {"model": "normal", "messages": [{"role": "user", "content": text}]}
                while (response := client.post("/v1/chat/completions", json=body, headers=auth)).status_code == 401:
                    if time.monotonic() > deadline:
                        raise SystemExit(f"the demo did not accept the new key {name}: {response.text[:300]}")
                    time.sleep(0.5)
                if response.status_code != 200:
                    raise SystemExit(f"the demo answered {response.status_code}: {response.text[:300]}")


def log_in(page: Page, base: str, password: str) -> None:
    page.goto(f"{base}/admin/login/?next=/audit/")
    page.fill("#id_username", "admin")
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_url(f"{base}/audit/")


def wait_for_page(page: Page, url: str, timeout: float = 20.0) -> None:
    """Open ``url`` once its audit revision is stored (the demo writes audit events every half second)."""
    deadline = time.monotonic() + timeout
    while (response := page.goto(url)) is None or response.status == 404:
        if time.monotonic() > deadline:
            raise SystemExit(f"{url} did not appear within {timeout:.0f}s")
        time.sleep(0.5)


def take_screenshots(base: str, password: str, request_id: str, only: list[str]) -> None:
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport=VIEWPORT, color_scheme="light").new_page()
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("pageerror", lambda error: problems.append(f"uncaught error: {error}"))
        log_in(page, base, password)
        wait_for_page(page, f"{base}/audit/requests/{request_id}/")
        shots = {"audit-request.png": f"{base}/audit/requests/{request_id}/", "audit-history.png": f"{base}/audit/",
                 "audit-tuning.png": f"{base}/audit/tuning/", "audit-spend.png": f"{base}/audit/spend/?group=team"}
        for name, url in shots.items():
            if only and name not in only:
                continue
            page.goto(url)
            if problems:
                raise SystemExit(f"{url}: " + "; ".join(problems))
            page.screenshot(path=str(DOCS / name), full_page=True)
            print(f"saved docs/{name}")
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0, help="the demo's port (default: a free one)")
    parser.add_argument("--only", action="append", default=[], metavar="NAME",
                        help="save only this PNG, such as audit-spend.png (repeatable; default: all)")
    args = parser.parse_args()
    port = args.port or free_port()
    base = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory(prefix="gomodel-screenshots-") as workdir:
        demo, password = start_demo(port, Path(workdir))
        try:
            with httpx2.Client(base_url=base, timeout=60) as client:
                request_id = send_traffic(client)
                send_team_traffic(client, create_team_keys(Path(workdir)))
            take_screenshots(base, password, request_id, args.only)
        finally:
            demo.send_signal(signal.SIGINT)  # the demo stops its gateway and simulator on Ctrl-C
            demo.wait(timeout=30)


if __name__ == "__main__":
    main()
