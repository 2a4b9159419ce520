"""deploy/Dockerfile, read as text (no container daemon here): multi-stage, its command is exactly the README's
production command, it runs as a non-root user, and its health check asks /health/ready."""

from __future__ import annotations

import json
import re
import shlex

from tests.gateway_process import ROOT

DOCKERFILE = ROOT / "deploy" / "Dockerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments left out."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            found.append((word.upper(), rest.strip()))
    return found


def readme_production_command() -> list[str]:
    section = (ROOT / "README.md").read_text().split("## Production set-up", 1)[1]
    recipe = re.search(r"```bash\n(.*?)```", section, re.S)
    assert recipe is not None
    (line,) = [line for line in recipe.group(1).splitlines() if "granian" in line]
    words = shlex.split(line, comments=True)
    while "=" in words[0]:  # GOMODEL_CONFIG=... in front: the image sets it through the environment
        words.pop(0)
    return words


def test_the_command_is_the_readmes_production_command() -> None:
    (cmd,) = [args for word, args in instructions() if word == "CMD"]
    command = json.loads(cmd)
    assert command == readme_production_command()
    assert command[:3] == ["granian", "--interface", "asgi"]


def test_it_is_multi_stage_and_runs_as_a_non_root_user() -> None:
    steps = instructions()
    stages = [args for word, args in steps if word == "FROM"]
    assert len(stages) >= 2
    assert any(args.startswith("--from=") for word, args in steps if word == "COPY")
    users = [args for word, args in steps if word == "USER"]
    assert users, "no USER: the image would run as root"
    user = users[-1].split(":")[0]
    assert user.isdigit(), "a numeric user, so that Kubernetes' runAsNonRoot can check it"
    assert int(user) != 0
    # The user comes after the last FROM (a USER in the build stage does not carry over).
    last_from = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    assert max(i for i, (word, _) in enumerate(steps) if word == "USER") > last_from


def test_it_ships_the_templates_and_collects_static_files_at_build_time() -> None:
    steps = instructions()
    copied = " ".join(args for word, args in steps if word == "COPY")
    for tree in ("gomodel_site", "routing", "audit", "manage.py"):
        assert tree in copied, tree
    # The templates travel inside gomodel_site, which is copied whole.
    assert (ROOT / "gomodel_site" / "templates" / "admin" / "base_site.html").is_file()
    assert any("collectstatic" in args for word, args in steps if word == "RUN")
    env = " ".join(args for word, args in steps if word == "ENV")
    assert "DJANGO_STATIC_ROOT=/app/static" in env


def test_its_health_check_asks_for_readiness() -> None:
    (check,) = [args for word, args in instructions() if word == "HEALTHCHECK"]
    assert "http://127.0.0.1:8000/health/ready" in check
