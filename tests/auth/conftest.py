"""The auth test harness: OAuth-enabled lab servers, CLI runs that are all recorded, and a
check after every test that no issued token value appeared in any captured output."""

from __future__ import annotations

import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import CliResult, finish, run_cli, spawn_cli
from tests.support.lab import LabServer

PROG = "mcp-resource-subscriber"
REVIEW = "test://review/status"
OAUTH_ENV = {"MCP_TEST_AUTH": "oauth", "MCP_TEST_DEVICE_INTERVAL_SECONDS": "0"}


class AuthHarness:
    def __init__(self, factory: Callable[..., LabServer], tmp_path: Path) -> None:
        self._factory = factory
        self.labs: list[LabServer] = []
        self.outputs: list[str] = []
        self.seen_tokens: set[str] = set()
        self.store = tmp_path / "state" / "mcp-resource-subscriber" / "tokens.db"

    # ---- servers ---------------------------------------------------------------------
    def lab(self, **env: str) -> LabServer:
        server = self._factory({**OAUTH_ENV, **env})
        self.labs.append(server)
        return server

    def oauth(self, lab: LabServer, name: str, body: Any = None) -> dict[str, Any]:
        response = lab.control("POST", f"/lab/oauth/{name}", json=body or {})
        response.raise_for_status()
        result: dict[str, Any] = response.json()
        return result

    def oauth_state(self, lab: LabServer) -> dict[str, Any]:
        state: dict[str, Any] = lab.control("GET", "/lab/oauth/state").json()
        self.seen_tokens |= set(state["accessTokens"]) | set(state["refreshTokens"])
        return state

    # ---- the CLI ---------------------------------------------------------------------
    def env(self, **extra: str) -> dict[str, str]:
        return {"MCP_PROBE_TOKEN_STORE_PATH": str(self.store), **extra}

    def _record(self, result: CliResult) -> CliResult:
        self.outputs += [result.stdout, result.stderr]
        return result

    def run(self, *args: str, env: dict[str, str] | None = None) -> CliResult:
        return self._record(run_cli(PROG, *args, env=self.env(**(env or {}))))

    def probe(self, lab: LabServer, *args: str, env: dict[str, str] | None = None) -> CliResult:
        return self.run("--url", lab.url, "--uri", REVIEW, *args, env=env)

    def call(self, lab: LabServer, *args: str) -> CliResult:
        return self.run("call", "--url", lab.url, "--tool", "nope", *args)

    def start_login(self, lab: LabServer) -> tuple[subprocess.Popen[str], list[str]]:
        """Spawn ``--login``; return the process and its stdout lines up to ``user-code``
        (or to EOF if it failed before showing a code)."""
        proc = spawn_cli(PROG, "--login", "--url", lab.url, env=self.env())
        assert proc.stdout is not None
        lines: list[str] = []
        while True:
            line = proc.stdout.readline()
            if not line:
                break
            lines.append(line)
            if line.startswith("verification-uri-complete "):
                break
        return proc, lines

    def finish_login(self, proc: subprocess.Popen[str], head: list[str]) -> CliResult:
        result = finish(proc, timeout=60)
        return self._record(CliResult(result.code, "".join(head) + result.stdout, result.stderr))

    def login(self, lab: LabServer, *, how: str = "control") -> CliResult:
        proc, head = self.start_login(lab)
        code = next(line.split()[1] for line in head if line.startswith("user-code "))
        if how == "control":
            self.oauth(lab, "approve", {"user_code": code})
        elif how == "deny":
            self.oauth(lab, "deny", {"user_code": code})
        else:
            response = lab.http.post("/activate", data={"user_code": code, "action": "approve"})
            assert response.status_code == 200, response.text
            assert "approved" in response.text
        return self.finish_login(proc, head)

    # ---- the store -------------------------------------------------------------------
    def row(self) -> dict[str, Any] | None:
        with sqlite3.connect(self.store) as conn:
            conn.row_factory = sqlite3.Row
            found = conn.execute("SELECT * FROM tokens").fetchall()
        assert len(found) <= 1
        if not found:
            return None
        row = dict(found[0])
        self.seen_tokens |= {v for k, v in row.items() if k.endswith("_token") and v}
        return row

    def update_row(self, **values: Any) -> None:
        sets = ", ".join(f"{key} = ?" for key in values)
        with sqlite3.connect(self.store) as conn:
            conn.execute(f"UPDATE tokens SET {sets}", tuple(values.values()))

    def expire_cache(self, lab: LabServer) -> None:
        """Time passes: the cached expiry is in the past and the server agrees."""
        self.update_row(expires_at=int(time.time() * 1000) - 1000)
        self.oauth(lab, "expire-tokens")

    # ---- the leak check ----------------------------------------------------------------
    def all_tokens(self) -> set[str]:
        for lab in self.labs:
            if lab.proc is not None and lab.proc.poll() is None:
                self.oauth_state(lab)
        if self.store.exists():
            self.row()
        return self.seen_tokens

    def assert_no_token_printed(self) -> None:
        tokens = self.all_tokens()
        for output in self.outputs:
            for token in tokens:
                assert token not in output, "a token value was printed"


@pytest.fixture
def auth(lab_server_factory: Callable[..., LabServer], tmp_path: Path) -> Iterator[AuthHarness]:
    harness = AuthHarness(lab_server_factory, tmp_path)
    yield harness
    harness.assert_no_token_printed()
