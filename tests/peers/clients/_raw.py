"""A deliberately small raw-HTTP MCP client for the lab's bad-client scripts.

Literal strings, not ``service.mcp.wire``: these scripts imitate other people's clients.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx

VERSION = "2026-07-28"
REVIEW = "test://review/status"


class RawClient:
    def __init__(self, url: str, name: str, *, headers: bool = True) -> None:
        self.url = url
        self.info = {"name": name, "version": "1.0.0"}
        self.send_headers = headers
        self.http = httpx.Client(timeout=10)
        self.next_id = 0

    def _post(self, method: str, params: dict[str, Any], name: str | None = None) -> Any:
        self.next_id += 1
        body = {
            "jsonrpc": "2.0",
            "id": self.next_id,
            "method": method,
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": VERSION,
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": self.info,
                },
                **params,
            },
        }
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": VERSION}
        if self.send_headers:
            headers["Mcp-Method"] = method
            if name is not None:
                headers["Mcp-Name"] = name
        return body, headers

    def call(
        self, method: str, params: dict[str, Any] | None = None, name: str | None = None
    ) -> Any:
        body, headers = self._post(method, params or {}, name)
        return self.http.post(self.url, json=body, headers=headers).json()

    def read(self, uri: str = REVIEW) -> str:
        answer = self.call("resources/read", {"uri": uri}, name=uri)
        text: str = answer["result"]["contents"][0]["text"]
        return text

    @contextmanager
    def listen(self, uri: str = REVIEW) -> Iterator[Iterator[dict[str, Any]]]:
        """Open a listen stream; yields an iterator of its JSON-RPC messages."""
        body, headers = self._post(
            "subscriptions/listen", {"notifications": {"resourceSubscriptions": [uri]}}
        )
        with self.http.stream("POST", self.url, json=body, headers=headers) as response:

            def messages() -> Iterator[dict[str, Any]]:
                for line in response.iter_lines():
                    if line.startswith("data:"):
                        yield json.loads(line[5:])

            yield messages()
