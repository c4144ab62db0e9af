"""The lab in a container (seed 000: ``docker compose up --build`` → the lab on 8089).

No container engine runs here or in CI, and the docker CLI on a developer's machine may lack
the compose plugin, so the files are checked without one, as far as that goes:

* every compose file of the repository validates against a schema of the Compose keys we use
  (``compose_schema.py`` beside this test, written from the Compose Specification: closed
  objects, typed values), and what the lab's service names exists: the Dockerfile, the build
  context, every ``MCP_TEST_*`` variable, the default port;
* the Dockerfile is parsed with dockerfile-parse (Red Hat's parser, the one OSBS builds
  with): slim Python bases, a non-root user, the entry point is the installed
  ``mcp-lab-server`` with arguments its own parser accepts, the exposed port is the lab's
  default, and the HEALTHCHECK's command is *run* here against a real lab (and against a
  closed port, where it must fail).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from dockerfile_parse import DockerfileParser

from labserver.__main__ import build_parser
from labserver.settings import settings_from_env as load_settings
from tests.deploy.compose_schema import COMPOSE_FILE as SCHEMA
from tests.support.lab import LabServer

REPO = Path(__file__).resolve().parents[2]
ROOT_COMPOSE = REPO / "compose.yaml"
LAB_COMPOSE = REPO / "deploy" / "compose" / "lab.yaml"
DOCKERFILE = REPO / "deploy" / "compose" / "lab.Dockerfile"
COMPOSE_FILES = [ROOT_COMPOSE, LAB_COMPOSE, REPO / "deploy" / "compose" / "compose.yaml"]
SEED_PORT = 8089


def load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


@pytest.mark.parametrize("path", COMPOSE_FILES, ids=lambda p: str(p.relative_to(REPO)))
def test_compose_files_follow_the_compose_specification(path: Path) -> None:
    jsonschema.Draft7Validator(SCHEMA).validate(load(path))


def test_the_schema_check_catches_a_broken_file() -> None:
    broken = load(LAB_COMPOSE)
    broken["services"]["lab"]["healthcheck"] = {"test": "x", "interval": 5, "bogus": True}
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(SCHEMA).validate(broken)
    misplaced = load(LAB_COMPOSE)
    misplaced["services"]["lab"]["healthcheck"] = {"test": "x", "interval": "5"}  # no unit
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(SCHEMA).validate(misplaced)
    typo = load(LAB_COMPOSE)
    typo["services"]["lab"]["port"] = typo["services"]["lab"].pop("ports")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft7Validator(SCHEMA).validate(typo)


def test_docker_compose_up_at_the_root_starts_the_lab() -> None:
    assert load(ROOT_COMPOSE)["include"] == ["deploy/compose/lab.yaml"]
    lab = load(LAB_COMPOSE)["services"]["lab"]
    context = (LAB_COMPOSE.parent / lab["build"]["context"]).resolve()
    assert context == REPO
    assert (context / lab["build"]["dockerfile"]).resolve() == DOCKERFILE
    assert lab["ports"] == ["127.0.0.1:${MCP_TEST_PORT:-8089}:${MCP_TEST_PORT:-8089}"]
    environment = lab["environment"]
    defaults = {
        name: re.fullmatch(r"\$\{" + name + r":-(.*)\}", value).group(1)  # type: ignore[union-attr]
        for name, value in environment.items()
    }
    settings_source = (REPO / "labserver" / "settings.py").read_text()
    for name in defaults:
        assert f'"{name}"' in settings_source, f"{name} is no lab setting"
    # The defaults written in the compose file are the lab's own.
    settings = load_settings(defaults)
    assert settings == load_settings({}), "a compose default differs from the lab's"
    assert settings.port == SEED_PORT


def _dockerfile() -> DockerfileParser:
    return DockerfileParser(path=str(DOCKERFILE), cache_content=True)


def _final_stage(parser: DockerfileParser) -> list[dict[str, Any]]:
    structure: list[dict[str, Any]] = parser.structure
    starts = [i for i, item in enumerate(structure) if item["instruction"] == "FROM"]
    return structure[starts[-1] :]


def _exec_form(value: str) -> list[str]:
    words: list[str] = json.loads(value)
    return words


def test_dockerfile_slim_base_non_root_user_and_entry_point() -> None:
    parser = _dockerfile()
    assert parser.parent_images and all(
        re.fullmatch(r"python:3\.\d+-slim", image) for image in parser.parent_images
    )
    final = _final_stage(parser)
    users = [item["value"] for item in final if item["instruction"] == "USER"]
    assert users and users[-1] not in ("0", "root"), "the lab runs as a non-root user"
    entry = [_exec_form(i["value"]) for i in final if i["instruction"] == "ENTRYPOINT"]
    assert len(entry) == 1
    program, *arguments = entry[0]
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert program == "mcp-lab-server" and program in scripts
    parsed = build_parser(load_settings({})).parse_args(arguments)
    assert parsed.host == "0.0.0.0"  # inside the container; published on loopback only
    exposed = [i["value"] for i in final if i["instruction"] == "EXPOSE"]
    assert exposed == [str(SEED_PORT)]
    assert parser.envs["MCP_TEST_PORT"] == str(SEED_PORT)


def _healthcheck_command() -> list[str]:
    lines = [i["value"] for i in _final_stage(_dockerfile()) if i["instruction"] == "HEALTHCHECK"]
    assert len(lines) == 1
    options, _, command = lines[0].partition("CMD")
    assert "--interval=" in options and "--retries=" in options
    words = _exec_form(command.strip())
    assert words[0] == "python"
    return [sys.executable, *words[1:]]


def test_the_healthcheck_asks_the_lab_for_healthz() -> None:
    command = _healthcheck_command()
    assert "/healthz" in " ".join(command)
    with LabServer() as lab:
        env = {"MCP_TEST_PORT": str(lab.port), "PATH": "/usr/bin:/bin"}
        healthy = subprocess.run(command, env=env, capture_output=True, timeout=30)
        assert healthy.returncode == 0, healthy.stderr
        port = lab.port
    # The same port once the lab is gone: the check fails, so the container shows unhealthy.
    env = {"MCP_TEST_PORT": str(port), "PATH": "/usr/bin:/bin"}
    unhealthy = subprocess.run(command, env=env, capture_output=True, timeout=30)
    assert unhealthy.returncode != 0
