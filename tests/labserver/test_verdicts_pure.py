"""labserver.verdicts on hand-built logs: the edges real clients are slow or awkward to hit."""

from __future__ import annotations

import io
from typing import Any

from labserver.console import Console
from labserver.eventlog import EventLog
from labserver.report import VerdictLine
from labserver.verdicts import (
    ACK_IGNORE_SECONDS,
    REREAD_GRACE,
    Grouper,
    group,
    judge,
    report_markdown,
)

REVIEW = "test://review/status"


class Log:
    """Builds entries the way the lab records them (seq, time, request links)."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self.t = 1000.0

    def add(self, event: str, request: int | None = None, dt: float = 0.01, **f: Any) -> int:
        self.t += dt
        entry = {"seq": len(self.entries) + 1, "time": self.t, "event": event, **f}
        if request is not None:
            entry["request"] = request
        self.entries.append(entry)
        return entry["seq"]

    def request(
        self,
        method: str,
        name: str | None = "c",
        ua: str = "ua/1",
        era: str = "2026-07-28",
        dt: float = 0.01,
        **f: Any,
    ) -> int:
        info = {"name": name, "version": "1"} if name else None
        return self.add(
            "mcp.request",
            dt=dt,
            method=method,
            clientInfo=info,
            userAgent=ua,
            remote="127.0.0.1",
            era=era,
            headers=f.pop("headers", {"method": "ok", "name": "n/a"}),
            **f,
        )

    def listen(self, honored: list[str] | None = None, dt: float = 0.01) -> int:
        rq = self.request("subscriptions/listen", dt=dt)
        self.add("listen.opened", rq, subscriptionId=rq, filter={"resourceSubscriptions": [REVIEW]})
        self.add(
            "listen.acknowledged",
            rq,
            subscriptionId=rq,
            honored={"resourceSubscriptions": [REVIEW] if honored is None else honored},
        )
        return rq

    def read(self, version: int = 1, dt: float = 0.01) -> None:
        rq = self.request("resources/read", headers={"method": "ok", "name": "ok"}, dt=dt)
        self.add("resources.read", rq, uri=REVIEW, version=version)


def full_cycle(log: Log) -> None:
    log.request("server/discover")
    rq = log.request("resources/list")
    log.add("resources.list", rq)
    log.read()
    stream = log.listen()
    log.read()  # pre-completion read after listening: prompted, not polling
    log.add("notification.sent", stream, method="notifications/resources/updated", uri=REVIEW)
    log.read(version=2)
    log.add("listen.closed", stream, reason="client")


def test_full_cycle_passes() -> None:
    log = Log()
    full_cycle(log)
    (verdict,) = judge(log.entries, log.t)
    assert verdict.outcome == "passed"
    assert [i.status for i in verdict.items] == ["pass"] * 7
    assert verdict.mistakes == []


def test_requests_without_client_info_join_the_client_with_the_same_user_agent() -> None:
    log = Log()
    full_cycle(log)
    log.request("notifications/cancelled", name=None, notification=True)
    log.request("server/discover", name=None, ua="curl/8")
    groups = group(log.entries)
    assert sorted(groups) == ["c 1", "curl/8 @ 127.0.0.1"]
    assert groups["c 1"][-1]["method"] == "notifications/cancelled"


def test_listen_still_open_is_pending_not_failed() -> None:
    log = Log()
    log.request("server/discover")
    log.read()
    log.listen()
    (verdict,) = judge(log.entries, log.t)
    assert verdict.item("notified").status == "pending"
    assert verdict.item("closed").status == "pending"
    assert verdict.outcome == "incomplete"


def test_no_reread_is_pending_within_the_grace_and_a_mistake_after_it() -> None:
    log = Log()
    log.request("server/discover")
    stream = log.listen()
    log.add("notification.sent", stream, method="notifications/resources/updated", uri=REVIEW)
    (soon,) = judge(log.entries, log.t + 0.1)
    assert soon.item("reread").status == "pending" and soon.mistakes == []
    (later,) = judge(log.entries, log.t + REREAD_GRACE)
    assert later.item("reread").status == "fail"
    assert [m.id for m in later.mistakes] == ["never-rereads"]


def test_a_read_before_the_notification_is_not_a_reread() -> None:
    log = Log()
    log.request("server/discover")
    stream = log.listen()
    log.read()
    log.add("notification.sent", stream, method="notifications/resources/updated", uri=REVIEW)
    log.add("listen.closed", stream, reason="client")
    (verdict,) = judge(log.entries, log.t)
    assert verdict.item("reread").status == "fail"


def test_tight_relisten_loop() -> None:
    log = Log()
    log.request("server/discover")
    for _ in range(5):
        stream = log.listen(dt=0.05)
        log.add("listen.closed", stream, reason="client")
    (verdict,) = judge(log.entries, log.t)
    assert "relisten-loop" in [m.id for m in verdict.mistakes]
    slow = Log()
    slow.request("server/discover")
    for _ in range(5):
        stream = slow.listen(dt=1.0)
        slow.add("listen.closed", stream, reason="client")
    (relaxed,) = judge(slow.entries, slow.t)
    assert "relisten-loop" not in [m.id for m in relaxed.mistakes]


def test_waiting_on_a_stream_whose_ack_dropped_the_uri_ignores_the_ack() -> None:
    log = Log()
    log.request("server/discover")
    stream = log.listen(honored=[])
    (early,) = judge(log.entries, log.t + 0.5)
    assert early.mistakes == []
    assert early.item("listened").status == "fail"
    log.add("listen.closed", stream, dt=ACK_IGNORE_SECONDS, reason="client")
    (verdict,) = judge(log.entries, log.t)
    assert [m.id for m in verdict.mistakes] == ["ignores-ack"]


def test_a_stream_the_lab_dropped_is_not_the_clients_unclean_close() -> None:
    # "dropped" is only ever the lab's doing (control or dropAfterAckMs); a client that goes
    # away is "client".
    log = Log()
    full_cycle(log)
    log.entries[-1]["reason"] = "dropped"
    (verdict,) = judge(log.entries, log.t)
    assert verdict.item("closed").status == "pass"
    assert verdict.item("closed").note == "ended by the lab (dropped)"


def test_2025_initialize_then_2026_discover_connects_with_a_note() -> None:
    log = Log()
    rq = log.request("initialize", era="2025", headers=None)
    log.add("http.error", rq, status=400, code=-32022)
    log.request("server/discover")
    (verdict,) = judge(log.entries, log.t)
    assert verdict.item("connected").status == "pass"
    assert verdict.item("connected").note == "also tried a 2025-era initialize"
    assert verdict.era == "2026-07-28 (tried 2025 initialize)"
    assert "legacy-only" not in [m.id for m in verdict.mistakes]


def test_markdown_has_one_section_per_client_with_marks_and_stamps() -> None:
    log = Log()
    full_cycle(log)
    log.request("server/discover", name="other")
    text = report_markdown(judge(log.entries, log.t), log.t)
    assert text.count("\n## ") == 2
    assert "- ✅ Called resources/list: `00:16:40.030Z #" in text
    assert "- ❌ Read the resource" in text


def test_listing_is_shown_but_not_needed_to_pass() -> None:
    log = Log()
    full_cycle(log)
    unlisted = [e for e in log.entries if e["event"] != "resources.list"]
    (verdict,) = judge(unlisted, log.t)
    assert verdict.item("listed").status == "fail"
    assert verdict.outcome == "passed"
    assert verdict.summary().endswith("; no resources/list)")


def test_lab_legacy_mode_refusals_are_not_the_clients_fault() -> None:
    log = Log()
    rq = log.request("server/discover")
    log.add("http.error", rq, status=400, code=-32022, injected=True)
    (verdict,) = judge(log.entries, log.t)
    # The lab answered as a 2025-era server by its own fault knob, and the client stopped:
    # nothing after discovery was possible, so nothing is held against it.
    assert verdict.item("connected").status == "n/a"
    assert "legacyMode" in verdict.item("connected").note
    assert {i.status for i in verdict.items if i.id != "listed"} == {"n/a"}
    assert verdict.outcome == "passed"
    assert "fault injection made these impossible" in verdict.summary()
    log.entries[-1].pop("injected")  # the same refusal from the real ladder is the client's
    (blamed,) = judge(log.entries, log.t)
    assert blamed.outcome == "failed"


def test_console_line_is_printed_once_per_outcome_and_client() -> None:
    out = io.StringIO()
    eventlog = EventLog()
    VerdictLine(eventlog, Console("info", out))
    log = Log()
    full_cycle(log)
    for entry in log.entries:  # replay through the real log (no event loop: judged at once)
        fields = {k: v for k, v in entry.items() if k not in ("seq", "time", "event")}
        eventlog.record(entry["event"], **fields)
    eventlog.record("listen.closed", request=log.entries[-1]["request"], reason="client")
    lines = out.getvalue().splitlines()
    assert lines == [
        "[lab/verdict] c 1: passed the full cycle (read, listen, update, re-read, close)"
    ]


def test_grouper_files_unnamed_requests_under_the_last_named_client_of_their_origin() -> None:
    grouper = Grouper(max_requests=2)
    named = {
        "event": "mcp.request",
        "seq": 1,
        "clientInfo": {"name": "a", "version": "1"},
        "userAgent": "ua",
        "remote": "h",
    }
    unnamed = {
        "event": "mcp.request",
        "seq": 2,
        "clientInfo": None,
        "userAgent": "ua",
        "remote": "h",
    }
    stranger = {
        "event": "mcp.request",
        "seq": 3,
        "clientInfo": None,
        "userAgent": "x",
        "remote": "h",
    }
    assert grouper.key_of(named) == "a 1"
    assert grouper.key_of(unnamed) == "a 1"
    assert grouper.key_of(stranger) == "x @ h"
    assert grouper.key_of({"event": "resources.read", "seq": 4, "request": 2}) == "a 1"
    assert grouper.key_of({"event": "resources.read", "seq": 5, "request": 1}) is None  # bounded
    assert grouper.key_of({"event": "resource.updated", "seq": 6}) is None


def test_client_chosen_text_cannot_reach_the_terminal_raw() -> None:
    log = Log()
    evil = "evil\x1b[2J\nname\u202e"
    log.request("server/discover", name=evil, ua="ua\x07")
    log.request("bad\x1bmethod", name=evil, headers={"method": "missing", "name": "n/a"})
    (verdict,) = judge(log.entries, log.t)
    text = report_markdown([verdict], log.t)
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert "## evil\\x1b[2J\\x0aname\\u202e 1\n" in text
    assert "bad\\x1bmethod: Mcp-Method missing" in text
    assert "\x1b" not in verdict.summary()


def test_a_partly_honored_stream_is_worth_keeping() -> None:
    log = Log()
    log.request("server/discover")
    rq = log.request("subscriptions/listen")
    wanted = {"resourceSubscriptions": [REVIEW, "test://other"]}
    log.add("listen.opened", rq, subscriptionId=rq, filter=wanted)
    log.add(
        "listen.acknowledged", rq, subscriptionId=rq, honored={"resourceSubscriptions": [REVIEW]}
    )
    (verdict,) = judge(log.entries, log.t + 2 * ACK_IGNORE_SECONDS)
    assert verdict.mistakes == []


def test_a_new_session_reads_first_without_polling() -> None:
    # Seed 000: "repeated probes each see the update". Each run is a new process that
    # discovers, reads, listens and re-reads: its first read follows the previous run's
    # re-read with no listen between, yet it is not a polling read.
    log = Log()
    for _ in range(3):
        full_cycle(log)
    (verdict,) = judge(log.entries, log.t)
    assert verdict.mistakes == []
    assert verdict.outcome == "passed"
    # Without a new discovery the same reads are a loop.
    loop = Log()
    loop.request("server/discover")
    for _ in range(3):
        loop.read()
    (polling,) = judge(loop.entries, loop.t)
    assert [m.id for m in polling.mistakes] == ["polling"]


def test_a_listen_the_lab_withheld_everything_from_is_not_the_clients_fault() -> None:
    log = Log()
    log.request("server/discover")
    log.read()
    rq = log.request("subscriptions/listen")
    log.add("listen.opened", rq, subscriptionId=rq, filter={"resourceSubscriptions": [REVIEW]})
    log.add("listen.acknowledged", rq, subscriptionId=rq, honored={}, withheld=[REVIEW])
    log.add("listen.closed", rq, subscriptionId=rq, reason="graceful")
    (verdict,) = judge(log.entries, log.t)
    statuses = {i.id: i.status for i in verdict.items}
    assert statuses["listened"] == "n/a" and statuses["notified"] == "n/a"
    assert statuses["reread"] == "n/a" and statuses["closed"] == "pass"
    assert verdict.outcome == "passed"
    # Without the lab's knob (a URI the client made up) it is the client's incomplete run.
    log.entries[-2]["withheld"] = []
    (own,) = judge(log.entries, log.t)
    assert own.item("listened").status == "fail" and own.outcome == "incomplete"


def test_streams_the_lab_keeps_ending_before_any_update_spare_the_update_items() -> None:
    log = Log()
    log.request("server/discover")
    for _ in range(3):
        stream = log.listen(dt=1.5)
        log.read()
        log.add("listen.closed", stream, subscriptionId=stream, reason="graceful")
    (verdict,) = judge(log.entries, log.t)
    assert verdict.item("notified").status == "n/a"
    assert verdict.item("reread").status == "n/a"
    assert verdict.outcome == "passed", verdict.summary()
    # One stream, ended by the lab, never listened for again: not spared.
    once = Log()
    once.request("server/discover")
    stream = once.listen()
    once.read()
    once.add("listen.closed", stream, subscriptionId=stream, reason="graceful")
    (quitter,) = judge(once.entries, once.t)
    assert quitter.item("notified").status == "fail"
    assert quitter.outcome == "incomplete"


def test_injected_answers_to_reads_and_listens_are_the_labs() -> None:
    log = Log()
    log.request("server/discover")
    rq = log.request("resources/read", headers={"method": "ok", "name": "ok"})
    log.add("http.error", rq, status=500, code=None, injected=True)
    rq = log.request("subscriptions/listen")
    log.add("request.held", rq, method="subscriptions/listen")
    (verdict,) = judge(log.entries, log.t)
    assert verdict.item("read").status == "n/a"
    assert verdict.item("listened").status == "n/a"
    assert verdict.outcome == "passed"


def test_a_2025_era_discover_answer_from_the_labs_knob_is_not_a_connection() -> None:
    # legacyMode "discover-2025" answers discover with HTTP 200 listing only 2025 revisions:
    # a client that stops there did right, and it did not connect with 2026-07-28.
    log = Log()
    rq = log.request("server/discover")
    log.add("legacy.answer", rq, method="server/discover", status=200)
    (verdict,) = judge(log.entries, log.t)
    assert verdict.item("connected").status == "n/a"
    assert verdict.outcome == "passed"


def test_a_reread_the_lab_answered_with_its_fault_is_not_a_missing_reread() -> None:
    log = Log()
    log.request("server/discover")
    log.read()
    stream = log.listen()
    log.add("notification.sent", stream, method="notifications/resources/updated", uri=REVIEW)
    rq = log.request("resources/read", headers={"method": "ok", "name": "ok"})
    log.add("http.error", rq, status=500, code=None, injected=True)
    log.add("listen.closed", stream, reason="client")
    (verdict,) = judge(log.entries, log.t)
    assert verdict.item("reread").status == "n/a"
    assert verdict.mistakes == [] and verdict.outcome == "passed"


def test_a_reread_asked_for_counts_even_if_the_run_ends_before_the_answer() -> None:
    # readDelayMs: the client re-read at once, the lab took a second to answer, and the run
    # ended in between (no resources.read served). It did re-read.
    log = Log()
    log.request("server/discover")
    log.read()
    stream = log.listen()
    log.add("notification.sent", stream, method="notifications/resources/updated", uri=REVIEW)
    log.request("resources/read", headers={"method": "ok", "name": "ok"}, uri=REVIEW)
    log.add("listen.closed", stream, reason="client")
    (verdict,) = judge(log.entries, log.t)
    assert verdict.item("reread").status == "pass"
    assert verdict.mistakes == [] and verdict.outcome == "passed"
