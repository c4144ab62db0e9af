"""The agent lab's scripted model (bench/agents_lab/model.py), without any agent CLI: each wire
format answers the script's step for the number of tool results the request carries, passes
a cursor back, and a body over its bound is refused; the report's blocks survive the benches
that rewrite the same results file."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bench.agents_lab import model as m
from bench.agents_lab.report import END, START, keep_block, splice

WAIT = {"tool": "wait_for_change", "args": {"uri": "test://x", "after": "{cursor}"}}


@pytest.fixture
def scripted() -> Iterator[m.ScriptedModel]:
    server = m.ScriptedModel(m.Script([WAIT, {"say": "done"}])).start()
    yield server
    server.stop()


def sse(response: httpx.Response) -> list[dict[str, Any]]:
    return [
        json.loads(line[6:]) for line in response.text.splitlines() if line.startswith("data: ")
    ]


def test_anthropic_first_a_tool_call_then_with_its_result_the_answer(
    scripted: m.ScriptedModel,
) -> None:
    tools = [{"name": "Bash"}, {"name": "mcp__mcpsub__wait_for_change"}]
    first = {
        "model": "x",
        "stream": True,
        "tools": tools,
        "messages": [{"role": "user", "content": "go"}],
    }
    events = sse(httpx.post(f"{scripted.url}/v1/messages", json=first))
    block = events[1]["content_block"]
    assert block["type"] == "tool_use" and block["name"] == "mcp__mcpsub__wait_for_change"
    assert json.loads(events[2]["delta"]["partial_json"]) == {"uri": "test://x"}  # no cursor yet
    result = {"type": "tool_result", "tool_use_id": "t", "content": '{"changed":true,"cursor":41}'}
    second = {**first, "messages": [*first["messages"], {"role": "user", "content": [result]}]}
    events = sse(httpx.post(f"{scripted.url}/v1/messages", json=second))
    assert events[2]["delta"]["text"] == "done"
    assert [e.step for e in scripted.main_requests()] == [0, 1]
    # a side request (no tools: a title, a quota check) never moves the script
    side = httpx.post(f"{scripted.url}/v1/messages", json={"model": "x", "messages": []}).json()
    assert side["content"][0]["text"] == "ok"


def test_responses_and_gemini_pass_the_cursor_back(scripted: m.ScriptedModel) -> None:
    namespace = {"type": "namespace", "name": "mcp__mcpsub", "tools": [{"name": "wait_for_change"}]}
    body = {
        "tools": [namespace],
        "input": [
            {"type": "function_call_output", "output": "x"},
            {"type": "message", "content": '"cursor": 7'},
        ],
    }
    events = sse(httpx.post(f"{scripted.url}/v1/responses", json=body))
    assert events[-1]["type"] == "response.completed"
    assert events[2]["item"]["type"] == "message"  # one tool result: step 1, the answer
    body["input"] = [{"type": "message", "content": "pass after=7 next time"}]
    item = sse(httpx.post(f"{scripted.url}/v1/responses", json=body))[2]["item"]
    assert (item["namespace"], item["name"]) == ("mcp__mcpsub", "wait_for_change")
    assert json.loads(item["arguments"])["after"] == 7
    gemini = {
        "tools": [{"functionDeclarations": [{"name": "mcp_mcpsub_wait_for_change"}]}],
        "contents": [{"role": "user", "parts": [{"text": "go (event 12)"}]}],
    }
    url = f"{scripted.url}/v1beta/models/x:streamGenerateContent?alt=sse"
    call = sse(httpx.post(url, json=gemini))[0]["candidates"][0]["content"]["parts"][0]
    assert call["functionCall"] == {
        "name": "mcp_mcpsub_wait_for_change",
        "args": {"uri": "test://x", "after": 12},
    }


def test_an_mcp_tool_not_offered_yet_is_waited_for_without_moving_the_script(
    scripted: m.ScriptedModel,
) -> None:
    """Codex and Claude Code start MCP servers without blocking the first request; under
    load the first requests carry no mcpsub tools. The model waits in the shell (a call
    whose result does not count) until the tool is there."""
    body: dict[str, Any] = {"tools": [{"type": "function", "name": "exec_command"}], "input": []}
    item = sse(httpx.post(f"{scripted.url}/v1/responses", json=body))[2]["item"]
    assert item["name"] == "exec_command" and item["call_id"].startswith(m.RETRY)
    body["input"] = [{"type": "function_call_output", "call_id": item["call_id"], "output": ""}]
    body["tools"].append(
        {"type": "namespace", "name": "mcp__mcpsub", "tools": [{"name": "wait_for_change"}]}
    )
    item = sse(httpx.post(f"{scripted.url}/v1/responses", json=body))[2]["item"]
    assert (item["namespace"], item["name"]) == ("mcp__mcpsub", "wait_for_change")


def test_a_body_over_the_bound_is_refused_and_logged_nowhere(
    scripted: m.ScriptedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(m, "MAX_BODY", 1000)
    response = httpx.post(f"{scripted.url}/v1/messages", content=b"x" * 1001)
    assert response.status_code == 413
    assert scripted.log == []


def test_the_lab_block_survives_a_rewrite_and_is_replaced_in_place(tmp_path: Path) -> None:
    path = tmp_path / "agents.md"
    path.write_text("# Agents\n\nold figures\n")
    splice(path, "## Agent CLIs in the lab\n\nfirst")
    splice(path, "## Agent CLIs in the lab\n\nsecond")
    text = path.read_text()
    assert text.count(START) == 1 and "second" in text and "first" not in text
    rewritten = keep_block(path, "# Agents\n\nnew figures\n")
    assert rewritten.startswith("# Agents\n\nnew figures\n") and "second" in rewritten
    assert rewritten.rstrip().endswith(END)
