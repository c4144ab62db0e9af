"""Leaks against the real daemon: host names no resolver can take, credentials in URLs,
ambiguous HTTP framing, and what the log says when tasks stop or clients go away."""

from __future__ import annotations

import base64
import itertools
import json
import socket
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest

from service.face import protocol as p
from tests.hostile.helpers import put, subscribe, text_of
from tests.support.cli import run_cli
from tests.support.daemon import Daemon, tcp_api_env
from tests.support.poll import until
from tests.webhooks.helpers import FAST as WEBHOOKS_FAST
from tests.webhooks.receiver import Receiver

UNENCODABLE = {
    "an IDNA label over 63 characters": "ß" * 250 + ".com",
    "an ASCII label over 63 characters": "a" * 250 + ".com",
    "an empty label": "a..example",
}
PATHS = ("/v1/webhooks", "/v1/subscriptions")


def _nothing_stored(d: Daemon) -> None:
    assert d.api("GET", "/v1/subscriptions").json()["subscriptions"] == []
    assert d.api("GET", "/v1/webhooks").json()["webhooks"] == []


def test_a_host_no_resolver_can_encode_is_refused_at_creation(daemon_factory: Any) -> None:
    """Before: 201, then the target showed INTERNAL_ERROR and its test ping answered 500."""
    d = daemon_factory()
    for (what, host), path in itertools.product(UNENCODABLE.items(), PATHS):
        body: dict[str, Any] = {"url": f"http://{host}/h"}
        if path == "/v1/subscriptions":
            body["uri"] = "test://x"
        response = d.api("POST", path, json=body)
        assert response.status_code == 400, (what, response.text)
        error = response.json()
        assert error["errorCode"] == "INVALID_URL" and error["field"] == "url", (what, error)
        assert "not a valid DNS name" in error["message"], (what, error)
        assert error["hint"], error
    _nothing_stored(d)
    # A name that encodes (IDNA) is still accepted.
    assert d.api("POST", "/v1/webhooks", json={"url": "http://bücher.example/h"}).status_code == 201


AMBIGUOUS = (
    b"POST /v1/subscriptions HTTP/1.1\r\nHost: localhost\r\n"
    b"Content-Type: application/json\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"0\r\n\r\n"
    # A second request pipelined behind it: it must never be answered.
    b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
)


def _exchange(d: Daemon, data: bytes) -> bytes:
    """Send ``data`` on one raw connection and read until the daemon closes it."""
    if d.tcp_url is not None:
        host, port = d.tcp_url.removeprefix("http://").rsplit(":", 1)
        sock = socket.create_connection((host, int(port)), timeout=10)
    else:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(10)
        sock.connect(str(d.socket_path))
    with sock:
        sock.sendall(data)
        received = b""
        while chunk := sock.recv(65536):  # a socket.timeout here: the connection stayed open
            received += chunk
        return received


@pytest.mark.parametrize("listener", ["unix", "tcp"])
def test_content_length_beside_transfer_encoding_is_400_and_closes(
    daemon_factory: Any, listener: str
) -> None:
    """RFC 9112 §6.3. Before: accepted, and the connection kept open for the next request."""
    d = daemon_factory(env=tcp_api_env() if listener == "tcp" else {})
    answer = _exchange(d, AMBIGUOUS)
    assert answer.startswith(b"HTTP/1.1 400 "), answer
    assert answer.count(b"HTTP/1.1 ") == 1, answer  # the pipelined request was not served
    assert b"connection: close" in answer.lower(), answer
    _nothing_stored(d)
    assert d.api("GET", "/healthz").status_code == 200  # the daemon serves on


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_credentials_in_urls_are_used_on_the_wire_and_never_shown(
    database_url: str, daemon_factory: Any, lab_server_factory: Any, receiver: Receiver
) -> None:
    """Before: ``user:pass@`` was redacted in the log and human output only, and in clear in
    every --json output, /v1/status, /v1/subscriptions, /v1/events, /v1/webhooks and the
    deliveries' lastError; secret query parameters were shown everywhere."""
    secrets = [f"sekrit{n}x" for n in range(6)]
    lab = lab_server_factory()
    put(lab, "test://leak", "v1")
    d = daemon_factory(env=WEBHOOKS_FAST)
    host = lab.url.removeprefix("http://")
    server = f"http://alice:{secrets[0]}@{host}?token={secrets[1]}&x=1"
    hook = f"http://bob:{secrets[2]}@127.0.0.1:{receiver.port}/hook?api_key={secrets[3]}&x=1"
    dead = f"http://carol:{secrets[4]}@127.0.0.1:{_closed_port()}/dead?sig={secrets[5]}"
    shown: list[str] = []  # every answer and output, to search for the secrets

    added = d.ctl("--json", "webhook", "add", hook)
    assert added.code == 0, added
    shown.append(added.stdout + added.stderr)
    receiver.expect_secret(f"/hook?api_key={secrets[3]}&x=1", added.json["secret"])
    created = d.api("POST", "/v1/webhooks", json={"url": dead})
    assert created.status_code == 201, created.text
    shown.append(created.text)
    subscribed = d.ctl("--json", "subscribe", "--url", server, "--uri", "test://leak")
    assert subscribed.code == 0, subscribed
    shown.append(subscribed.stdout + subscribed.stderr)

    # The credentials still go on the wire: the receiver got them, the read went through.
    delivered = receiver.wait_for(
        lambda found: len(found) >= 1, path=f"/hook?api_key={secrets[3]}&x=1"
    )
    auth = base64.b64encode(f"bob:{secrets[2]}".encode()).decode()
    assert delivered[0].headers["authorization"] == f"Basic {auth}"
    assert until("the read is stored", lambda: text_of(d, "test://leak") == "v1")

    def dead_delivery() -> dict[str, Any] | None:
        found = d.api("GET", "/v1/deliveries", params={"target": 2}).json()["deliveries"]
        return found[0] if found and found[0]["lastError"] else None

    until("the dead target's delivery has an error", dead_delivery)
    for path in (
        "/v1/status",
        "/v1/subscriptions",
        "/v1/subscriptions/1",
        "/v1/events",
        "/v1/webhooks",
        "/v1/webhooks/1",
        "/v1/webhooks/2",
        "/v1/deliveries",
    ):
        response = d.api("GET", path)
        assert response.status_code == 200, (path, response.text)
        shown.append(response.text)
    # A URL given with its credentials still finds what it named.
    found = d.api("GET", "/v1/content", params={"uri": "test://leak", "url": server})
    assert found.status_code == 200 and found.json()["text"] == "v1", found.text
    shown.append(found.text)
    assert d.api("POST", "/v1/resubscribe", params={"url": server}).json()["rechecked"] == [
        f"http://***@{host}?token=***&x=1"
    ]
    for args in (
        ("list",),
        ("status",),
        ("show", "1"),
        ("events",),
        ("webhook", "list"),
        ("deliveries", "list"),
    ):
        for form in ((), ("--json",)):
            result = d.ctl(*form, *args)
            assert result.code == 0, (args, result)
            shown.append(result.stdout + result.stderr)
    listed = d.api("GET", "/v1/subscriptions").json()["subscriptions"][0]
    assert listed["serverUrl"] == f"http://***@{host}?token=***&x=1"
    targets = d.api("GET", "/v1/webhooks").json()["webhooks"]
    assert targets[0]["url"] == f"http://***@127.0.0.1:{receiver.port}/hook?api_key=***&x=1"
    assert d.stop() == 0
    shown.extend(d.lines)
    leaked = [(secret, text[:300]) for text in shown for secret in secrets if secret in text]
    assert not leaked, leaked

    # Stored apart: the shown columns hold no credentials; only url_secret does.
    stored = [
        *d.query("SELECT url FROM servers"),
        *d.query("SELECT url FROM webhook_targets"),
        *d.query("SELECT server_url FROM events"),
        *d.query("SELECT last_error FROM deliveries"),
    ]
    assert not [row for row in stored for secret in secrets if secret in str(row[0])], stored
    assert d.query("SELECT url_secret FROM servers") == [(server,)]
    assert set(d.query("SELECT url_secret FROM webhook_targets")) == {(dead,), (hook,)}


def _errors(d: Daemon) -> list[dict[str, Any]]:
    entries = [json.loads(line) for line in d.lines if line.strip()]
    return [e for e in entries if e.get("level") in ("error", "critical")]


def test_stopped_links_and_dropped_clients_leave_no_error_in_the_log(
    daemon_factory: Any, lab_server_factory: Any
) -> None:
    """Before: asyncio's "Task was destroyed but it is pending!" at error level after an
    unsubscribe stopped a link and at SIGTERM, and an "Exception in ASGI application"
    ClientDisconnect traceback when a client went away in the middle of its body."""
    lab = lab_server_factory()
    uris = [f"test://stop{n}" for n in range(3)]
    for uri in uris:
        put(lab, uri, "v1")
    d = daemon_factory()
    ids = [subscribe(d, lab.url, uri)["id"] for uri in uris]
    until("all read", lambda: all(text_of(d, uri) == "v1" for uri in uris))

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as raw:
        raw.connect(str(d.socket_path))
        raw.sendall(
            b"POST /v1/subscriptions HTTP/1.1\r\nHost: localhost\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"url":'
        )
        # Closed at once: uvicorn parses the head (data first, then the close), the route
        # waits for the rest of the body and learns that the client is gone.
    until("the dropped client is logged", lambda: _logged(d, "client went away mid-request"))

    for sub_id in ids:  # the link stops with its last subscription
        assert d.api("DELETE", f"/v1/subscriptions/{sub_id}").status_code == 200
    until("the link is gone", lambda: not d.api("GET", "/v1/status").json()["links"])
    subscribe(d, lab.url, uris[0])  # a new link, open at SIGTERM
    until("read again", lambda: text_of(d, uris[0]) == "v1")
    assert d.stop() == 0
    assert not _errors(d), _errors(d)
    gone = _logged(d, "client went away mid-request")
    assert gone["level"] == "info" and gone["path"] == "/v1/subscriptions", gone


def _logged(d: Daemon, event: str) -> dict[str, Any] | None:
    for line in list(d.lines):
        entry = json.loads(line)
        if entry.get("event") == event:
            return entry  # type: ignore[no-any-return]
    return None


@pytest.mark.parametrize(
    "command",
    [
        ("mcpsubctl", "--json", "probe"),
        ("mcpsubctl", "--json", "call", "--tool", "echo"),
        ("mcp-resource-subscriber", "--json"),
        ("mcp-resource-subscriber", "call", "--tool", "echo", "--json"),
    ],
)
def test_the_one_shot_clis_show_no_url_credentials(command: tuple[str, ...]) -> None:
    """Before: ``serverUrl`` in --json and ``server-url`` lines printed the URL as given."""
    url = f"http://alice:sekrit7x@127.0.0.1:{_closed_port()}/mcp?access_token=sekrit8x"
    program, *args = command
    extra = ["--uri", "test://x"] if "--tool" not in args else []
    result = run_cli(program, *args, "--url", url, *extra, "--timeout-ms", "2000")
    assert result.code != 0, result
    assert "sekrit" not in result.stdout + result.stderr, result
    if "--json" in args:
        assert json.loads(result.stdout)["serverUrl"] == url.replace(
            "alice:sekrit7x@", "***@"
        ).replace("sekrit8x", "***")


def test_a_stored_target_with_an_unencodable_host_fails_by_name_not_with_500(
    daemon_factory: Any, tmp_path: Path
) -> None:
    """A target stored before the API refused such hosts: its test ping answered 500 and its
    deliveries showed INTERNAL_ERROR. Now: a permanent ``INVALID_URL`` failure."""
    state = tmp_path / "old"
    first = daemon_factory(state_dir=state)
    assert first.stop() == 0
    now = time.time()
    hosts = ("ß" * 250 + ".com", "a" * 250 + ".com")
    urls = [f"{scheme}://{host}/h" for host in hosts for scheme in ("http", "https")]
    with sqlite3.connect(state / "mcpsub.db") as db:
        db.executemany(
            "INSERT INTO webhook_targets (url, secret, created_at, updated_at)"
            " VALUES (?, 'whsec_' || ?, ?, ?)",
            [(url, base64.b64encode(b"k" * 32).decode(), now, now) for url in urls],
        )
    d = daemon_factory(state_dir=state)
    for target_id in range(1, len(urls) + 1):
        ping = d.api("POST", f"/v1/webhooks/{target_id}/test")
        assert ping.status_code == 200, (urls[target_id - 1][:12], ping.text)
        assert ping.json()["ok"] is False
        assert ping.json()["error"].startswith("INVALID_URL: the target's host"), ping.json()
    assert d.stop() == 0
    assert not _errors(d), _errors(d)


@pytest.mark.parametrize("form", [(), ("--json",)])
def test_an_unusable_url_is_not_printed_whole_in_the_next_action(form: tuple[str, ...]) -> None:
    """Before: ``recommended-next-action`` (``recommendedNextAction``) quoted the URL as
    given, though ``phase-summary`` and stderr showed it redacted."""
    url = "http://u:sekrit9x@host:99999/mcp?token=sekrit10x"
    result = run_cli("mcpsubctl", *form, "probe", "--url", url, "--uri", "test://x")
    assert result.code == 2, result
    assert "sekrit" not in result.stdout + result.stderr, result
    if form:
        action = json.loads(result.stdout)["recommendedNextAction"]
    else:
        action = result.stdout.split("recommended-next-action ", 1)[1].splitlines()[0]
    assert "'http://***@host:99999/mcp?token=***' is not usable" in action, action


FACE_META = {"_meta": {p.META_VERSION: p.MODERN, p.META_CAPS: {}}}


def _face_http(d: Daemon, name: str, arguments: dict[str, Any]) -> str:
    """One ``tools/call`` on the daemon's ``/mcp`` (2026-07-28, stateless): the raw answer."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments, **FACE_META},
    }
    headers = {
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": p.MODERN,
        "Mcp-Method": "tools/call",
        "Mcp-Name": name,
    }
    answer = d.api("POST", "/mcp", json=body, headers=headers)
    assert answer.status_code == 200 and '"result"' in answer.text, answer.text
    return answer.text


def _face_stdio(d: Daemon, name: str, arguments: dict[str, Any]) -> str:
    """One ``tools/call`` through ``mcpsubctl mcp`` (stdio): the raw answer line."""
    from tests.face.stdio_peer import StdioPeer

    peer = StdioPeer(d.state_dir)
    try:
        peer.request(0, "initialize", {"protocolVersion": "2025-03-26"})
        peer.answer(0)
        peer.request(1, "tools/call", {"name": name, "arguments": arguments})
        return json.dumps(peer.answer(1))
    finally:
        peer.close()


SERVER_NAMES = {
    # Beyond ``api_key``, ``token``, ``access_token``, ``key`` and ``sig``, and not only
    # after a ``?``.
    "older": ("password", "Secret", "client_secret", "APIKEY", "auth", "X-Session-Token"),
    # The names added to the maintained list since (OAuth, session ids, personal access
    # tokens, login tickets, the signed-URL schemes), any case.
    "newer": (
        "bearer",
        "CODE",
        "session_id",
        "SessionId",
        "pat",
        "refresh",
        "ticket",
        "Signature",
        "X-Amz-Credential",
        "X-Goog-Signature",
    ),
}
HOOK_NAMES = {
    "older": (";token", "?pwd"),
    "newer": (";sig", "?refresh_token", "&X-Amz-Signature"),
}
"""What a webhook target's URL carries: ``;name`` in its path, ``?name``/``&name`` after."""


@pytest.mark.parametrize("names", ["older", "newer"])
def test_secrets_under_other_parameter_names_are_used_on_the_wire_and_never_shown(
    database_url: str,
    daemon_factory: Any,
    lab_server_factory: Any,
    receiver: Receiver,
    names: str,
) -> None:
    """Every name of the maintained list hides its value in /v1/subscriptions, events,
    /v1/links, webhook targets, the CLIs, the face and the log, and the wire still has it."""
    server_names, hook_names = SERVER_NAMES[names], HOOK_NAMES[names]
    secrets = [f"hush{n}q" for n in range(len(server_names) + len(hook_names))]
    lab = lab_server_factory()
    put(lab, "test://leak2", "v1")
    # debug: every line the daemon can write is checked, and a link's first "listening"
    # line, which names the server URL, is debug since a start of 10,000 links logged 10,000
    d = daemon_factory(env={**WEBHOOKS_FAST, "MCPSUB_LOG_LEVEL": "debug"})
    query = "&".join(
        f"{name}={secret}" for name, secret in zip(server_names, secrets, strict=False)
    )
    server = f"{lab.url}?{query}&page=1"
    hook_secrets = secrets[len(server_names) :]
    hook_path = (
        "/hook"
        + "".join(f"{n}={v}" for n, v in zip(hook_names, hook_secrets, strict=True))
        + "&x=1"
    )
    hook = f"http://127.0.0.1:{receiver.port}{hook_path}"
    shown: list[str] = []

    added = d.ctl("--json", "webhook", "add", hook)
    assert added.code == 0, added
    shown.append(added.stdout + added.stderr)
    receiver.expect_secret(hook_path, added.json["secret"])
    subscribed = d.ctl("--json", "subscribe", "--url", server, "--uri", "test://leak2")
    assert subscribed.code == 0, subscribed
    shown.append(subscribed.stdout + subscribed.stderr)
    # The wire has them whole: the read went through, the receiver got its path as given.
    assert until("the read is stored", lambda: text_of(d, "test://leak2") == "v1")
    receiver.wait_for(lambda found: len(found) >= 1, path=hook_path)

    for path in (
        "/v1/status",
        "/v1/subscriptions",
        "/v1/subscriptions/1",
        "/v1/events",
        "/v1/links",
        "/v1/webhooks",
        "/v1/webhooks/1",
        "/v1/deliveries",
    ):
        response = d.api("GET", path)
        assert response.status_code == 200, (path, response.text)
        shown.append(response.text)
    for args in (("list",), ("status",), ("show", "1"), ("events",), ("webhook", "list")):
        for form in ((), ("--json",)):
            result = d.ctl(*form, *args)
            assert result.code == 0, (args, result)
            shown.append(result.stdout + result.stderr)
    for call in (_face_http, _face_stdio):
        shown.append(call(d, "list_subscriptions", {}))
        shown.append(call(d, "read", {"uri": "test://leak2"}))

    listed = d.api("GET", "/v1/subscriptions").json()["subscriptions"][0]
    shown_query = "&".join(f"{name}=***" for name in server_names)
    assert listed["serverUrl"] == f"{lab.url}?{shown_query}&page=1"
    target = d.api("GET", "/v1/webhooks").json()["webhooks"][0]
    shown_path = "/hook" + "".join(f"{name}=***" for name in hook_names) + "&x=1"
    assert target["url"] == f"http://127.0.0.1:{receiver.port}{shown_path}"
    assert d.stop() == 0
    shown.extend(d.lines)
    assert any(shown_query in line for line in d.lines)  # the log names the server URL
    leaked = [(secret, text[:300]) for text in shown for secret in secrets if secret in text]
    assert not leaked, leaked
    stored = [
        *d.query("SELECT url FROM servers"),
        *d.query("SELECT url FROM webhook_targets"),
        *d.query("SELECT server_url FROM events"),
    ]
    assert not [row for row in stored for secret in secrets if secret in str(row[0])], stored
    assert d.query("SELECT url_secret FROM servers") == [(server,)]
    assert d.query("SELECT url_secret FROM webhook_targets") == [(hook,)]
