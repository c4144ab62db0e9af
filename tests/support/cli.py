"""Run our console scripts as real subprocesses, the way users' scripts do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
SHIMS = Path(__file__).resolve().parent / "shims"
REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class CliResult:
    code: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        lines = self.stdout.splitlines()
        assert len(lines) == 1, f"expected exactly one stdout line, got {self.stdout!r}"
        return json.loads(lines[0])

    @property
    def ndjson(self) -> list[Any]:
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]

    def field(self, name: str) -> str:
        """The value of a ``name value`` line of the line-based output."""
        for line in self.stdout.splitlines():
            if line.startswith(name + " "):
                return line[len(name) + 1 :]
        raise AssertionError(f"no {name!r} line in {self.stdout!r}")


def cli_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_PROBE_", "MCPSUB_"))}
    # If CI itself runs under systemd, a daemon under test must not notify CI's manager.
    for name in ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"):
        env.pop(name, None)
    env["PYTHONPATH"] = os.pathsep.join([str(SHIMS), str(REPO_ROOT)])
    env.update(extra or {})
    return env


def run_cli(
    program: str, *args: str, env: dict[str, str] | None = None, timeout: float = 60.0
) -> CliResult:
    proc = subprocess.run(
        [str(BIN / program), *args],
        env=cli_env(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=str(REPO_ROOT),
    )
    return CliResult(proc.returncode, proc.stdout, proc.stderr)


def spawn_cli(program: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [str(BIN / program), *args],
        env=cli_env(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(REPO_ROOT),
    )


def finish(proc: subprocess.Popen[str], timeout: float = 60.0) -> CliResult:
    out, err = proc.communicate(timeout=timeout)
    return CliResult(proc.returncode, out, err)
