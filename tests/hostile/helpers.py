"""Small waits and reads shared by the hostile tests (real daemon, real servers)."""

from __future__ import annotations

from typing import Any

from tests.support.daemon import Daemon
from tests.support.hostile import peak_rss_kib
from tests.support.lab import LabServer
from tests.support.poll import until


def subscribe(d: Daemon, url: str, uri: str) -> dict[str, Any]:
    response = d.api("POST", "/v1/subscriptions", json={"url": url, "uri": uri})
    assert response.status_code in (200, 201), response.text
    result: dict[str, Any] = response.json()
    return result


def put(lab: LabServer, uri: str, text: str) -> None:
    lab.control(
        "PUT", "/lab/resources", json={"uri": uri, "text": text, "notify": True}
    ).raise_for_status()


def text_of(d: Daemon, uri: str) -> str | None:
    response = d.api("GET", "/v1/content", params={"uri": uri})
    return response.json()["text"] if response.status_code == 200 else None


def wait_text(d: Daemon, uri: str, text: str, timeout: float = 20.0) -> None:
    until(f"{uri} == {text!r}", lambda: text_of(d, uri) == text, timeout)


def links(d: Daemon) -> dict[str, dict[str, Any]]:
    return {link["url"]: link for link in d.api("GET", "/v1/status").json()["links"]}


def subscription(d: Daemon, sub_id: int) -> dict[str, Any]:
    result: dict[str, Any] = d.api("GET", f"/v1/subscriptions/{sub_id}").json()
    return result


def metric(d: Daemon, name: str) -> float:
    for line in d.api("GET", "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def daemon_peak_mib(d: Daemon) -> float:
    assert d.proc is not None
    return peak_rss_kib(d.proc.pid) / 1024


def state_changes(d: Daemon, uri: str) -> list[dict[str, Any]]:
    """The ``subscription.state`` events of ``uri``: their data (state, reason, previous)."""
    events = d.api(
        "GET", "/v1/events", params={"uri": uri, "type": "subscription.state", "limit": 1000}
    ).json()["events"]
    return [e["data"] for e in events]
