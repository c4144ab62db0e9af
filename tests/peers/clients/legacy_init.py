"""A 2025-era client: it only knows ``initialize`` and gives up when it is refused."""

import sys

import httpx

answer = httpx.post(
    sys.argv[1],
    headers={"Accept": "application/json, text/event-stream"},
    json={
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "lab-legacy", "version": "2025.1"},
        },
    },
    timeout=10,
)
print(answer.status_code, answer.json().get("error", {}).get("code"))
