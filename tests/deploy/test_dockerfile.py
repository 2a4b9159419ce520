"""deploy/Dockerfile, read as text (no container daemon here): multi-stage, the project's wheel built in the first
stage and installed with nothing of the source tree in the last, its command exactly the README's production
command, a non-root user, and a health check that asks /health/ready."""

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


def stages() -> list[list[tuple[str, str]]]:
    """The instructions of each stage, FROM first."""
    found: list[list[tuple[str, str]]] = []
    for step in instructions():
        if step[0] == "FROM":
            found.append([])
        if found:
            found[-1].append(step)
    return found


def test_the_build_stage_builds_and_installs_the_projects_wheel() -> None:
    build = stages()[0]
    runs = [args for word, args in build if word == "RUN"]
    (wheel,) = [args for args in runs if "pip wheel" in args]
    assert re.search(r"pip wheel --no-deps \. -w (\S+)\s+&&\s+pip install --no-deps \1/\*\.whl", wheel), wheel
    copied = " ".join(args for word, args in build if word == "COPY")
    for tree in ("pyproject.toml", "README.md", "gomodel_site", "routing", "audit"):  # what the wheel is built from
        assert tree in copied, tree
    assert "manage.py" not in copied
    # The static files are collected by the installed command, from a folder without the source tree.
    (collect,) = [args for args in runs if "collectstatic" in args]
    assert re.search(r"\bgomodel collectstatic --noinput", collect)
    workdirs = [args for word, args in build if word == "WORKDIR"]
    assert workdirs[-1] == "/"


def test_the_runtime_stage_holds_the_installed_wheel_and_the_static_files_and_no_source_tree() -> None:
    runtime = stages()[-1]
    copies = [args for word, args in runtime if word in ("COPY", "ADD")]
    assert sorted(copies) == ["--from=build /app/static /app/static", "--from=build /opt/venv /opt/venv"]
    env = " ".join(args for word, args in runtime if word == "ENV")
    assert "DJANGO_STATIC_ROOT=/app/static" in env
    assert "PYTHONPATH" not in env, "the package is imported from site-packages, not from a tree on the path"
    assert all("manage.py" not in args for _word, args in runtime)
    # The templates travel inside the packages, so the wheel carries them (tests/deploy/test_installed_package.py
    # builds it and looks).
    assert (ROOT / "gomodel_site" / "templates" / "admin" / "base_site.html").is_file()


def test_its_health_check_asks_for_readiness() -> None:
    (check,) = [args for word, args in instructions() if word == "HEALTHCHECK"]
    assert "http://127.0.0.1:8000/health/ready" in check
