"""deploy/compose/compose.yaml and deploy/systemd/mcpsubd@.service cannot drift from mcpsubd.

Neither is run here (no Docker engine, no systemd as PID 1), so every command, flag and
environment variable they hand to mcpsubd goes through mcpsubd's own argument parser and
settings loader, and every port, path and endpoint they name is checked against what the
daemon really serves. A renamed flag, setting or route fails this test instead of a deploy.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from service.api.routes import system
from service.daemon import main as daemon_main
from service.daemon.config import Settings, load_settings
from service.daemon.exitcodes import EXIT_CONFIG
from service.http.guard import UNAUTHENTICATED_PATHS
from tests.deploy.test_unit_files import parse_unit

REPO = Path(__file__).resolve().parents[2]
COMPOSE = REPO / "deploy" / "compose" / "compose.yaml"
TEMPLATE = REPO / "deploy" / "systemd" / "mcpsubd@.service"
SETTINGS = {f.name for f in dataclasses.fields(Settings)}
PASSWORD = "s3cret-for-the-test"


def settings_of(argv: list[str], env: dict[str, str]) -> tuple[Any, Settings]:
    """What mcpsubd would run with: its parser, then its settings loader (flags over env)."""
    args = daemon_main.build_parser().parse_args(argv)
    for name in env:
        if name.startswith("MCPSUB_"):
            setting = name.removeprefix("MCPSUB_").lower()
            assert setting in SETTINGS, f"{name} is no mcpsubd setting"
    flags = {
        "state_dir": args.state_dir,
        "api": args.api,
        "database_url": args.database_url,
        "log_level": args.log_level,
        "log_format": args.log_format,
    }
    return args, load_settings(flags, env=env, config_file=args.config)


def test_the_daemon_reads_its_command_line_as_this_test_does() -> None:
    """The flags dict above mirrors mcpsubd's own; a new flag shows up here first."""
    source = Path(daemon_main.__file__).read_text()
    for name in ("state_dir", "api", "database_url", "log_level", "log_format"):
        assert f'"{name}": args.{name}' in source
    options = {
        option for action in daemon_main.build_parser()._actions for option in action.option_strings
    }
    assert options == {
        "-h", "--help", "--to", "--state-dir", "--api", "--database-url", "--config",
        "--log-level", "--log-format", "--version",
    }  # fmt: skip


# ---- compose --------------------------------------------------------------------------------
def substitute(value: str) -> str:
    """Compose's ``${VAR:?message}`` interpolation, with the password the operator sets."""
    return re.sub(r"\$\{POSTGRES_PASSWORD(:\?[^}]*)?\}", PASSWORD, value)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())  # resolves the x-replica anchors and merges
    assert isinstance(data, dict)
    return data


def replicas(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {name: s for name, s in compose["services"].items() if name.startswith("mcpsubd-")}


def env_of(service: dict[str, Any]) -> dict[str, str]:
    return {k: substitute(str(v)) for k, v in service.get("environment", {}).items()}


def test_compose_runs_three_replicas_that_mcpsubd_accepts(compose: dict[str, Any]) -> None:
    found = replicas(compose)
    assert len(found) == 3
    ids, ports, volumes = set(), set(), set()
    for name, service in found.items():
        args, settings = settings_of(service["command"], env_of(service))
        assert args.command == "run"
        assert settings.database_url.startswith("postgresql://")
        assert settings.replica_id == name, "each replica names itself"
        assert settings.lease_ttl_s > 0
        api = urlsplit(settings.api)
        assert api.scheme == "tcp" and api.hostname == "127.0.0.1" and api.port
        ids.add(settings.replica_id)
        ports.add(api.port)
        [volume] = service["volumes"]
        source, _, target = volume.partition(":")
        assert target == str(settings.state_dir), "the state volume is the state dir"
        assert source in compose["volumes"]
        volumes.add(source)
        assert service["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    assert len(ids) == len(ports) == len(volumes) == 3, "ids, API ports and state: one each"


def test_compose_migrate_job_and_database_url_match_postgres(compose: dict[str, Any]) -> None:
    services = compose["services"]
    migrate = services["migrate"]
    args, settings = settings_of(migrate["command"], env_of(migrate))
    assert args.command == "migrate"
    assert migrate["depends_on"]["postgres"]["condition"] == "service_healthy"
    postgres = services["postgres"]
    command = postgres["command"]
    assert command[0] == "postgres"
    assert "listen_addresses=127.0.0.1" in command
    assert "pg_isready" in postgres["healthcheck"]["test"]
    url = urlsplit(settings.database_url)
    pg_env = postgres["environment"]
    assert (url.hostname, url.port or 5432) == ("127.0.0.1", 5432)
    assert url.username == pg_env["POSTGRES_USER"]
    assert url.path.lstrip("/") == pg_env["POSTGRES_DB"]
    assert url.password == PASSWORD == substitute(pg_env["POSTGRES_PASSWORD"])
    assert postgres["network_mode"] == "host" == migrate["network_mode"], "127.0.0.1 is shared"


def test_compose_image_runs_the_mcpsubd_this_repository_builds(compose: dict[str, Any]) -> None:
    build = compose["services"]["mcpsubd-1"]["build"]
    assert (COMPOSE.parent / build["context"]).resolve() == REPO
    dockerfile = build["dockerfile_inline"]
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert "mcpsubd" in project["scripts"]
    assert 'ENTRYPOINT ["mcpsubd"]' in dockerfile
    python = re.search(r"FROM python:(\d+)\.(\d+)", dockerfile)
    assert python is not None
    minimum = re.match(r">=(\d+)\.(\d+)", project["requires-python"])
    assert minimum is not None
    assert tuple(map(int, python.groups())) >= tuple(map(int, minimum.groups()))
    user = re.search(r"^USER (\d+)", dockerfile, re.M)
    assert user is not None and user.group(1) != "0", "not as root"
    # A fresh named volume takes the owner of its mount point in the image; without it the
    # volume is root's, the non-root daemon cannot write its state dir and exits 78.
    for service in replicas(compose).values():
        target = service["volumes"][0].partition(":")[2]
        assert re.search(rf"mkdir -p [^\n]*{target}\b", dockerfile), f"{target} not in image"
        assert re.search(rf"chown {user.group(1)}[^\n]*{target}\b", dockerfile)


def test_compose_healthchecks_probe_each_replicas_unauthenticated_health_route(
    compose: dict[str, Any],
) -> None:
    routes = {getattr(route, "path", "") for route in system.router.routes}
    for name, service in replicas(compose).items():
        _, settings = settings_of(service["command"], env_of(service))
        test = " ".join(service["healthcheck"]["test"])
        url = urlsplit(re.findall(r"http://[^'\" ]+", test)[0])
        assert url.port == urlsplit(settings.api).port, f"{name}: health on its own API port"
        assert url.path in routes, f"{name}: {url.path} is no route of the API"
        assert url.path in UNAUTHENTICATED_PATHS, "the check carries no token"


# ---- systemd template -----------------------------------------------------------------------
def instance(text: str, index: str) -> str:
    """systemd's specifiers for instance ``index`` of a system unit."""
    for spec, value in (("%i", index), ("%S", "/var/lib"), ("%t", "/run"), ("%H", "host1")):
        text = text.replace(spec, value)
    return text


@pytest.mark.parametrize("index", ["1", "2", "3"])
def test_template_unit_instances_are_accepted_by_mcpsubd(index: str) -> None:
    unit = parse_unit(instance(TEMPLATE.read_text(), index))
    service = unit["Service"]
    argv = shlex.split(service["ExecStart"][0])
    assert argv[0].endswith("/mcpsubd")
    env = dict(line.split("=", 1) for line in service["Environment"])
    # the EnvironmentFile's one line, as the unit's comment tells the operator to write it
    comment = re.search(r"holds (MCPSUB_DATABASE_URL)=(postgresql://\S+)", TEMPLATE.read_text())
    assert comment is not None
    env[comment.group(1)] = comment.group(2).replace("…", PASSWORD)
    args, settings = settings_of(argv[1:], env)
    assert args.command == "run"
    assert settings.replica_id == f"host1-{index}"
    assert settings.state_dir == Path("/var/lib") / service["StateDirectory"][0]
    assert settings.api_socket is not None
    assert settings.api_socket.parent == Path("/run") / service["RuntimeDirectory"][0]
    assert service["RestartPreventExitStatus"] == [str(EXIT_CONFIG)]


def test_template_instances_do_not_share_state_socket_or_id() -> None:
    seen = [(parse_unit(instance(TEMPLATE.read_text(), i))["Service"]) for i in ("1", "2", "3")]
    for key in ("ExecStart", "Environment", "StateDirectory", "RuntimeDirectory"):
        values = {tuple(s[key]) for s in seen}
        assert len(values) == 3, f"{key} is the same for two instances"
