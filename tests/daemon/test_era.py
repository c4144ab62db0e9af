"""In the daemon, a pre-2026 server parks its link in ``error``, re-checked slowly.

The daemon runs with a 0.5 s backoff cap (tests/support/daemon.py FAST_ENV), so a link that
treated PROTOCOL_UNSUPPORTED as a retryable failure would be back within half a second; the
terminal state instead waits ``protocol_recheck_s`` (an hour) or for ``resubscribe``/SIGHUP.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.daemon import Daemon
from tests.support.lab import LabServer
from tests.support.poll import until

SLOW = {"MCP_TEST_UPDATE_DELAY_SECONDS": "600"}
REVIEW = "test://review/status"


def wait_link(d: Daemon, ok: Callable[[dict[str, Any]], bool], timeout: float = 15.0) -> Any:
    def reached() -> Any:
        links = d.api("GET", "/v1/status").json()["links"]
        return links[0] if links and ok(links[0]) else None

    return until("the link reaches the expected state", reached, timeout)


def answers(lab: LabServer) -> int:
    """How many requests the legacy mode answered (errors and 2025-only discover results)."""
    return sum(
        1
        for e in lab.log()
        if (e["event"] == "http.error" and e.get("injected")) or e["event"] == "legacy.answer"
    )


@pytest.mark.parametrize(
    ("mode", "code", "needle"),
    [
        ("not-initialized", "PROTOCOL_UNSUPPORTED", "2026-07-28"),
        ("missing-session", "PROTOCOL_UNSUPPORTED", "2026-07-28"),
        ("discover-2025", "PROTOCOL_UNSUPPORTED", "2026-07-28"),
        ("not-found", "ENDPOINT_NOT_FOUND", "path"),
    ],
)
def test_pre_2026_server_is_terminal_and_rechecked_on_demand(
    lab_server_factory: Any, daemon_factory: Any, mode: str, code: str, needle: str
) -> None:
    lab = lab_server_factory(SLOW)
    lab.configure(legacyMode=mode)
    d = daemon_factory()
    assert d.api("POST", "/v1/subscriptions", json={"url": lab.url, "uri": REVIEW}).is_success
    link = wait_link(d, lambda ln: ln["state"] == "error")
    assert link["lastErrorCode"] == code
    assert needle in link["lastErrorHint"]
    # Slow schedule, not a backoff: next try in about an hour.
    assert link["backoffUntil"] - time.time() > 3000
    assert answers(lab) == 1
    status = d.ctl("status")
    assert status.code == 0
    assert code in status.stdout and link["lastErrorHint"] in status.stdout
    sub = d.api("GET", "/v1/subscriptions").json()["subscriptions"][0]
    assert sub["state"] == "error"

    # `mcpsubctl resubscribe` re-checks at once, once.
    result = d.ctl("resubscribe", "--json")
    assert result.code == 0, result
    assert result.json == {"rechecked": [lab.url]}
    lab.wait_event("legacy.answer" if mode == "discover-2025" else "http.error", count=2)
    wait_link(d, lambda ln: ln["state"] == "error" and ln["backoffUntil"] - time.time() > 3000)
    assert answers(lab) == 2

    # The server is upgraded; SIGHUP is the other way to say "try again now".
    lab.configure(legacyMode=None)
    assert d.proc is not None
    d.proc.send_signal(signal.SIGHUP)
    link = wait_link(d, lambda ln: ln["state"] == "open")
    assert link["lastErrorCode"] is None and link["lastErrorHint"] is None
