"""``/v1/triggers`` in process (a real store, the fake supervisor's real runner) and the
bounds an attacker would lean on: the number of triggers, a program's output, the change on
stdin, bad input (no partial writes), and the agent face, which reaches none of it."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.api.fakes import FakeSupervisor
from tests.api.live import LiveApi
from tests.api.test_face_http import META, call
from tests.api.test_face_http import client as face_client
from tests.support.poll import until_async

pytestmark = pytest.mark.anyio
SECRET = "s3cr3t-value-only-for-the-program"


def py(code: str) -> list[str]:
    return [sys.executable, "-c", code]


async def _create(client: httpx.AsyncClient, command: list[str], **body: Any) -> dict[str, Any]:
    payload = {"program": command[0], "args": command[1:], "uriPatterns": ["test://*"], **body}
    response = await client.post("/v1/triggers", json=payload)
    assert response.status_code == 201, response.text
    return dict(response.json())


async def _count(client: httpx.AsyncClient) -> int:
    return len((await client.get("/v1/triggers")).json()["triggers"])


async def test_env_values_never_leave_the_daemon(client: httpx.AsyncClient) -> None:
    made = await _create(client, ["true"], env=["HOME", f"API_KEY={SECRET}"], name="n")
    assert made["env"] == ["HOME", "API_KEY"] and made["program"].endswith("/true")
    for path in ("/v1/triggers", f"/v1/triggers/{made['id']}", "/v1/status", "/metrics"):
        answer = await client.get(path)
        assert answer.status_code == 200 and SECRET not in answer.text


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({"program": "no-such-program-anywhere"}, "PROGRAM_NOT_FOUND", "program"),
        ({"program": "NOT_EXECUTABLE"}, "PROGRAM_NOT_FOUND", "program"),
        ({"program": "bin/true"}, "PROGRAM_NOT_FOUND", "program"),
        ({"program": ""}, "INVALID_PARAMETER", "program"),
        ({"uriPatterns": "test://*"}, "INVALID_PARAMETER", "uriPatterns"),
        ({"uriPatterns": ["a b"]}, "INVALID_PARAMETER", "uriPatterns"),
        ({"args": ["a\x00b"]}, "INVALID_PARAMETER", "args"),
        ({"args": "one string"}, "INVALID_PARAMETER", "args"),
        ({"env": ["MCPSUB_URI=x"]}, "INVALID_PARAMETER", "env"),
        ({"env": ["mcpsub_api"]}, "INVALID_PARAMETER", "env"),
        ({"env": ["1BAD"]}, "INVALID_PARAMETER", "env"),
        ({"cwd": "relative/dir"}, "INVALID_PARAMETER", "cwd"),
        ({"cwd": "/no/such/dir"}, "INVALID_PARAMETER", "cwd"),
        ({"mode": "some"}, "INVALID_PARAMETER", "mode"),
        ({"concurrency": 0}, "INVALID_PARAMETER", "concurrency"),
        ({"concurrency": 1.5}, "INVALID_PARAMETER", "concurrency"),
        ({"timeoutS": 0}, "INVALID_PARAMETER", "timeoutS"),
        ({"timeoutS": 1e9}, "INVALID_PARAMETER", "timeoutS"),
        ({"name": "a\x1b[2Jb"}, "INVALID_PARAMETER", "name"),
    ],
)
async def test_bad_input_is_refused_and_nothing_is_written(
    client: httpx.AsyncClient, body: dict[str, Any], code: str, field: str, tmp_path: Path
) -> None:
    if body.get("program") == "NOT_EXECUTABLE":
        (tmp_path / "data").write_text("not a program")
        (tmp_path / "data").chmod(0o644)
        body = {"program": str(tmp_path / "data")}
    payload = {"program": "true", "uriPatterns": ["test://*"], **body}
    response = await client.post("/v1/triggers", json=payload)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["errorCode"] == code and error["field"] == field and error["message"]
    assert code != "PROGRAM_NOT_FOUND" or "PATH" in error["hint"]
    assert await _count(client) == 0


async def test_the_number_of_triggers_is_bounded(
    client: httpx.AsyncClient, supervisor: FakeSupervisor
) -> None:
    runner = supervisor.triggers
    runner.settings = dataclasses.replace(runner.settings, max_triggers=3)
    for _ in range(3):
        await _create(client, ["true"])
    refused = await client.post("/v1/triggers", json={"program": "true", "uriPatterns": []})
    assert refused.status_code == 409 and refused.json()["errorCode"] == "TRIGGER_LIMIT"
    assert await _count(client) == 3


async def test_a_flood_of_output_keeps_only_its_tail(
    client: httpx.AsyncClient, supervisor: FakeSupervisor
) -> None:
    """Five MiB on stdout and on stderr: all read (the program is not blocked), the last
    ``tail_bytes`` kept, and the counts say how much there was."""
    runner = supervisor.triggers
    runner.settings = dataclasses.replace(runner.settings, tail_bytes=1000)
    flood = "import sys\nfor s in (sys.stdout, sys.stderr):\n    s.write('x' * (5 << 20) + 'END')"
    made = await _create(client, py(flood))
    answer = await client.post(f"/v1/triggers/{made['id']}/test")
    result = answer.json()
    assert result["ok"] and result["exitCode"] == 0, result
    assert result["stdoutBytes"] == result["stderrBytes"] == (5 << 20) + 3
    assert len(result["stdoutTail"]) == len(result["stderrTail"]) == 1000
    assert result["stdoutTail"].endswith("xEND")


async def test_the_change_on_stdin_is_bounded_like_a_webhook_body(
    client: httpx.AsyncClient, supervisor: FakeSupervisor, tmp_path: Path
) -> None:
    """A revision larger than ``max_input_bytes`` reaches the program without its content,
    marked truncated with the path to read it from; a small one in full."""
    runner = supervisor.triggers
    runner.settings = dataclasses.replace(runner.settings, max_input_bytes=4096)
    keep = tmp_path / "stdin"
    keep.mkdir()
    made = await _create(
        client,
        py(f"import os,sys; open(os.path.join({str(keep)!r}, os.environ['MCPSUB_REVISION']),"
           " 'wb').write(sys.stdin.buffer.read())"),
        uriPatterns=["test://big"],
    )  # fmt: skip
    sub, _new = await supervisor.subscribe("http://127.0.0.1:9/mcp", "test://big")
    runner.start()
    try:
        await supervisor.publish(sub, "small", activate=True)
        await supervisor.publish(sub, "y" * 100_000)

        async def both_ran() -> bool:
            runs = (await client.get("/v1/triggers/runs", params={"trigger": made["id"]})).json()
            return [r["state"] for r in runs["runs"]] == ["succeeded", "succeeded"]

        await until_async("both runs", both_ran, 60)
    finally:
        await runner.stop()
    small = json.loads((keep / "1").read_bytes())
    assert small["contents"][0]["text"] == "small" and "truncated" not in small
    big_bytes = (keep / "2").read_bytes()
    big = json.loads(big_bytes)
    assert len(big_bytes) <= 4096 and big["truncated"] is True and "contents" not in big
    assert big["contentPath"] == "/v1/content?uri=test%3A%2F%2Fbig"


def test_the_agent_face_cannot_reach_a_trigger(tmp_path: Path, migrated_db: Path) -> None:
    """An agent on ``/mcp`` (the face ``mcpsubctl mcp`` serves too) finds no tool, resource
    or method for triggers: it can neither create, change, list, see the environment of,
    nor fire one, however it asks."""
    live = LiveApi(tmp_path / "state", migrated_db).start()
    try:
        with httpx.Client(
            transport=httpx.HTTPTransport(uds=str(live.socket_path)), base_url="http://localhost"
        ) as person:
            created = person.post(
                "/v1/triggers",
                json={"program": "true", "uriPatterns": ["*"], "env": [f"KEY={SECRET}"]},
            )
            assert created.status_code == 201, created.text
            made = created.json()
        with face_client(live) as agent:
            tools = call(agent, "tools/list", {})["tools"]
            listed = json.dumps(
                [tools, call(agent, "resources/list", {}), call(agent, "resources/templates/list", {})]
            )  # fmt: skip
            assert "trigger" not in listed.lower() and SECRET not in listed
            for name in ("add_trigger", "trigger", "run_trigger", "fire_trigger"):
                body = {"name": name, "arguments": {"id": made["id"]}, **META}
                answer = agent.post(
                    "/mcp",
                    json={"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": body},
                    headers={"Mcp-Method": "tools/call", "Mcp-Name": name},
                ).json()
                assert "error" in answer or answer["result"].get("isError"), answer
            for method in ("triggers/list", "triggers/run", "trigger/add"):
                answer = agent.post(
                    "/mcp",
                    json={"jsonrpc": "2.0", "id": 1, "method": method, "params": META},
                    headers={"Mcp-Method": method},
                ).json()
                assert answer["error"]["code"] == -32601, answer
        runs = live.call(lambda sup: sup.triggers.repo.list_runs())
        assert runs == [], "nothing the agent did started a run"
    finally:
        live.stop()


def test_the_face_has_no_code_path_to_triggers() -> None:
    """The face's modules neither import the trigger package nor name its routes: what the
    face can do cannot grow a way to triggers by accident."""
    root = Path(__file__).resolve().parents[2] / "service" / "face"
    for path in root.glob("*.py"):
        text = path.read_text()
        assert "service.triggers" not in text and "/v1/triggers" not in text, path
