"""Peers that echo what they were sent: a server whose error text quotes its request (URL with
its secret parameters, ``Authorization: Basic …``) and a webhook receiver whose answer quotes
its URL and the signing secret. Every credential the daemon or a CLI sent that peer is ``***``
wherever the peer's text is stored or shown: ``lastError`` (``show``, ``status``,
``/v1/links``), events, the daemon log, ``probe``, the face's ``list_subscriptions``, and a
delivery attempt's ``responseBody``."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from tests.hostile.helpers import put, subscribe
from tests.hostile.test_leaks import _face_http, _face_stdio
from tests.support.cli import run_cli
from tests.support.hostile import HostileServer
from tests.support.poll import until
from tests.webhooks.helpers import FAST as WEBHOOKS_FAST
from tests.webhooks.receiver import Receiver, Step

USER, PASSWORD, TOKEN = "alice", "pw-echo-1", "tok-echo-2"
BASIC = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
HOOK_KEY = "hook-echo-3"


def _echo_url(hostile: HostileServer) -> str:
    host = hostile.base_url.removeprefix("http://")
    return f"http://{USER}:{PASSWORD}@{host}/echo/mcp?token={TOKEN}&page=1"


def test_a_server_and_a_receiver_that_echo_secrets_never_get_them_shown(
    daemon_factory: Any,
    hostile_factory: Any,
    lab_server_factory: Any,
    receiver: Receiver,
) -> None:
    hostile = hostile_factory()
    lab = lab_server_factory()
    put(lab, "test://echo", "v1")
    d = daemon_factory(env=WEBHOOKS_FAST)
    hook_path = f"/hook?api_key={HOOK_KEY}&x=1"
    added = d.ctl("--json", "webhook", "add", f"http://127.0.0.1:{receiver.port}{hook_path}")
    assert added.code == 0, added
    signing = added.json["secret"]
    receiver.expect_secret(hook_path, signing)
    key = signing.removeprefix("whsec_")
    receiver.plan(
        hook_path,
        Step(status=500, body=f"bad request to {hook_path}, signed {signing} ({key})".encode()),
        then=Step(status=200),
    )
    subscribe(d, _echo_url(hostile), "hostile://echo/doc")
    subscribe(d, lab.url, "test://echo")  # its first revision makes a delivery

    def echoed() -> list[dict[str, Any]]:
        found = d.api("GET", "/v1/links").json()["links"]
        return [link for link in found if "internal error at" in (link["lastError"] or "")]

    link = until("the echoing server's error is the link's lastError", echoed)[0]
    assert "/echo/mcp?token=***&page=1 auth=Basic *** (credentials ***)" in link["lastError"]
    receiver.wait_for(lambda found: len(found) >= 2, path=hook_path)

    def attempts() -> list[dict[str, Any]]:
        answer = d.api("GET", "/v1/deliveries/1/attempts").json()
        return [a for a in answer.get("attempts", []) if a["status"] == 500]

    failed = until("the echoed answer is recorded", attempts)[0]
    assert failed["responseBody"] == "bad request to /hook?api_key=***&x=1, signed *** (***)"

    shown: list[str] = []
    for path in (
        "/v1/links",
        "/v1/status",
        "/v1/subscriptions",
        "/v1/events",
        "/v1/deliveries",
        "/v1/deliveries/1/attempts",
    ):
        response = d.api("GET", path)
        assert response.status_code == 200, (path, response.text)
        shown.append(response.text)
    for args in (("status",), ("show", "1"), ("list",), ("deliveries", "list")):
        for form in ((), ("--json",)):
            result = d.ctl(*form, *args)
            assert result.code == 0, (args, result)
            shown.append(result.stdout + result.stderr)
    for call in (_face_http, _face_stdio):
        listed = call(d, "list_subscriptions", {})
        assert "internal error at" in listed  # the face shows the error, not the secrets
        shown.append(listed)
    assert d.stop() == 0
    shown.extend(d.lines)
    secrets = (PASSWORD, TOKEN, BASIC, HOOK_KEY, signing, key)
    leaked = [(secret, text[:300]) for text in shown for secret in secrets if secret in text]
    assert not leaked, leaked
    assert any("internal error at" in line for line in d.lines)  # the log has the error
    stored = [
        *d.query("SELECT last_error FROM servers"),
        *d.query("SELECT data FROM events"),
        *d.query("SELECT response_body, error FROM delivery_attempts"),
    ]
    assert not [row for row in stored for secret in secrets if secret in str(row)], stored


@pytest.mark.parametrize(
    ("command", "env"),
    [
        (("mcpsubctl", "--json", "probe"), {}),
        (("mcpsubctl", "probe"), {"MCPSUB_AUTH_TOKEN": "bearer-echo-4"}),
        (("mcp-resource-subscriber", "--json"), {}),
    ],
)
def test_probe_output_never_shows_what_the_server_echoes(
    hostile_factory: Any, command: tuple[str, ...], env: dict[str, str]
) -> None:
    hostile = hostile_factory()
    program, *args = command
    result = run_cli(
        program,
        *args,
        "--url",
        _echo_url(hostile),
        "--uri",
        "hostile://echo/doc",
        "--timeout-ms",
        "5000",
        env=env,
    )
    assert result.code != 0, result
    output = result.stdout + result.stderr
    assert "internal error at" in output, output
    for secret in (PASSWORD, TOKEN, BASIC, "bearer-echo-4"):
        assert secret not in output, (secret, output)
    if "--json" in args:
        json.loads(result.stdout)  # still one JSON document
