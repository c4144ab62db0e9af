"""One real mcpsubd against a zoo of hostile servers plus one honest lab server.

Each hostile link must end in its named error quickly (not after a watchdog), the daemon's
peak RSS (``VmHWM`` from ``/proc``) must stay bounded, and the honest subscription on the
same daemon must keep receiving updates throughout.
"""

from __future__ import annotations

import time
from typing import Any

from tests.hostile.helpers import (
    daemon_peak_mib,
    links,
    put,
    state_changes,
    subscribe,
    subscription,
    wait_text,
)
from tests.support.poll import until

PEAK_BOUND_MIB = 250
"""The daemon idles near 60 MiB; the bombs inflate to 512 MiB, the deep frame is 400 KB."""

LINK_ERRORS = {
    # mode: (lastErrorCode, a piece of lastError)
    "deep": ("PROTOCOL_ERROR", "over-nested JSON"),
    "oversize": ("PROTOCOL_ERROR", "longer than 4194304 bytes"),
    "wrong-ids": ("PROTOCOL_ERROR", "subscriptionId"),
    "no-ack": ("SUBSCRIPTION_FAILED", "not acknowledged"),
}
READ_ERRORS = {
    # The daemon's plain-http reads ask for no content coding but undo one layer a server
    # sends anyway (tests/hostile/test_coded_answers.py), under the same bounds as the CLIs.
    "bomb": "2 stacked content codings",
    "bomb1": "larger than 16777216 bytes (after decompression)",
    "deep-read": "over-nested JSON",
}


def test_hostile_zoo_fails_by_name_and_the_honest_link_keeps_working(
    lab_server_factory, daemon_factory, hostile_factory
) -> None:
    hostile = hostile_factory({"HOSTILE_KEEPALIVE_S": "0.2", "HOSTILE_TRICKLE_S": "0.05"})
    lab = lab_server_factory({"MCP_TEST_KEEPALIVE_SECONDS": "0.2"})
    put(lab, "test://honest", "h0")
    d = daemon_factory(env={"MCPSUB_KEEPALIVE_S": "0.5", "MCPSUB_ACK_TIMEOUT_S": "1"})
    honest = subscribe(d, lab.url, "test://honest")
    wait_text(d, "test://honest", "h0")
    started = time.monotonic()
    subs = {
        mode: subscribe(d, hostile.url(mode), f"hostile://{mode}/doc")
        for mode in {**LINK_ERRORS, **READ_ERRORS, "trickle": None}
    }

    for mode, (code, message) in LINK_ERRORS.items():
        url = hostile.url(mode)

        def failed(url: str = url, code: str = code) -> dict[str, Any] | None:
            link = links(d)[url]
            return link if link["lastErrorCode"] == code and link["state"] == "backoff" else None

        link = until(f"{mode} link fails with {code}", failed, timeout=15)
        assert message in link["lastError"], link

        # The subscription shows the link's trouble instead of staying "active". Its state
        # change is written after the link's status shows it, so it is awaited, not read once.
        def showed(uri: str = f"hostile://{mode}/doc", code: str = code) -> bool:
            states = state_changes(d, uri)
            return any(s["state"] == "backoff" and code in s["reason"] for s in states)

        until(f"{mode}'s subscription shows backoff with {code}", showed, timeout=15)

    # A stream trickling bytes that never finish a frame hits the keep-alive deadline and
    # is re-listened (a lost stream is re-opened at once, not backed off), instead of
    # staying "open" forever (11.7).
    def trickle_cut() -> bool:
        return any(
            "keep-alive watchdog" in line and hostile.url("trickle") in line for line in d.lines
        )

    until("trickle stream cut by the watchdog", trickle_cut, timeout=15)
    assert links(d)[hostile.url("trickle")]["relistens"] >= 1

    for mode, message in READ_ERRORS.items():
        sub_id = subs[mode]["id"]

        def read_failed(sub_id: int = sub_id) -> bool:
            return subscription(d, sub_id)["state"] == "error"

        until(f"{mode} read fails", read_failed, timeout=20)
        assert message in subscription(d, sub_id)["stateReason"]

    # Every hostile link was judged at once, not by a 45 s watchdog.
    assert time.monotonic() - started < 20

    for n in range(1, 4):
        put(lab, "test://honest", f"h{n}")
        wait_text(d, "test://honest", f"h{n}", timeout=10)
    assert subscription(d, honest["id"])["state"] == "active"
    assert d.proc is not None and d.proc.poll() is None
    assert daemon_peak_mib(d) < PEAK_BOUND_MIB, daemon_peak_mib(d)
