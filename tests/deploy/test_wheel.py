"""The wheel ships mcpsub under one import name: ``mcpsub/service``,
``mcpsub/cli``, ``mcpsub/labserver``, ``mcpsub/migrations`` and ``mcpsub/__init__.py`` (the
start module), their imports rewritten by deploy/hatch_build.py, and nothing else at the top
of ``site-packages``. Built from this checkout and installed offline into a virtualenv of its
own; then its programs run from that virtualenv with nothing of the clone on ``sys.path``:
the lab server, the daemon (its migrations included) and the CLI, end to end on loopback."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.demo.test_install_doc import uv_binary
from tests.support.cli import REPO_ROOT
from tests.support.poll import until
from tests.support.process import ServerProcess

sys.path.insert(0, str(REPO_ROOT / "deploy"))
import hatch_build  # the build hook, to check its rewrite against the wheel

PACKAGES = ("service", "cli", "labserver", "migrations")


@dataclass
class Installed:
    wheel: Path
    venv: Path
    env: dict[str, str]

    def bin(self, program: str) -> str:
        return str(self.venv / "bin" / program)

    def run(self, *argv: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            list(argv),
            env=self.env,
            cwd=self.env["HOME"],
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    uv = uv_binary()
    base = tmp_path_factory.mktemp("wheel")
    cache = subprocess.run(
        [uv, "cache", "dir"], capture_output=True, text=True, check=True
    ).stdout.strip()
    uv_env = {
        "PATH": os.environ["PATH"],
        "HOME": str(base),
        "UV_OFFLINE": "1",
        "UV_CACHE_DIR": cache,
        "UV_PYTHON_DOWNLOADS": "never",
    }
    dist = base / "dist"
    built = subprocess.run(
        [uv, "build", "--wheel", "--out-dir", str(dist), str(REPO_ROOT)],
        env=uv_env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = dist.glob("mcpsub-*-py3-none-any.whl")
    venv = base / "venv"
    for argv in (
        [uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
        [uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), str(wheel)],
    ):
        done = subprocess.run(argv, env=uv_env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    home = base / "home"
    home.mkdir()
    # Nothing of the clone: no PYTHONPATH, a home of its own, the virtualenv's programs.
    env = {
        "HOME": str(home),
        "PATH": os.pathsep.join([str(venv / "bin"), "/usr/bin", "/bin"]),
        "LANG": "C.UTF-8",
    }
    return Installed(wheel, venv, env)


def test_the_wheel_claims_one_import_name(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = wheel.namelist()
    tops = {name.split("/", 1)[0] for name in names}
    version = installed.wheel.name.split("-")[1]
    assert tops == {"mcpsub", f"mcpsub-{version}.dist-info", f"mcpsub-{version}.data"}, tops
    assert {"mcpsub/__init__.py", "mcpsub/cli/entry.py", "mcpsub/service/daemon/main.py"} <= set(
        names
    )
    # What make setup's editable install and the unit templates need is there as before.
    assert any(n.endswith("share/mcpsub/deploy/systemd/mcpsubd.service") for n in names), names
    assert any("/share/mcpsub/skills/" in n and n.endswith("SKILL.md") for n in names)
    assert not any(n.endswith("hatch_build.py") for n in names)
    with zipfile.ZipFile(installed.wheel) as wheel:
        entry_points = wheel.read(f"mcpsub-{version}.dist-info/entry_points.txt").decode()
    assert "mcpsubctl = mcpsub:mcpsubctl" in entry_points, entry_points


def test_no_reference_to_the_clone_names_is_left(installed: Installed) -> None:
    """Rewriting the wheel's sources again changes nothing: every import of ``service``,
    ``cli``, ``labserver`` or ``migrations`` and every module string names ``mcpsub.…``."""
    with zipfile.ZipFile(installed.wheel) as wheel:
        sources = {n: wheel.read(n).decode() for n in wheel.namelist() if n.endswith(".py")}
    assert len(sources) > 150
    for name, text in sources.items():
        if name != "mcpsub/__init__.py":  # the start module: ROOT + "cli.entry", below
            assert hatch_build.rewrite(text, REPO_ROOT) == text, name
        bare = re.search(rf"^\s*(?:from|import) (?:{'|'.join(PACKAGES)})\b", text, re.M)
        assert bare is None, f"{name}: {bare and bare.group(0)}"
    start = sources["mcpsub/__init__.py"]
    assert 'ROOT = "mcpsub."' in start and 'ROOT = ""' not in start


def test_rewrite_moves_imports_and_module_strings_only() -> None:
    source = (
        "import service.daemon.without_dev_extras\n"
        "import os, cli.entry\n"
        "from service import jsondecode\n"
        "from .x import service\n"
        "if True: from labserver.settings import settings_from_env\n"
        "x = ('cli.event_cmds', \"service.console\", 'service', 'cli.md', 'service.nope')\n"
        "raise E from service\n"
    )
    assert hatch_build.rewrite(source, REPO_ROOT) == (
        "import mcpsub.service.daemon.without_dev_extras\n"
        "import os, mcpsub.cli.entry\n"
        "from mcpsub.service import jsondecode\n"
        "from .x import service\n"
        "if True: from mcpsub.labserver.settings import settings_from_env\n"
        "x = ('mcpsub.cli.event_cmds', \"mcpsub.service.console\", 'service', 'cli.md', "
        "'service.nope')\n"
        "raise E from service\n"
    )


def test_every_module_imports_and_the_generic_names_stay_free(installed: Installed) -> None:
    script = (
        "import importlib, importlib.util, pkgutil, sys\n"
        "import mcpsub\n"
        "for name in ('service', 'cli', 'labserver', 'migrations'):\n"
        "    assert importlib.util.find_spec(name) is None, name\n"
        "count = 0\n"
        "for info in pkgutil.walk_packages(mcpsub.__path__, 'mcpsub.'):\n"
        "    if info.name.startswith('mcpsub.migrations.') or info.name.endswith('__main__'):\n"
        "        continue\n"
        "    importlib.import_module(info.name)\n"
        "    count += 1\n"
        "print(count)\n"
    )
    done = installed.run(installed.bin("python"), "-I", "-c", script)
    assert done.returncode == 0, done.stdout + done.stderr
    assert int(done.stdout) > 100


def test_the_installed_programs_run_end_to_end(installed: Installed, tmp_path: Path) -> None:
    for program in ("mcpsubd", "mcpsubctl"):
        version = installed.run(installed.bin(program), "--version")
        assert version.returncode == 0 and f"{program} v" in version.stdout, version
    for program in ("mcp-lab-server", "mcp-resource-subscriber"):
        helped = installed.run(installed.bin(program), "--help")
        assert helped.returncode == 0 and "usage" in helped.stdout.lower(), helped

    lab = ServerProcess(
        [installed.bin("mcp-lab-server"), "--host", "127.0.0.1", "--port", "0"],
        {**installed.env, "MCP_TEST_CONTROL": "true", "MCP_TEST_UPDATE_DELAY_SECONDS": "0.05"},
        re.compile(r"listening on (?P<scheme>https?)://127\.0\.0\.1:(?P<port>\d+)/mcp"),
    ).start()
    state = tmp_path / "state"
    env = {**installed.env, "MCPSUB_STATE_DIR": str(state), "MCPSUB_LOG_FORMAT": "json"}
    daemon = subprocess.Popen(
        [installed.bin("mcpsubd")],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        uri = "test://wheel/a"
        httpx.put(f"{lab.base_url}/lab/resources", json={"uri": uri, "text": "one"})

        def ctl(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [installed.bin("mcpsubctl"), *args],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
                stdin=subprocess.DEVNULL,
            )

        until("the installed mcpsubd answers", lambda: ctl("status").returncode == 0, 30)
        subscribed = ctl("subscribe", "--url", f"{lab.base_url}/mcp", "--uri", uri, "--json")
        assert subscribed.returncode == 0, subscribed.stdout + subscribed.stderr
        httpx.put(f"{lab.base_url}/lab/resources", json={"uri": uri, "text": "two"})

        def read_two() -> bool:
            read = ctl("read", "--uri", uri, "--raw")
            return read.returncode == 0 and read.stdout.strip() == "two"

        until("the change is read and stored by the installed daemon", read_two, 30)
        events = ctl("events", "--json", "--uri", uri)
        assert events.returncode == 0 and events.stdout.strip(), events
        listed = json.loads(ctl("list", "--json").stdout)
        assert uri in json.dumps(listed)
    finally:
        daemon.terminate()
        out, _ = daemon.communicate(timeout=20)
        lab.stop()
    assert daemon.returncode == 0, out
    assert "Traceback" not in out, out
