"""A peer on the user's own socket that answers 200 with the wrong shape (``{}``, or the
right keys with the wrong types) is ``NOT_MCPSUBD``, exit 11, one line and a hint, never a
traceback: every answer is checked against its route's shape (``service/apishapes.py``)
before a client reads it. Before, ``webhook add`` died on ``KeyError: 'consecutiveFailures'``
and ``mcpsubctl mcp`` on ``KeyError: 'subscriptions'``."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from service.apishapes import answer_problem
from tests.face.stdio_peer import StdioPeer
from tests.support.cli import BIN, REPO_ROOT, cli_env
from tests.support.fakepeer import FakePeer

WRONG_TYPES = {
    "ready": "yes",
    "subscriptions": {"id": 1},
    "webhooks": [{"id": "1"}],
    "deliveries": None,
    "events": [{"id": 1, "type": 2}],
    "id": True,
    "url": 1,
    "enabled": "no",
    "mode": "all",
    "consecutiveFailures": "0",
    "revoked": "all",
    "path": None,
}
COMMANDS = [
    ["status"],
    ["status", "--json"],
    ["list"],
    ["show", "1"],
    ["subscribe", "--url", "http://127.0.0.1:9/mcp", "--uri", "test://x", "--no-wait"],
    ["unsubscribe", "1"],
    ["resubscribe"],
    ["read", "--uri", "test://x"],
    ["wait", "--uri", "test://x", "--timeout-ms", "100"],
    ["events"],
    ["webhook", "add", "http://127.0.0.1:9/hook"],
    ["webhook", "list"],
    ["webhook", "show", "1"],
    ["webhook", "rotate-secret", "1"],
    ["deliveries", "list"],
    ["deliveries", "recover", "--target", "1", "--since", "1h"],
    ["ui"],
    ["ui", "--revoke-all"],
    ["tail"],
]


@pytest.fixture(scope="module", params=["empty", "wrong-types"])
def fake(request: pytest.FixtureRequest) -> Iterator[tuple[Path, FakePeer]]:
    """A fake at the state dir's own socket (our directory, our uid: every trust check
    passes), answering every request with one body."""
    body = b"{}" if request.param == "empty" else json.dumps(WRONG_TYPES).encode()
    state = Path(tempfile.mkdtemp(prefix="shape", dir="/tmp"))
    peer = FakePeer(state / "api.sock", body)
    yield state, peer
    peer.close()
    shutil.rmtree(state, ignore_errors=True)


def run(argv: list[str], state: Path, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        input=stdin,
        env=cli_env({"MCPSUB_STATE_DIR": str(state)}),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO_ROOT,
    )


def test_every_daemon_command_says_not_mcpsubd(fake: tuple[Path, FakePeer]) -> None:
    state, _peer = fake
    for args in COMMANDS:
        done = run([str(BIN / "mcpsubctl"), *args], state)
        said = done.stdout + done.stderr
        assert "Traceback" not in said, (args, said)
        assert done.returncode == 11, (args, said)
        assert "does not look like mcpsubd" in done.stderr, (args, said)
        assert "hint: check --api / MCPSUB_API" in done.stderr, (args, said)


def test_the_hook_and_the_face_say_not_mcpsubd(fake: tuple[Path, FakePeer]) -> None:
    state, _peer = fake
    hook = run(
        [str(BIN / "mcpsubctl"), "hook", "claude-code"],
        state,
        json.dumps({"session_id": "s", "hook_event_name": "UserPromptSubmit", "prompt": "x"}),
    )
    assert (hook.returncode, hook.stdout) == (0, ""), hook
    assert "NOT_MCPSUBD" in hook.stderr and "Traceback" not in hook.stderr, hook.stderr
    face = StdioPeer(state)
    try:
        face.request(0, "initialize", {"protocolVersion": "2025-11-25"})
        assert "result" in face.answer(0, timeout=30)
        calls = [
            ("list_subscriptions", {}),
            ("subscribe", {"url": "http://127.0.0.1:9/mcp", "uris": ["test://x"]}),
        ]
        for number, (tool, arguments) in enumerate(calls, start=1):
            face.request(number, "tools/call", {"name": tool, "arguments": arguments})
            answer = face.answer(number, timeout=60)
            assert answer["result"]["isError"] is True, answer
            assert "NOT_MCPSUBD" in json.dumps(answer), answer
    finally:
        face.close()
    assert not any("Traceback" in line for line in face.stderr), face.stderr


def test_the_shape_check_names_the_first_wrong_field() -> None:
    assert answer_problem("POST", "/v1/webhooks", {}) == "the answer has no 'id'"
    assert (
        answer_problem("GET", "/v1/webhooks", {"webhooks": [{"id": 1, "url": "u"}]})
        == "the answer.webhooks[0] has no 'enabled'"
    )
    assert answer_problem("GET", "/v1/status", {"ready": 1}) == (
        "the answer.ready is a number, not a boolean"
    )
    assert answer_problem("GET", "/v1/subscriptions/7?x=1", []) == "the answer is not a JSON object"
    content = {"subscriptionId": 1, "serverUrl": "u", "uri": "x", "revision": 1, "text": None}
    assert answer_problem("GET", "/v1/content?uri=x", content) is None
    assert answer_problem("GET", "/v1/subscriptions/1/diff", ["x"]) == (
        "the answer is not a JSON object"
    )
    assert answer_problem("GET", "/v1/status", {"ready": True, "future": [1]}) is None
