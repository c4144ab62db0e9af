"""What the console reads and how a browser authenticates: the history, overview and filter
endpoints over a real migrated SQLite store, and the cookie / CSRF / login-link rules."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from service.app.diffs import MAX_LINES, DiffTooLarge, unified
from service.daemon.webapp import create_app
from service.http.sessions import (
    MAX_SESSIONS,
    MAX_TICKETS,
    SESSION_IDLE_S,
    SESSION_MAX_AGE_S,
    BrowserSessions,
)
from tests.api.fakes import FakeSupervisor, make_supervisor

pytestmark = pytest.mark.anyio

TOKEN = "console-token-value"
URL = "http://127.0.0.1:9/mcp"
NEWEST = "9223372036854775807"


async def _history(supervisor: FakeSupervisor, *texts: str) -> int:
    sub = (await supervisor.subscribe_many(URL, ["test://hist"]))[0][0]
    for text in texts:
        await supervisor.publish(sub, text)
    return sub.id


async def test_revisions_page_show_and_diff(
    client: httpx.AsyncClient, supervisor: FakeSupervisor
) -> None:
    sid = await _history(supervisor, "a\nb\n", "a\nc\n", "a\nc\nd\n")
    page = (await client.get(f"/v1/subscriptions/{sid}/revisions")).json()
    assert [r["revision"] for r in page["revisions"]] == [3, 2, 1]
    assert "contents" not in page["revisions"][0] and page["revisions"][0]["size"] > 0
    older = (await client.get(f"/v1/subscriptions/{sid}/revisions?before=3&limit=1")).json()
    assert [r["revision"] for r in older["revisions"]] == [2]
    one = (await client.get(f"/v1/subscriptions/{sid}/revisions/2")).json()
    assert one["text"] == "a\nc\n"
    diff = (await client.get(f"/v1/subscriptions/{sid}/diff?from=1&to=3")).json()
    assert "-b" in diff["lines"] and "+c" in diff["lines"] and "+d" in diff["lines"]
    assert diff["truncated"] is False
    missing = await client.get(f"/v1/subscriptions/{sid}/revisions/9")
    assert missing.status_code == 404 and missing.json()["errorCode"] == "REVISION_NOT_FOUND"
    assert (await client.get("/v1/subscriptions/999/revisions")).status_code == 404
    bad = await client.get(f"/v1/subscriptions/{sid}/diff?from=1")
    assert bad.status_code == 400


def test_diff_bounds() -> None:
    lines, cut = unified("\n".join(map(str, range(MAX_LINES))), "", "a", "b")
    assert cut and len(lines) == MAX_LINES
    with pytest.raises(DiffTooLarge):
        unified("x" * 1_000_001, "", "a", "b")


async def test_overview_links_and_filters(
    client: httpx.AsyncClient, supervisor: FakeSupervisor
) -> None:
    await supervisor.subscribe_many(URL, ["test://a/1", "test://a/2", "test://b_x"])
    await supervisor.subscribe_many("http://127.0.0.1:8/mcp", ["test://a/3"])
    overview = (await client.get("/v1/overview")).json()
    assert overview["links"] == {"total": 2, "byState": {"listening": 2}}
    assert overview["subscriptions"]["total"] == 4
    assert len(overview["revisionsPerMinute"]) == 60
    assert overview["storage"]["backend"] == "sqlite"
    links = (await client.get("/v1/links?server=127.0.0.1:8")).json()["links"]
    assert [link["url"] for link in links] == ["http://127.0.0.1:8/mcp"]
    assert links[0]["uriCount"] == 1 and "uris" not in links[0]
    assert (await client.get("/v1/links?state=open")).json()["links"] == []
    by_pattern = (await client.get("/v1/subscriptions?pattern=test://a/*")).json()
    assert [s["uri"] for s in by_pattern["subscriptions"]] == [
        "test://a/1",
        "test://a/2",
        "test://a/3",
    ]
    # "_" is literal, not LIKE's any-character.
    assert [
        s["uri"] for s in (await client.get("/v1/subscriptions?pattern=b_")).json()["subscriptions"]
    ] == ["test://b_x"]
    paged = (await client.get("/v1/subscriptions?limit=2")).json()
    assert len(paged["subscriptions"]) == 2
    rest = (await client.get(f"/v1/subscriptions?limit=2&after={paged['nextAfter']}")).json()
    assert len(rest["subscriptions"]) == 2
    server = (await client.get("/v1/subscriptions?server=127.0.0.1:8")).json()
    assert [s["uri"] for s in server["subscriptions"]] == ["test://a/3"]
    assert (await client.get("/v1/subscriptions?state=Bad!")).status_code == 400
    assert (await client.get("/v1/links?server=%01")).status_code == 400


async def test_events_tail_and_subscription_filter(
    client: httpx.AsyncClient, supervisor: FakeSupervisor
) -> None:
    sid = await _history(supervisor, "1", "2", "3")
    await _history_other(supervisor)
    tail = (await client.get("/v1/events?before=9223372036854775807&limit=2")).json()
    ids = [e["id"] for e in tail["events"]]
    assert ids == sorted(ids) and len(ids) == 2
    assert tail["nextAfter"] == ids[-1]
    mine = (await client.get(f"/v1/events?subscription={sid}&type=resource.updated")).json()
    assert [e["revision"] for e in mine["events"]] == [1, 2, 3]
    newest_two = (
        await client.get(
            f"/v1/events?subscription={sid}&type=resource.updated&before={mine['events'][-1]['id']}&limit=2"
        )
    ).json()
    assert [e["revision"] for e in newest_two["events"]] == [1, 2]


async def _history_other(supervisor: FakeSupervisor) -> None:
    sub = (await supervisor.subscribe_many(URL, ["test://other"]))[0][0]
    await supervisor.publish(sub, "x")


# ---- browser sessions ---------------------------------------------------------------------
def test_session_cookie_and_csrf() -> None:
    sessions = BrowserSessions(TOKEN)
    cookie = sessions.new_session(now=1000)
    assert TOKEN not in cookie and cookie.startswith("v2.")
    handle = sessions.session_of(cookie, now=1000)
    assert handle is not None
    assert BrowserSessions(TOKEN).session_of(cookie, now=1000) is None  # another daemon run
    # One character changed (to another one: a cookie ending in "0" made this test pass its
    # own cookie back, 1 run in 64).
    tampered = cookie[:-1] + ("1" if cookie.endswith("0") else "0")
    assert sessions.session_of(tampered, now=1000) is None
    assert sessions.session_of("v1.1000.abcdef", now=1000) is None  # the old stateless form
    assert sessions.csrf_matches(handle, sessions.csrf_for(handle))
    assert not sessions.csrf_matches(handle, None)
    other = sessions.session_of(sessions.new_session(now=1000), now=1000)
    assert other is not None and not sessions.csrf_matches(handle, sessions.csrf_for(other))


def test_sessions_end_at_logout_when_idle_when_old_and_all_at_once() -> None:
    """A session ends at logout, when idle, when old and all at once: a stateless cookie alone
    would stay good for 7 days after logout."""
    sessions = BrowserSessions(TOKEN)
    cookie = sessions.new_session(now=0)
    assert sessions.end(cookie) and sessions.session_of(cookie, now=1) is None
    assert not sessions.end(cookie)
    assert sessions.csrf_for("gone") == "" and not sessions.csrf_matches("gone", "")
    # Idle: each use moves the deadline; SESSION_IDLE_S without one ends it.
    busy = sessions.new_session(now=0)
    for step in range(1, 4):
        assert sessions.session_of(busy, now=step * (SESSION_IDLE_S - 1)) is not None
    assert sessions.session_of(busy, now=4 * SESSION_IDLE_S) is None
    # Old: however busy, a session ends SESSION_MAX_AGE_S after login.
    old = sessions.new_session(now=0)
    now = 0.0
    while now < SESSION_MAX_AGE_S - SESSION_IDLE_S:
        now += SESSION_IDLE_S / 2
        assert sessions.session_of(old, now=now) is not None
    assert sessions.session_of(old, now=SESSION_MAX_AGE_S + 1) is None
    cookies = [sessions.new_session(now=0) for _ in range(3)]
    assert sessions.revoke_all() == 3 and sessions.live == 0
    assert all(sessions.session_of(c, now=1) is None for c in cookies)


def test_live_sessions_are_bounded_and_the_least_recently_used_ends() -> None:
    sessions = BrowserSessions(TOKEN)
    first = sessions.new_session(now=0)
    second = sessions.new_session(now=0)
    assert sessions.session_of(first, now=1) is not None  # used: second is now the oldest
    for _ in range(MAX_SESSIONS * 4):  # a login flood
        sessions.new_session(now=2)
    assert sessions.live == MAX_SESSIONS
    assert sessions.session_of(second, now=3) is None and sessions.session_of(first, now=3) is None


def test_what_is_open_with_a_session_is_told_when_it_ends_however_it_ends() -> None:
    """The guard watches every request made with a cookie: logout, revoke-all, eviction and
    expiry (found by ``alive``, as the guard's timer asks at ``expires_at``) each tell it."""
    sessions = BrowserSessions(TOKEN, idle_s=10, max_age_s=100)
    told: list[str] = []

    def watched(cookie: str, name: str) -> str:
        handle = sessions.session_of(cookie, now=0)
        assert handle is not None
        sessions.watch(handle, lambda: told.append(name))
        return handle

    watched(logged_out := sessions.new_session(now=0), "logout")
    assert sessions.end(logged_out) and told == ["logout"]
    watched(sessions.new_session(now=0), "revoked")
    assert sessions.revoke_all() == 1 and told[-1] == "revoked"
    idle = watched(sessions.new_session(now=0), "idle")
    assert sessions.expires_at(idle) == 10
    assert sessions.alive(idle, now=5) and told[-1] == "revoked"
    assert not sessions.alive(idle, now=11) and told[-1] == "idle"
    assert sessions.expires_at(idle) is None
    done = watched(sessions.new_session(now=0), "finished")
    stop = sessions.watch(done, lambda: told.append("also"))
    stop()  # that request finished first: not told
    assert sessions.revoke_all() == 1 and told[-2:] == ["idle", "finished"]
    sessions.watch("gone", lambda: told.append("already"))  # an ended session: told at once
    assert told[-1] == "already"
    watched(sessions.new_session(now=0), "evicted")
    for _ in range(MAX_SESSIONS):
        sessions.new_session(now=1)
    assert told[-1] == "evicted"


def test_login_tickets_are_one_time_expire_and_are_bounded() -> None:
    sessions = BrowserSessions(TOKEN)
    ticket, ttl = sessions.new_ticket(now=0)
    assert sessions.redeem(ticket, now=1) and not sessions.redeem(ticket, now=1)
    late, _ = sessions.new_ticket(now=0)
    assert not sessions.redeem(late, now=ttl + 1)
    first, _ = sessions.new_ticket(now=0)
    for _ in range(MAX_TICKETS):
        sessions.new_ticket(now=0)
    assert not sessions.redeem(first, now=1)  # the oldest was dropped


@pytest.fixture
async def tcp(supervisor: FakeSupervisor) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(supervisor, supervisor.parts, token=TOKEN)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:7000") as c:
        yield c


async def test_cookie_login_csrf_and_login_link(tcp: httpx.AsyncClient) -> None:
    assert (await tcp.get("/ui/")).status_code == 303
    wrong = await tcp.post("/ui/login", data={"token": "nope"})
    assert wrong.status_code == 401 and "mcpsub_session" not in wrong.cookies
    good = await tcp.post("/ui/login", data={"token": TOKEN})
    assert good.status_code == 303 and good.headers["location"] == "/ui/"
    set_cookie = good.headers["set-cookie"]
    assert "HttpOnly" in set_cookie and "SameSite=strict" in set_cookie
    page = await tcp.get("/ui/")
    assert page.status_code == 200 and "Content-Security-Policy" in page.headers
    csrf = page.text.split('name="csrf-token" content="')[1].split('"')[0]
    assert len(csrf) == 64
    body = {"url": URL, "uri": "test://c"}
    assert (await tcp.post("/v1/subscriptions", json=body)).status_code == 403
    made = await tcp.post("/v1/subscriptions", json=body, headers={"X-CSRF-Token": csrf})
    assert made.status_code == 201
    tcp.cookies.clear()
    assert (await tcp.get("/v1/subscriptions")).status_code == 401
    link = await tcp.post("/v1/console/login-link", headers={"Authorization": f"Bearer {TOKEN}"})
    assert link.status_code == 201
    path = link.json()["path"]
    assert (await tcp.get(path)).status_code == 303
    assert (await tcp.get("/v1/subscriptions")).status_code == 200
    tcp.cookies.clear()
    assert (await tcp.get(path)).status_code == 401  # used once already
    here = await tcp.post("/v1/console/listener", headers={"Authorization": f"Bearer {TOKEN}"})
    assert here.json()["url"] == "http://127.0.0.1:7000"
    assert (await tcp.get(here.json()["path"])).status_code == 303


async def _log_in(tcp: httpx.AsyncClient) -> tuple[str, str]:
    """Log in with the token: (the cookie's value, the page's CSRF token)."""
    good = await tcp.post("/ui/login", data={"token": TOKEN})
    assert good.status_code == 303, good.text
    page = await tcp.get("/ui/")
    csrf = page.text.split('name="csrf-token" content="')[1].split('"')[0]
    return tcp.cookies["mcpsub_session"], csrf


async def test_logout_ends_the_session_on_the_server(
    tcp: httpx.AsyncClient, supervisor: FakeSupervisor
) -> None:
    """/ui/logout ends the session, not only the browser's copy: the same cookie must not
    answer GET /v1/status 200 and DELETE /v1/subscriptions/N 200 for 7 days."""
    sub = (await supervisor.subscribe_many(URL, ["test://kept"]))[0][0]
    cookie, csrf = await _log_in(tcp)
    assert (await tcp.get("/v1/status")).status_code == 200
    out = await tcp.post("/ui/logout", headers={"X-CSRF-Token": csrf})
    assert out.status_code == 303 and out.headers["location"] == "/ui/login"
    assert 'mcpsub_session=""' in out.headers["set-cookie"]
    # A copy of the cookie (another program read it) is refused now.
    copy = {"Cookie": f"mcpsub_session={cookie}", "X-CSRF-Token": csrf}
    status = await tcp.get("/v1/status", headers=copy)
    assert status.status_code == 401 and status.json()["errorCode"] == "API_TOKEN_REQUIRED"
    delete = await tcp.delete(f"/v1/subscriptions/{sub.id}", headers=copy)
    assert delete.status_code == 401, delete.text
    assert (await tcp.get("/ui/", headers=copy)).status_code == 303  # to the login page
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    assert (await tcp.get(f"/v1/subscriptions/{sub.id}", headers=bearer)).status_code == 200


async def test_revoke_all_ends_every_session(tcp: httpx.AsyncClient) -> None:
    first, _ = await _log_in(tcp)
    tcp.cookies.clear()
    second, _ = await _log_in(tcp)
    tcp.cookies.clear()
    for cookie in (first, second):
        answer = await tcp.get("/v1/status", headers={"Cookie": f"mcpsub_session={cookie}"})
        assert answer.status_code == 200
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    revoked = await tcp.delete("/v1/console/sessions", headers=bearer)
    assert revoked.status_code == 200 and revoked.json() == {"revoked": 2}
    for cookie in (first, second):
        answer = await tcp.get("/v1/status", headers={"Cookie": f"mcpsub_session={cookie}"})
        assert answer.status_code == 401
    assert (await tcp.delete("/v1/console/sessions", headers=bearer)).json() == {"revoked": 0}


async def test_console_on_the_unix_socket_needs_no_login(client: httpx.AsyncClient) -> None:
    page = await client.get("/ui/")
    assert page.status_code == 200 and 'content="">' in page.text
    assert (await client.get("/ui/login")).status_code == 303
    answer = await client.post("/v1/console/login-link")
    assert answer.status_code == 409 and answer.json()["errorCode"] == "CONSOLE_NEEDS_TCP"
    listener = await client.post("/v1/console/listener")  # no daemon here to open one
    assert listener.json()["errorCode"] == "CONSOLE_LISTENER_UNAVAILABLE"
    assert (
        (await client.get("/ui/static/console.js"))
        .headers["content-type"]
        .startswith("text/javascript")
    )
    assert (await client.get("/ui/static/../pages.py")).status_code == 404
    assert (await client.get("/ui/nope")).status_code == 404


def test_the_console_is_not_imported_until_asked_for() -> None:
    import subprocess
    import sys

    code = (
        "import sys, service.api.app; "
        "print(any(m.startswith('service.console') for m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


async def test_delivery_attempts_and_newest_deliveries(client: httpx.AsyncClient) -> None:
    missing = await client.get("/v1/deliveries/999/attempts")
    assert missing.status_code == 404 and missing.json()["errorCode"] == "DELIVERY_NOT_FOUND"
    newest = await client.get("/v1/deliveries?newest=true&since=0")
    assert newest.status_code == 200 and newest.json() == {"deliveries": [], "nextAfter": 0}
    assert (await client.get("/v1/deliveries?since=-1")).status_code == 400


async def test_history_and_overview_queries_on_both_backends(database_url: str) -> None:
    """The console's own queries (filters, revision pages, diffs' look-ups, the per-minute
    GROUP BY, the lease view, the events tail) on SQLite and PostgreSQL."""
    sup = await make_supervisor(database_url)
    try:
        app = create_app(sup, sup.parts, token=None)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
            sid = await _history(sup, "a\n", "b\n")
            overview = (await c.get("/v1/overview")).json()
            assert sum(overview["revisionsPerMinute"]) == 2
            assert overview["revisionsPerMinute"][-1] == 2
            assert isinstance(overview["replicas"], list)
            revs = (await c.get(f"/v1/subscriptions/{sid}/revisions")).json()["revisions"]
            assert [r["revision"] for r in revs] == [2, 1] and revs[0]["size"] > 0
            assert (await c.get(f"/v1/subscriptions/{sid}/diff?from=1&to=2")).json()["lines"]
            found = (await c.get("/v1/subscriptions?pattern=test://hi*")).json()
            assert [s["id"] for s in found["subscriptions"]] == [sid]
            tail = (await c.get(f"/v1/events?before={NEWEST}&limit=1")).json()
            assert len(tail["events"]) == 1 and tail["nextAfter"] == tail["events"][0]["id"]
    finally:
        await sup.store.close()
