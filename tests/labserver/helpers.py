"""Raw-HTTP helpers for the lab server tests.

Deliberately literal strings, not ``service.mcp.wire``: if the server and the wire module
shared a typo, tests built on ``wire`` would pass against themselves.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

VERSION = "2026-07-28"
REVIEW = "test://review/status"
SUB_ID = "io.modelcontextprotocol/subscriptionId"
SERVER_INFO = "io.modelcontextprotocol/serverInfo"


def meta(version: str = VERSION) -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientCapabilities": {},
    }


def headers(method: str, name: str | None = None, version: str = VERSION) -> dict[str, str]:
    result = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": version,
        "Mcp-Method": method,
    }
    if name is not None:
        result["Mcp-Name"] = name
    return result


def body(method: str, params: dict[str, Any] | None = None, request_id: Any = 1) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": method,
        "params": {"_meta": meta(), **(params or {})},
    }


def call(
    url: str,
    method: str,
    params: dict[str, Any] | None = None,
    *,
    request_id: Any = 1,
    name: str | None = None,
) -> httpx.Response:
    """One well-formed POST; ``Mcp-Name`` is derived like a correct client would."""
    params = params or {}
    if name is None and method in ("tools/call", "prompts/get"):
        name = params.get("name")
    if name is None and method == "resources/read":
        name = params.get("uri")
    return httpx.post(
        url, headers=headers(method, name), json=body(method, params, request_id), timeout=10
    )


def read_text(url: str, uri: str = REVIEW) -> str:
    response = call(url, "resources/read", {"uri": uri})
    assert response.status_code == 200, response.text
    text: str = response.json()["result"]["contents"][0]["text"]
    return text


@dataclass
class Event:
    """One SSE item: a JSON message, or a ``:`` comment (``message`` is then ``None``)."""

    message: dict[str, Any] | None
    comment: str | None = None


class Stream:
    """An open listen response, read frame by frame."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines = response.iter_lines()

    def next_event(self) -> Event:
        data: list[str] = []
        for line in self._lines:
            if line.startswith(":"):
                if not data:
                    return Event(None, line)
                continue
            if line == "":
                if data:
                    return Event(json.loads("\n".join(data)))
                continue
            if line.startswith("data:"):
                data.append(line[5:].lstrip(" "))
        raise EOFError("stream ended")

    def next_message(self) -> dict[str, Any]:
        """The next JSON-RPC message, skipping keep-alive comments."""
        while True:
            event = self.next_event()
            if event.message is not None:
                return event.message


@contextmanager
def listen(
    url: str,
    notifications: dict[str, Any] | None = None,
    request_id: Any = "listen-1",
    timeout: float = 10.0,
) -> Iterator[Stream]:
    """Open ``subscriptions/listen``; the caller checks ``stream.response`` status first."""
    notifications = {"resourceSubscriptions": [REVIEW]} if notifications is None else notifications
    with (
        httpx.Client(timeout=timeout) as client,
        client.stream(
            "POST",
            url,
            headers=headers("subscriptions/listen"),
            json=body("subscriptions/listen", {"notifications": notifications}, request_id),
        ) as response,
    ):
        yield Stream(response)
