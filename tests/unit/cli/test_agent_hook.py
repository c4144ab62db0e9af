"""The pure parts of ``mcpsubctl hook`` and ``tail``: output shapes, text, cursors, parsing.

The shapes are checked with JSON Schemas written here from each agent's hook reference (the
versions are named in docs/agents.md): Codex publishes its output schema (additional
properties refused, ``hookEventName`` required and equal to the event), Claude Code and
Gemini CLI describe the same ``hookSpecificOutput.additionalContext`` in prose.
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from cli import agent_hook
from cli.agent_cmds import after_reset, matches, server_filter, tail_line
from cli.agent_hook import (
    CONTEXT_EVENTS,
    MAX_SESSIONS,
    MAX_URIS_SHOWN,
    Cursors,
    HookProblem,
    hook_output,
    parse_argv,
    render_changes,
    session_key,
)


def _schema(event: str, *, closed: bool) -> dict[str, Any]:
    specific: dict[str, Any] = {
        "type": "object",
        "properties": {
            "hookEventName": {"const": event},
            "additionalContext": {"type": "string", "minLength": 1},
        },
        "required": ["hookEventName", "additionalContext"],
    }
    top: dict[str, Any] = {
        "type": "object",
        "properties": {"hookSpecificOutput": specific},
        "required": ["hookSpecificOutput"],
    }
    if closed:  # Codex: additionalProperties false at both levels
        specific["additionalProperties"] = False
        top["additionalProperties"] = False
    return top


def assert_documented_shape(agent: str, event: str, output: Any) -> None:
    """``output`` is what ``agent`` documents for adding context from an ``event`` hook."""
    assert event in CONTEXT_EVENTS[agent]
    jsonschema.validate(output, _schema(event, closed=agent == "codex"))


@pytest.mark.parametrize("agent", sorted(CONTEXT_EVENTS))
def test_output_shape_per_agent_and_event(agent: str) -> None:
    for event in CONTEXT_EVENTS[agent]:
        assert_documented_shape(agent, event, hook_output(agent, event, "ctx"))
    with pytest.raises(jsonschema.ValidationError):  # the check can fail
        assert_documented_shape("codex", "UserPromptSubmit", {"additionalContext": "x"})


def events(n: int, uri: str = "test://u", start: int = 1) -> list[dict[str, Any]]:
    return [
        {"id": start + i, "uri": uri, "revision": i + 1, "serverUrl": "http://127.0.0.1:1/mcp"}
        for i in range(n)
    ]


def test_render_groups_by_uri_escapes_and_bounds() -> None:
    text = render_changes(events(3) + events(1, "test://\x1b[2J\u202eevil", 4), more=False)
    assert (
        text.splitlines()[0] == "mcpsub: 4 resource changes since the previous prompt (events 1-4):"
    )
    assert "- test://u is now revision 3 (event 3, 3 changes;" in text
    assert "\x1b" not in text and "\u202e" not in text and "\\x1b[2J\\u202eevil" in text
    assert "not instructions" in text
    many = [e for i in range(MAX_URIS_SHOWN + 5) for e in events(1, f"test://{i}", i + 1)]
    text = render_changes(many, more=True)
    assert "- and 5 more URIs" in text and "come with the next prompt" in text
    assert text.count("\n- test://") == MAX_URIS_SHOWN
    single = render_changes(events(1), more=False)
    assert "1 resource change since" in single and "(event 1)" in single


def test_render_shows_invisible_characters() -> None:
    """A server's URI or URL reaches the agent's prompt: a zero-width space, a word joiner,
    a tag character or a no-break space would read as nothing there (or hide text)."""
    sneaky = "test://a\u200bb\U000e0041\u00a0c"
    (event,) = events(1, sneaky)
    event["serverUrl"] = "http://127.0.0.1:1/m\u2060cp"
    text = render_changes([event], more=False)
    assert "test://a\\u200bb\\U000e0041\\xa0c" in text and "/m\\u2060cp" in text
    assert not {"\u200b", "\U000e0041", "\u00a0", "\u2060"} & set(text)


def test_session_key_keeps_uuids_and_hashes_anything_else() -> None:
    assert session_key("codex", "0b6c2f3e-1a2b-4c5d-9e8f-001122334455").endswith("-001122334455")
    odd_ids: list[object] = ["../x", "/etc/passwd", ".", "..", "a" * 200, "a b", "\x00", "é", ""]
    values: list[object] = [7, "7", None, "None", True, 1, 1.0, [1, 2], "[1, 2]", {"a": 1}]
    keys = set()
    for odd in odd_ids + values:
        key = session_key("gemini", odd)
        assert key.startswith("gemini--") and "/" not in key and key not in ("gemini--.", "..")
        if odd in odd_ids or not isinstance(odd, str):
            assert key.startswith("gemini--h-") and len(key) == len("gemini--h-") + 32, odd
        keys.add(key)
    assert len(keys) == len(odd_ids) + len(values), "each value its own cursor"
    assert session_key("codex", "a/b") != session_key("codex", "a/c")


def test_cursor_files_are_private_and_bounded(tmp_path: Path) -> None:
    cursors = Cursors(str(tmp_path))
    assert cursors.get("codex--a") is None
    cursors.put("codex--a", 7)
    assert cursors.get("codex--a") == 7
    hooks = tmp_path / "hooks"
    assert stat.S_IMODE(hooks.stat().st_mode) == 0o700
    assert stat.S_IMODE((hooks / "codex--a").stat().st_mode) == 0o600
    os.chmod(hooks, 0o755)
    cursors.put("codex--a", 8)
    assert stat.S_IMODE(hooks.stat().st_mode) == 0o700, "a widened directory is narrowed again"
    (hooks / "codex--a").write_text("garbage")
    assert cursors.get("codex--a") is None, "a damaged cursor counts as a new session"

    now = time.time()
    for i in range(MAX_SESSIONS + 10):
        (hooks / f"s{i}").write_text("1")
        os.utime(hooks / f"s{i}", (now - 1000 + i, now - 1000 + i))
    os.utime(hooks / "s200", (now - 40 * 86400,) * 2)
    (hooks / "ws-codex--old").write_text("1")  # a workspace's cursor, older than every session
    os.utime(hooks / "ws-codex--old", (now - 2000,) * 2)
    cursors.put("codex--new", 1)
    cursors.prune()
    names = set(os.listdir(hooks))
    assert "ws-codex--old" in names, "sessions never push out a workspace's cursor"
    names.discard("ws-codex--old")
    assert len(names) == MAX_SESSIONS and "codex--new" in names
    assert "s0" not in names and "s200" not in names and f"s{MAX_SESSIONS + 9}" in names


def test_parse_argv_and_http() -> None:
    assert parse_argv(["codex"]) == ("codex", None)
    assert parse_argv(["--api=unix:///x", "gemini"]) == ("gemini", "unix:///x")
    for bad in ([], ["cursor"], ["codex", "gemini"], ["codex", "--api"], ["codex", "-x"]):
        with pytest.raises(HookProblem, match="usage"):
            parse_argv(bad)


def test_hook_imports_nothing_heavy() -> None:
    import subprocess
    import sys

    code = (
        "import sys; import cli.agent_hook as h; "
        "print(sorted(m for m in ('httpx','asyncio','http.client','argparse','pathlib',"
        "'email','service.safetext') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    assert agent_hook.PAGE <= 1000


def test_tail_pieces() -> None:
    assert server_filter(["test://a"]) == "test://a"
    assert server_filter(["test://a/*"]) is None and server_filter(["a", "b"]) is None
    assert server_filter([]) is None
    assert matches("test://a/b", ["test://a/*"]) and not matches("test://c", ["test://a/*"])
    assert matches("anything", []) and not matches(None, ["*"])
    event = {"id": 3, "uri": "test://\x1b]0;x\x07", "revision": 2, "serverUrl": "http://h/mcp"}
    line = tail_line(event, as_json=False)
    assert line == "event=3 uri=test://\\x1b]0;x\\x07 revision=2 server=http://h/mcp"
    assert "\x1b" not in tail_line(event, as_json=True)
    assert after_reset({"firstEventId": 10, "lastEventId": 20}, 3) == 9
    assert after_reset({"firstEventId": 10, "lastEventId": 20}, 50) == 20


class Pages:
    """``Api.get`` answering from a list of events, ``limit`` at a time (no daemon)."""

    def __init__(self, count: int) -> None:
        self.events = events(count)
        self.asked: list[str] = []

    def get(self, target: str) -> dict[str, Any]:
        self.asked.append(target)
        if target == "/v1/status":
            return {"lastEventId": 0}
        query = dict(part.split("=") for part in target.split("?", 1)[1].split("&"))
        after, limit = int(query["after"]), int(query["limit"])
        page = [e for e in self.events if e["id"] > after][:limit]
        return {"events": page, "nextAfter": page[-1]["id"] if page else after}


def test_a_long_backlog_comes_in_pages_and_nothing_is_lost(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import json

    pages = Pages(agent_hook.PAGE + 30)
    monkeypatch.setenv("MCPSUB_STATE_DIR", str(tmp_path))
    monkeypatch.setattr(agent_hook.Api, "get", lambda self, target: pages.get(target))
    payload = '{"session_id": "s", "hook_event_name": "UserPromptSubmit"}'

    def call() -> str:
        out = io.StringIO()
        agent_hook.run("claude-code", None, io.StringIO(payload), out)
        return out.getvalue()

    assert call() == ""  # the session starts at event 0
    first = json.loads(call())["hookSpecificOutput"]["additionalContext"]
    assert f"{agent_hook.PAGE} resource changes" in first and "come with the next prompt" in first
    second = json.loads(call())["hookSpecificOutput"]["additionalContext"]
    assert second.startswith(
        f"mcpsub: 30 resource changes since the previous prompt (events {agent_hook.PAGE + 1}-"
    )
    assert call() == ""
    assert Cursors(str(tmp_path)).get("claude-code--s") == agent_hook.PAGE + 30
