"""Every documented error path of the four programs, run as a user would: a subprocess.

Each case asserts the same three things: no ``Traceback`` on stdout or stderr,
the documented exit code, and one stderr line that names the problem (a ``hint:`` line may
follow). Ctrl-C is sent while the program is really waiting (an event from the lab or the
program's own output says so), so the interrupt lands in the network wait, not start-up.

Permission cases need a user who is not the directory's owner. The tests run as root in CI,
so those subprocesses drop to ``nobody`` with ``setpriv`` (util-linux; ``preexec_fn`` +
``os.setuid`` cannot exec the venv's interpreter in this sandbox); run as a normal user they
use a directory with mode 000 instead.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import skips
from tests.support.cli import CliResult, cli_env, finish, run_cli, spawn_cli
from tests.support.daemon import Daemon
from tests.support.lab import LabServer

BIN = Path(sys.executable).parent
AS_ROOT = os.geteuid() == 0
URI = "test://review/status"


def assert_clean(result: CliResult, code: int, problem: str | None) -> None:
    """No traceback, the exit code, and the first stderr line naming the problem."""
    both = result.stdout + result.stderr
    assert "Traceback" not in both, both
    assert result.code == code, (result.code, result.stdout, result.stderr)
    if problem is not None:
        lines = result.stderr.splitlines()
        assert lines, f"nothing on stderr; stdout was {result.stdout!r}"
        assert problem in lines[0], lines
        assert all(line.startswith("hint: ") for line in lines[1:]), lines


# ---- Ctrl-C ---------------------------------------------------------------------------------
@pytest.fixture
def slow_lab() -> Iterator[LabServer]:
    """The update comes long after the listen opens: the CLI is waiting when Ctrl-C comes."""
    with LabServer({"MCP_TEST_UPDATE_DELAY_SECONDS": "600"}) as lab:
        yield lab


def interrupt(proc: subprocess.Popen[str]) -> CliResult:
    proc.send_signal(signal.SIGINT)
    return finish(proc, timeout=20)


def test_ctrl_c_during_probe_exits_130_quietly(slow_lab: LabServer) -> None:
    proc = spawn_cli("mcpsubctl", "probe", "--url", slow_lab.url, "--uri", "test://review/status")
    slow_lab.wait_event("listen.acknowledged", timeout=20)
    result = interrupt(proc)
    assert_clean(result, 130, None)
    assert result.stdout == ""


def test_ctrl_c_during_drop_in_subscribe_exits_130_quietly(slow_lab: LabServer) -> None:
    proc = spawn_cli(
        "mcp-resource-subscriber", "--url", slow_lab.url, "--uri", "test://review/status"
    )
    slow_lab.wait_event("listen.acknowledged", timeout=20)
    result = interrupt(proc)
    assert_clean(result, 130, None)
    assert result.stdout == ""


def test_ctrl_c_during_wait_exits_130_quietly(slow_lab: LabServer, tmp_path: Path) -> None:
    daemon = Daemon(tmp_path / "state").start()
    try:
        assert daemon.ctl("subscribe", "--url", slow_lab.url, "--uri", URI).code == 0
        while daemon.ctl("read", "--uri", URI).code != 0:  # the first revision is stored
            slow_lab.wait_event("resources.read", timeout=20)
        # stderr on a pty with the status line at once: its "waiting for an update" line says
        # the wait has begun (the next update is 600 s away).
        master, slave = os.openpty()
        proc = subprocess.Popen(
            [str(BIN / "mcpsubctl"), "wait", "--uri", URI],
            env=cli_env({"MCPSUB_STATE_DIR": str(daemon.state_dir), "MCPSUB_STATUS_DELAY_S": "0"}),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=slave, text=True,
        )  # fmt: skip
        os.close(slave)
        seen = b""
        while b"waiting for an update" not in seen:
            chunk = os.read(master, 4096)
            assert chunk, seen
            seen += chunk
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
        with contextlib.suppress(OSError):
            while os.read(master, 4096):
                pass
        os.close(master)
        assert_clean(CliResult(proc.returncode, out, ""), 130, None)
        assert out == ""
        assert daemon.proc is not None and daemon.proc.poll() is None  # the daemon is unmoved
    finally:
        daemon.stop()


# ---- unusable state directory ---------------------------------------------------------------
def run_as_other_user(program: str, *args: str, env: dict[str, str]) -> CliResult:
    """As root: the program runs as ``nobody`` (setpriv drops uid, gid and groups)."""
    command = [str(BIN / program), *args]
    if AS_ROOT:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            skips.unavailable("agent-lab", "running as root without setpriv (util-linux)")
        command = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", *command]
    proc = subprocess.run(
        command,
        env=cli_env(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


@pytest.fixture
def foreign_dir() -> Iterator[Path]:
    """A directory the test's subprocess user may not enter, under a parent it may."""
    parent = Path(tempfile.mkdtemp(prefix="mcpsub-foreign-"))
    parent.chmod(0o755)
    target = parent / "state"
    target.mkdir(mode=0o700)
    if not AS_ROOT:
        target.chmod(0)
    try:
        yield target
    finally:
        target.chmod(0o700)
        shutil.rmtree(parent, ignore_errors=True)


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda tmp: tmp / "file" / "state", "file is a file, not a directory"),
        (lambda tmp: tmp / "file", ": exists and is not a directory"),
        (lambda tmp: Path("/proc/nope"), ": cannot be created"),
    ],
    ids=["path-through-a-file", "state-dir-is-a-file", "parent-cannot-exist"],
)
def test_unusable_state_dir_is_one_line_exit_78(
    tmp_path: Path, make: Callable[[Path], Path], problem: str
) -> None:
    (tmp_path / "file").write_text("x")
    path = make(tmp_path)
    for args in ([], ["migrate"]):
        result = run_cli("mcpsubd", *args, env={"MCPSUB_STATE_DIR": str(path)})
        assert_clean(result, 78, f"mcpsubd: state directory {path}")
        assert problem in result.stderr
        assert len(result.stderr.splitlines()) == 1


def test_state_dir_of_another_user_is_one_line_exit_78(foreign_dir: Path) -> None:
    result = run_as_other_user("mcpsubd", env={"MCPSUB_STATE_DIR": str(foreign_dir)})
    assert_clean(result, 78, f"state directory {foreign_dir}: permission denied")
    assert len(result.stderr.splitlines()) == 1


def test_status_with_an_unreadable_state_dir_names_the_owner(foreign_dir: Path) -> None:
    result = run_as_other_user("mcpsubctl", "status", env={"MCPSUB_STATE_DIR": str(foreign_dir)})
    assert_clean(result, 3, f"permission denied on {foreign_dir / 'api.sock'}")
    owner = pwd.getpwuid(os.geteuid()).pw_name
    assert f"(the daemon runs as {owner}?)" in result.stderr
    assert "start the daemon" not in result.stdout + result.stderr
    assert "error-code PERMISSION_DENIED" in result.stdout


# ---- bad settings -------------------------------------------------------------------------
@pytest.mark.parametrize("source", ["flag", "env", "toml"])
def test_unknown_log_level_is_a_config_error(tmp_path: Path, source: str) -> None:
    env = {"MCPSUB_STATE_DIR": str(tmp_path / "state")}
    args: list[str] = []
    if source == "flag":
        args = ["--log-level", "loud"]
    elif source == "env":
        env["MCPSUB_LOG_LEVEL"] = "loud"
    else:
        config = tmp_path / "mcpsubd.toml"
        config.write_text('log_level = "loud"\n')
        args = ["--config", str(config)]
    result = run_cli("mcpsubd", *args, env=env)
    assert_clean(result, 78, "invalid value for log_level: 'loud'")
    assert "debug, info, warning, error" in result.stderr


# ---- the other documented error paths ---------------------------------------------------------
CASES: list[tuple[str, list[str], dict[str, str], int, str]] = [
    ("mcpsubd", ["--api", "http://x"], {}, 78, "invalid value for api"),
    ("mcpsubd", ["--log-format", "xml"], {}, 78, "invalid value for log_format"),
    ("mcpsubd", [], {"MCPSUB_KEEP_EVENTS": "-1"}, 78, "invalid value for keep_events"),
    ("mcpsubctl", ["nosuch"], {}, 2, "invalid choice"),
    ("mcpsubctl", ["probe", "--uri", "test://x"], {}, 2, "pass --url"),
    ("mcpsubctl", ["probe", "--url", "http://127.0.0.1:9/mcp"], {}, 2, "pass --uri"),
    ("mcpsubctl", ["call", "--url", "http://127.0.0.1:9/mcp"], {}, 2, "no tool name"),
    ("mcpsubctl", ["status", "--api", "ftp://x"], {}, 2, "--api must be"),
    ("mcpsubctl", ["status"], {}, 10, "the daemon is not reachable"),
    ("mcpsubctl", ["wait", "--uri", "test://x"], {}, 10, "the daemon is not reachable"),
    ("mcpsubctl", ["wait", "--uri", "x", "--timeout-ms", "0"], {}, 2, "--timeout-ms"),
    (
        "mcpsubctl",
        ["probe", "--url", "http://127.0.0.1:9/mcp", "--uri", "test://x"],
        {},
        5,
        "probe failed:",
    ),
    ("mcp-resource-subscriber", ["--url", "http://127.0.0.1:9/mcp"], {}, 1, "warning:"),
    ("mcp-resource-subscriber", ["--timeout-ms", "abc"], {}, 1, "Invalid --timeout-ms: abc"),
    ("mcp-resource-subscriber", ["call", "--url", "http://127.0.0.1:9/mcp"], {}, 3, "no tool"),
    ("mcp-lab-server", ["--port", "notaport"], {}, 2, "invalid int value"),
]


@pytest.mark.parametrize(
    ("program", "args", "env", "code", "problem"),
    CASES,
    ids=[f"{c[0]}-{'-'.join(c[1])[:40] or 'env'}" for c in CASES],
)
def test_documented_error_path(
    tmp_path: Path, program: str, args: list[str], env: dict[str, str], code: int, problem: str
) -> None:
    env = {"MCPSUB_STATE_DIR": str(tmp_path / "state"), **env}
    result = run_cli(program, *args, env=env)
    both = result.stdout + result.stderr
    assert "Traceback" not in both, both
    assert result.code == code, (result.code, both)
    assert problem in result.stderr, result.stderr


def test_an_api_address_that_is_not_mcpsubd_says_so(tmp_path: Path) -> None:
    """Before: ``--api`` at another HTTP server printed ``HTTP_404`` and exited 70 (internal
    error). Now its own code and exit, and a hint that says what the address should be."""
    with LabServer() as lab:
        api = lab.url.removesuffix("/mcp")
        env = {"MCPSUB_STATE_DIR": str(tmp_path / "state"), "MCPSUB_API_TOKEN": "x"}
        for args in (["status"], ["list"], ["read", "--uri", "test://x"]):
            result = run_cli("mcpsubctl", "--api", api, *args, env=env)
            assert_clean(result, 11, "does not look like mcpsubd (HTTP 404")
            assert "error-code NOT_MCPSUBD" in result.stdout, result.stdout
            assert "hint: check --api / MCPSUB_API" in result.stderr
