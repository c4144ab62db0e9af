"""service.daemon.linkmachine without sockets, clocks or a store: every state against every
event (the table), then each decision the link used to make inline: what an acknowledgement
writes and holds, how a stream's end is taken, which failure parks the link where and for how
long, what a read of the link is told, and what the link shows."""

from __future__ import annotations

import random
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from service.backoff import Backoff
from service.daemon.config import Settings
from service.daemon.linkmachine import (
    ALLOWED,
    RELISTEN_LIMIT_HINT,
    Ack,
    Down,
    LinkMachine,
    LinkMachineError,
    Opened,
    Relisten,
    Wake,
)
from service.daemon.linkstatus import LinkState
from service.failures import INTERNAL_ERROR_HINT, state_hint
from service.mcp import wire
from service.mcp.errors import (
    HttpStatusError,
    JsonRpcError,
    McpError,
    ProtocolUnsupported,
    ProtocolViolation,
    TransportError,
)
from service.mcp.listen import Closed, Failed, Lost
from service.mcp.relisten import MIN_LIFETIME_S, Phase, RelistenPolicy
from service.store.linkstate import StateChange

WANTED = {"a://1": 11, "a://2": 12}
URIS = sorted(WANTED)
LIVED = MIN_LIFETIME_S + 5.0
"""A ``now`` at which a stream acknowledged at 0 has lived."""


def machine(listens_per_minute: int = 60, **settings: Any) -> LinkMachine:
    """A machine with a deterministic policy: no jitter anywhere, so delays can be compared."""
    s = Settings(backoff_base_s=1.0, backoff_cap_s=300.0, **settings)
    policy = RelistenPolicy(
        Backoff(base_s=1.0, cap_s=300.0, jitter=0),
        listens_per_minute=listens_per_minute,
        relisten_jitter_s=0.0,
        rng=random.Random(7),
    )
    m = LinkMachine(s, policy)
    for uri, sid in WANTED.items():
        m.want(uri, sid)
    return m


def opened(m: LinkMachine, honored: list[str] | None = None, now: float = 0.0) -> Opened | Down:
    """Listen, acknowledge and commit: the link's steps from CONNECTING to OPEN."""
    assert m.listening(now) is None
    ack = m.acknowledged(now, URIS, URIS if honored is None else honored, {})
    return m.opened(ack, m.generation + 1, [], reread_all=True)


def in_state(state: LinkState) -> LinkMachine:
    """A machine brought to ``state`` through its own transitions."""
    m = machine(listens_per_minute=3)
    if state is LinkState.IDLE:
        return m
    if state is LinkState.STOPPED:
        m.stopped()
        return m
    if state is LinkState.RELEASED:
        m.released()
        return m
    m.connect()
    if state is LinkState.CONNECTING:
        assert m.listening(0.0) is None  # the listen is out
        return m
    if state is LinkState.OPEN:
        assert isinstance(opened(m), Opened)
        return m
    down: Down | None
    if state is LinkState.BACKOFF:
        down = m.failed(TransportError("refused"))
    elif state is LinkState.THROTTLED:
        for _ in range(3):
            assert m.listening(0.0) is None
        down = m.listening(0.0)
    elif state is LinkState.NOT_HONORED:
        down = m.discovered({})
    elif state is LinkState.LOGIN_REQUIRED:
        down = m.failed(HttpStatusError(401))
    else:
        assert state is LinkState.ERROR
        down = m.failed(ProtocolUnsupported("2025-era only"))
    assert down is not None
    m.enter(down, 1000.0)
    assert m.state is state
    return m


def _keep_ack() -> Ack:
    return Ack(tuple(URIS), frozenset(URIS), (), (), keep=True)


# event -> (the call, the state it leaves an allowed state in; None: unchanged)
EVENTS: dict[str, tuple[Callable[[LinkMachine], object], LinkState | None]] = {
    "connect": (lambda m: m.connect(), LinkState.CONNECTING),
    "idle": (lambda m: m.idle(), LinkState.IDLE),
    "discovered": (lambda m: m.discovered({"subscribe": True}), None),
    "listening": (lambda m: m.listening(0.0), None),
    "acknowledged": (lambda m: m.acknowledged(1.0, URIS, URIS, {}), None),
    "opened": (lambda m: m.opened(_keep_ack(), 5, [], reread_all=True), LinkState.OPEN),
    "ended": (lambda m: m.ended(LIVED, Closed({})), LinkState.CONNECTING),
    "failed": (lambda m: m.failed(TransportError("reset")), None),
    "listen_failed": (lambda m: m.listen_failed(TimeoutError()), None),
    "crashed": (lambda m: m.crashed(RuntimeError("bug"), 1), None),
    "enter": (
        lambda m: m.enter(Down(LinkState.BACKOFF, "X", "x", None, 1.0), 0.0),
        LinkState.BACKOFF,
    ),
    "waited": (lambda m: m.waited(recheck=True, changed=True), None),
    "released": (lambda m: m.released(), LinkState.RELEASED),
    "stopped": (lambda m: m.stopped(), LinkState.STOPPED),
}


def test_the_table_names_every_event() -> None:
    assert set(EVENTS) == set(ALLOWED)


@pytest.mark.parametrize("state", list(LinkState))
@pytest.mark.parametrize("event", list(EVENTS))
def test_every_state_against_every_event(state: LinkState, event: str) -> None:
    m = in_state(state)
    call, after = EVENTS[event]
    if state not in ALLOWED[event]:
        with pytest.raises(LinkMachineError, match=f"{event} is not allowed in state"):
            call(m)
        assert m.state is state, "a refused event moves nothing"
        return
    call(m)
    assert m.state is (after or state)


# -- discover and the listen budget ---------------------------------------------------------
def test_a_server_that_offers_no_subscriptions_is_not_asked_and_says_so() -> None:
    m = machine()
    m.connect()
    assert m.discovered({"subscribe": True}) is None
    down = m.discovered({"listChanged": True})
    assert down is not None
    assert (down.state, down.code, down.wake) == (
        LinkState.NOT_HONORED,
        "SUBSCRIPTION_NOT_HONORED",
        Wake.CHANGE,
    )
    assert down.delay_s == m.settings.not_honored_retry_s
    assert down.subscriptions == ("not_honored", down.message)
    assert "resources.subscribe" in down.message and not down.counted


def test_the_listen_budget_throttles_and_only_a_recheck_ends_the_wait() -> None:
    m = machine(listens_per_minute=2)
    m.connect()
    assert m.listening(0.0) is None and m.listening(1.0) is None
    down = m.listening(2.0)
    assert down is not None
    assert (down.state, down.code, down.hint, down.wake) == (
        LinkState.THROTTLED,
        "RELISTEN_LIMIT",
        RELISTEN_LIMIT_HINT,
        Wake.RECHECK,
    )
    assert down.delay_s == pytest.approx(58.0)
    assert down.message.startswith("2 listens in the last minute")
    assert m.listening(60.5) is None, "the window passed"


# -- the acknowledgement ---------------------------------------------------------------------
def test_an_acknowledgement_writes_active_not_honored_and_lasting_read_errors() -> None:
    m = machine()
    m.want("a://3", 13)
    m.connect()
    assert m.listening(0.0) is None
    uris = ["a://1", "a://2", "a://3"]
    broken = JsonRpcError(wire.INVALID_PARAMS, "unknown")
    ack = m.acknowledged(0.0, uris, ["a://1", "a://2", "other://x"], {"a://2": broken})
    assert ack.keep and ack.honored == {"a://1", "a://2"}
    assert ack.not_honored == (13,)
    assert ack.changes == (
        StateChange([11], "active", unread="pending"),
        StateChange(
            (13,),
            "not_honored",
            "the server's acknowledgement did not include this URI",
            "SUBSCRIPTION_NOT_HONORED",
        ),
        StateChange(
            [12],
            "error",
            "RESOURCE_NOT_FOUND: unknown (JSON-RPC -32602)",
            "RESOURCE_NOT_FOUND",
        ),
    )
    assert m.acked_this_session


def test_a_failing_read_without_an_error_yet_is_neither_active_nor_rewritten() -> None:
    m = machine()
    m.connect()
    assert m.listening(0.0) is None
    ack = m.acknowledged(0.0, URIS, URIS, {"a://1": None})
    assert ack.changes[0] == StateChange([12], "active", unread="pending")
    assert len(ack.changes) == 2


def test_opened_holds_the_stream_and_rereads_every_honored_uri_or_the_added_ones() -> None:
    m = machine()
    m.connect()
    m.last_error = "before"
    first = opened(m, honored=["a://1"])
    assert first == Opened(("a://1",), retry_not_honored=True)
    assert m.state is LinkState.OPEN and m.generation == 1
    assert m.honored == {"a://1"} and m.listened == set(URIS)
    assert m.last_error is None and m.backoff_until is None
    m.want("a://3", 13)
    assert m.wants_relisten()
    assert m.listening(1.0) is None
    ack = m.acknowledged(1.0, [*URIS, "a://3"], [*URIS, "a://3"], {})
    assert m.opened(ack, 2, [13], reread_all=False) == Opened(
        ("a://2", "a://3"), retry_not_honored=False
    )
    assert not m.wants_relisten()
    assert m.is_unread(13) and not m.is_unread(11)


def test_an_ack_that_honors_nothing_is_final_for_that_listen() -> None:
    m = machine()
    m.connect()
    down = opened(m, honored=[])
    assert isinstance(down, Down)
    assert (down.state, down.code, down.wake, down.subscriptions) == (
        LinkState.NOT_HONORED,
        "SUBSCRIPTION_NOT_HONORED",
        Wake.CHANGE,
        None,  # the acknowledgement's own transaction wrote the subscriptions' states
    )
    assert "honored none of the 2 URI(s)" in down.message
    assert m.generation == 1, "the acknowledgement's generation is the link's"
    m.enter(down, 100.0)
    m.waited(recheck=False, changed=True)
    assert m.policy.phase is Phase.READY


def test_the_slow_retry_of_left_out_uris_forces_a_whole_listen() -> None:
    m = machine()
    m.connect()
    opened(m, honored=["a://1"])
    assert not m.wants_relisten()
    assert m.retry_not_honored() and m.wants_relisten()
    m2 = machine()
    m2.connect()
    opened(m2)
    assert not m2.retry_not_honored(), "nothing left out: nothing to retry"


# -- how a stream ends -------------------------------------------------------------------------
def test_a_stream_that_lived_is_listened_again_at_once() -> None:
    m = machine()
    m.connect()
    opened(m)
    decided = m.ended(LIVED, Lost("reset"))
    assert decided == Relisten(0.0, "the listen stream was lost: reset")
    assert m.state is LinkState.CONNECTING
    assert (m.relistens, m.reconnects) == (1, 1)
    assert opened(m, now=LIVED) == Opened(tuple(URIS), retry_not_honored=False)
    assert m.ended(2 * LIVED, Closed({})) == Relisten(0.0, "the server closed the listen stream")


def test_streams_that_keep_ending_young_back_off() -> None:
    m = machine()
    m.connect()
    opened(m)
    assert isinstance(m.ended(0.1, Closed({})), Relisten), "one young death: at once"
    opened(m, now=0.2)
    down = m.ended(0.3, Closed({}))
    assert isinstance(down, Down)
    assert (down.state, down.code, down.counted, down.wake) == (
        LinkState.BACKOFF,
        "SUBSCRIPTION_DISCONNECTED",
        True,
        Wake.RECHECK,
    )
    assert "keep ending young (2 in a row" in down.message
    assert down.delay_s >= 0.5, "the upper half of the ceiling: never near zero"
    assert down.subscriptions == ("backoff", f"SUBSCRIPTION_DISCONNECTED: {down.message}")
    m.enter(down, 50.0)
    assert m.reconnects == 2 and m.backoff_until == 50.0 + down.delay_s


@pytest.mark.parametrize(
    ("end", "code", "start"),
    [
        (Failed(JsonRpcError(wire.INTERNAL_ERROR, "boom")), "SUBSCRIPTION_FAILED", "the listen"),
        (ProtocolViolation("5 MB event"), "PROTOCOL_ERROR", "listen stream broke the protocol"),
        (McpError("listen reader crashed: x"), "INTERNAL_ERROR", "listen stream broke"),
    ],
)
def test_a_stream_that_fails_after_its_ack_backs_off_on_a_growing_schedule(
    end: Failed | McpError, code: str, start: str
) -> None:
    m = machine()
    delays = []
    for _ in range(3):
        m.connect()
        opened(m)
        down = m.ended(LIVED, end)
        assert isinstance(down, Down) and down.code == code
        assert down.message.startswith(start) and down.state is LinkState.BACKOFF
        delays.append(down.delay_s)
        m.enter(down, 0.0)
        m.waited(recheck=False, changed=False)
    assert delays == [1.0, 2.0, 4.0], "an ack alone does not reset the failures"


def _young_end(m: LinkMachine) -> Relisten | Down:
    assert isinstance(m.ended(0.1, Closed({})), Relisten)
    opened(m, now=0.2)
    return m.ended(0.3, Closed({}))


def _opened_then(end: Any) -> Callable[[LinkMachine], Relisten | Down]:
    def step(m: LinkMachine) -> Relisten | Down:
        opened(m)
        return m.ended(LIVED, end)

    return step


@pytest.mark.parametrize(
    "step",
    [
        lambda m: m.listen_failed(TimeoutError()),
        lambda m: m.listen_failed(JsonRpcError(wire.INTERNAL_ERROR, "busy")),
        lambda m: m.failed(TransportError("refused")),
        lambda m: m.failed(HttpStatusError(503)),
        lambda m: m.failed(HttpStatusError(401)),
        lambda m: m.failed(ProtocolUnsupported("2025-era only")),
        lambda m: m.failed(RuntimeError("bug")),
        lambda m: m.crashed(RuntimeError("bug"), 1),
        lambda m: (opened(m), _young_end(m))[1],
        _opened_then(Failed(JsonRpcError(wire.INTERNAL_ERROR, "boom"))),
        _opened_then(ProtocolViolation("5 MB event")),
        _opened_then(McpError("listen reader crashed: x")),
        lambda m: opened(m, honored=[]),
        lambda m: m.storage_failed("OperationalError: database or disk is full"),
    ],
    ids=[
        "not-acked-in-time",
        "listen-refused",
        "network",
        "http-503",
        "login",
        "protocol-unsupported",
        "unexpected",
        "crashed",
        "ending-young",
        "failed-after-ack",
        "broke-protocol-after-ack",
        "reader-crashed",
        "honored-none",
        "storage",
    ],
)
def test_every_down_tells_a_person_what_to_do(
    step: Callable[[LinkMachine], Relisten | Opened | Down],
) -> None:
    """``lastErrorHint`` is never empty while a link is down: the CI run that found the
    listen's own failures (``SUBSCRIPTION_FAILED``, ``SUBSCRIPTION_DISCONNECTED``) without
    one."""
    m = machine()
    m.connect()
    down = step(m)
    assert isinstance(down, Down), down
    assert down.hint and down.hint.strip(), down


def test_a_store_that_cannot_write_backs_off_as_storage_not_as_a_bug() -> None:
    m = machine()
    m.connect()
    down = m.storage_failed("OperationalError: database or disk is full")
    assert (down.state, down.code, down.unexpected, down.counted) == (
        LinkState.BACKOFF,
        "STORAGE_FAILING",
        False,
        True,
    )
    assert down.message.endswith("database or disk is full")
    assert down.hint == state_hint("STORAGE_FAILING") and "free space" in down.hint
    assert down.delay_s == 1.0, "the failure schedule's first step"


def test_relistening_within_a_spent_budget_is_throttled() -> None:
    m = machine(listens_per_minute=1)
    m.connect()
    opened(m)
    down = m.ended(LIVED, Closed({}))
    assert isinstance(down, Down) and down.state is LinkState.THROTTLED
    assert m.relistens == 0


# -- failures --------------------------------------------------------------------------------
def test_failures_before_any_ack_back_off_on_the_policy_schedule() -> None:
    m = machine()
    delays = []
    for exc in (TransportError("refused"), TimeoutError(), HttpStatusError(503)):
        m.connect()
        down = m.listen_failed(exc) if isinstance(exc, TimeoutError) else m.failed(exc)
        assert down.state is LinkState.BACKOFF and down.counted
        delays.append(down.delay_s)
        m.enter(down, 0.0)
        m.waited(recheck=False, changed=False)
    assert delays == [1.0, 2.0, 4.0]
    m.waited(recheck=True, changed=True)
    assert m.policy.failures == 0, "a recheck starts the schedule over"


def test_a_relisten_that_fails_after_an_ack_this_session_waits_the_first_step() -> None:
    m = machine()
    m.connect()
    opened(m)
    m.policy.failures = 5
    down = m.listen_failed(JsonRpcError(wire.INTERNAL_ERROR, "busy"))
    assert (down.code, down.delay_s) == ("SUBSCRIPTION_FAILED", 1.0)
    assert down.message.startswith("listen refused: busy")


@pytest.mark.parametrize(
    ("exc", "state", "code", "hint", "retry"),
    [
        (TimeoutError(), LinkState.BACKOFF, "SUBSCRIPTION_FAILED", "classified", None),
        (TransportError("refused"), LinkState.BACKOFF, "NETWORK_ERROR", "classified", None),
        (
            TransportError("slow", kind="timeout"),
            LinkState.BACKOFF,
            "REQUEST_TIMEOUT",
            "classified",
            None,
        ),
        (HttpStatusError(401), LinkState.LOGIN_REQUIRED, "AUTH_LOGIN_REQUIRED", None, "login"),
        (
            JsonRpcError(wire.INTERNAL_ERROR, "no", http_status=403),
            LinkState.LOGIN_REQUIRED,
            "AUTH_LOGIN_REQUIRED",
            None,
            "login",
        ),
        (
            ProtocolUnsupported("2025-era only"),
            LinkState.ERROR,
            "PROTOCOL_UNSUPPORTED",
            "exc",
            "protocol",
        ),
        (RuntimeError("bug"), LinkState.BACKOFF, "INTERNAL_ERROR", "classified", None),
    ],
)
def test_the_failure_class_decides_the_state(
    exc: BaseException, state: LinkState, code: str, hint: str | None, retry: str | None
) -> None:
    m = machine()
    m.connect()
    down = m.listen_failed(exc)
    assert (down.state, down.code) == (state, code)
    if hint == "exc":
        assert down.hint == getattr(exc, "hint", None)
    elif hint is not None:
        assert down.hint, "a person is told what to do"
    if retry == "login":
        assert down.delay_s == m.settings.login_retry_s and down.wake is Wake.CHANGE
        assert "refused our credentials" in down.message
    elif retry == "protocol":
        assert down.delay_s == m.settings.protocol_recheck_s and down.wake is Wake.CHANGE
    else:
        assert down.wake is Wake.RECHECK and down.counted
    assert down.unexpected is (code == "INTERNAL_ERROR")
    expected = (state.value, down.message)
    if state is LinkState.BACKOFF:
        expected = ("backoff", f"{code}: {down.message}")
    assert down.subscriptions == expected


def test_a_login_the_token_store_asks_for_parks_the_link() -> None:
    class LoginNeeded(McpError):
        error_code = "AUTH_LOGIN_REQUIRED"

    m = machine()
    m.connect()
    down = m.failed(LoginNeeded("run mcpsubctl login"))
    assert (down.state, down.message, down.hint) == (
        LinkState.LOGIN_REQUIRED,
        "run mcpsubctl login",
        state_hint("AUTH_LOGIN_REQUIRED"),
    )


def test_a_crash_is_shown_as_internal_error_and_backed_off() -> None:
    m = in_state(LinkState.OPEN)
    down = m.crashed(RuntimeError("boom"), 2)
    assert (down.state, down.code, down.hint) == (
        LinkState.BACKOFF,
        "INTERNAL_ERROR",
        INTERNAL_ERROR_HINT,
    )
    assert down.message == "link task crashed: RuntimeError('boom')"
    assert not down.counted and down.delay_s <= 4.0


def test_enter_shows_the_decision_until_the_next_ack() -> None:
    m = machine()
    m.connect()
    down = m.failed(TransportError("refused"))
    m.enter(down, 1000.0)
    assert (m.state, m.last_error, m.last_error_code, m.last_error_hint) == (
        LinkState.BACKOFF,
        "refused",
        "NETWORK_ERROR",
        down.hint,
    )
    assert m.backoff_until == 1000.0 + down.delay_s and m.reconnects == 1
    m.waited(recheck=False, changed=True)
    m.connect()
    opened(m)
    assert m.last_error is m.last_error_code is m.backoff_until is None


# -- what reads are told ---------------------------------------------------------------------
def test_updates_for_sub_resources_reach_their_subscribed_root() -> None:
    m = machine()
    m.want("file:///dir/", 20)
    m.want("file:///dir", 21)
    m.connect()
    assert m.listening(0.0) is None
    uris = sorted(m.wanted)
    ack = m.acknowledged(0.0, uris, uris, {})
    m.opened(ack, 1, [], reread_all=True)
    assert m.targets("a://1") == ["a://1"]
    assert sorted(m.targets("file:///dir/a/b.txt")) == ["file:///dir", "file:///dir/"]
    assert m.targets("file:///other") == []
    assert m.reads("a://1") and not m.reads("file:///dir/a")
    m.unwant("a://1")
    assert not m.reads("a://1"), "unwanted since the update came"


def _targets_by_table(honored: frozenset[str], uri: str) -> set[str]:
    """Sub-resource matching as a table of the honored URIs by their form without trailing
    slashes (what the machine held per link before): the reference for :meth:`targets`."""
    if uri in honored:
        return {uri}
    roots: dict[str, list[str]] = {}
    for h in honored:
        roots.setdefault(h.rstrip("/"), []).append(h)
    found: set[str] = set()
    cut = uri.find("/")
    while cut != -1:
        found.update(roots.get(uri[:cut], ()))
        cut = uri.find("/", cut + 1)
    return found


_PATHS = st.text(alphabet="ab/", max_size=8)


@given(honored=st.frozensets(_PATHS, max_size=6), uri=_PATHS)
def test_sub_resource_matching_without_a_table_finds_what_the_table_found(
    honored: frozenset[str], uri: str
) -> None:
    m = machine()
    for i, h in enumerate(sorted(honored)):
        m.want(h, 100 + i)
    m.connect()
    assert m.listening(0.0) is None
    uris = sorted(m.wanted)
    m.opened(m.acknowledged(0.0, uris, uris, {}), 1, [], reread_all=True)
    found = m.targets(uri)
    assert len(found) == len(set(found)), "each target once"
    assert set(found) == _targets_by_table(m.honored, uri)


def test_an_open_link_holds_one_set_of_its_uris_in_wanteds_own_strings() -> None:
    """A daemon holds thousands of links: the stream's URIs and the honored ones are one set
    when equal, made of the wanted set's strings (not the acknowledgement's copies), no table
    beside it, and no unread set once every first read is stored."""
    m = LinkMachine(Settings())
    uris = [f"test://bench/{i}" for i in range(100)]
    for i, uri in enumerate(uris):
        m.want(uri, i)
    copies = ["".join(list(u)) for u in uris]  # the server's strings: equal, not the same
    m.connect()
    assert m.listening(0.0) is None
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        ack = m.acknowledged(0.0, sorted(m.wanted), copies, {})
        m.opened(ack, 1, range(100), reread_all=True)
        for i in range(100):
            m.read_stored(i, generation=1)
        del ack
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert m.listened is m.honored
    wanted_strings = {id(u) for u in m.wanted}
    assert all(id(u) in wanted_strings for u in m.honored)
    assert not m.unread and m.unread is LinkMachine(Settings()).unread, "the shared empty set"
    assert held <= sys.getsizeof(m.honored) * 1.2, f"{held} bytes held for one set of URIs"
    assert m.targets("test://bench/7/part") == ["test://bench/7"]


def test_a_read_activates_only_on_an_open_link_that_honors_it() -> None:
    m = machine()
    m.connect()
    assert m.listening(0.0) is None
    ack = m.acknowledged(0.0, URIS, ["a://1"], {})
    m.opened(ack, 3, [11], reread_all=True)
    assert m.activates("a://1", 11, failing=False), "first read"
    assert not m.activates("a://1", 99, failing=False), "had a read and was not failing"
    assert m.activates("a://1", 99, failing=True)
    assert not m.activates("a://2", 12, failing=True), "not honored"
    assert m.shows_read_errors()
    m.read_stored(11, generation=2)
    assert m.is_unread(11), "a read stored under an older generation proves nothing now"
    m.read_stored(11, generation=3)
    assert not m.is_unread(11)
    m.enter(m.failed(TransportError("reset")), 0.0)
    assert not m.activates("a://1", 11, failing=True) and not m.shows_read_errors()


def test_the_watchdog_flags_an_open_stream_silent_for_three_keepalives() -> None:
    m = in_state(LinkState.OPEN)
    limit = m.settings.keepalive_s * 3
    assert not m.silent(100.0 + limit, 100.0)
    assert m.silent(100.0 + limit + 0.1, 100.0)
    assert not in_state(LinkState.CONNECTING).silent(1e9, 0.0), "only an open stream"


def test_want_and_unwant_report_a_change() -> None:
    m = machine()
    assert not m.want("a://1", 11), "the same subscription again"
    assert m.want("a://1", 99)
    assert m.unwant("a://1") and not m.unwant("a://1")


def test_a_state_hint_backs_every_backoff_code() -> None:
    m = machine()
    m.connect()
    opened(m)
    down = m.ended(LIVED, Failed(JsonRpcError(wire.INTERNAL_ERROR, "x")))
    assert isinstance(down, Down)
    assert down.hint == state_hint("SUBSCRIPTION_FAILED")


def test_links_of_the_same_settings_share_one_backoff_schedule() -> None:
    settings = Settings()
    assert LinkMachine(settings).backoff is LinkMachine(settings).backoff
