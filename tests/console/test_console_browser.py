"""The console driven in headless Chromium as a person would use it, against a real daemon
(loopback TCP, its token) and a real lab server: log in, watch a change arrive without a
reload, compare two revisions, see markup as text; and the refusals a browser meets."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect

from service.safetext import visible
from tests.console.conftest import shot, subscribe, wait_until
from tests.support.browser import NARROW
from tests.support.cli import REPO_ROOT
from tests.support.daemon import Daemon
from tests.support.lab import LabServer
from tests.webhooks.receiver import Receiver, Step


def test_login_with_the_token(context: Any, daemon: Daemon, screenshots: Path) -> None:
    page = context.new_page()
    page.goto(f"{daemon.tcp_url}/ui/")
    expect(page).to_have_url(f"{daemon.tcp_url}/ui/login")
    shot(page, screenshots, "login")
    page.get_by_label("API token").fill("not-the-token")
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#login-message")).to_contain_text("not right")
    page.get_by_label("API token").fill(daemon.token)
    page.get_by_label("API token").press("Enter")  # the keyboard is enough
    expect(page).to_have_url(f"{daemon.tcp_url}/ui/")
    expect(page.locator("#live-text")).to_have_text("Live: connected")
    cookie = next(c for c in context.cookies() if c["name"] == "mcpsub_session")
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    assert daemon.token not in cookie["value"]
    # Keyboard: the first Tab reaches "Skip to content", Enter moves to the page's content,
    # and the navigation is reachable in reading order.
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    assert page.evaluate("document.activeElement.id") == "main"
    page.get_by_role("link", name="Links & subscriptions").focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{daemon.tcp_url}/ui/links")
    expect(page.get_by_role("link", name="Links & subscriptions")).to_have_attribute(
        "aria-current", "page"
    )


def test_a_change_appears_live_on_the_overview_and_the_subscription_page(
    logged_in: Any, context: Any, daemon: Daemon, lab: LabServer, screenshots: Path
) -> None:
    sub = subscribe(daemon, lab, "test://console/live", "first line\nsecond line\n")
    overview = logged_in
    expect(overview.locator("#live-text")).to_have_text("Live: connected")
    detail = context.new_page()
    detail.goto(f"{daemon.tcp_url}/ui/subscriptions/{sub['id']}")
    expect(detail.locator("#live-text")).to_have_text("Live: connected")
    expect(detail.locator("#revisions tbody tr")).to_have_count(1)
    for page in (overview, detail):
        page.evaluate("window.__notReloaded = true")
    lab.control(
        "PUT",
        "/lab/resources",
        json={"uri": "test://console/live", "text": "first line\nchanged\n"},
    ).raise_for_status()
    expect(overview.locator("#recent li").first).to_contain_text("test://console/live revision 2")
    expect(detail.locator("#revisions tbody tr")).to_have_count(2)
    expect(detail.locator("#summary")).to_contain_text("2")
    for page in (overview, detail):
        assert page.evaluate("window.__notReloaded") is True
    expect(overview.locator("#subs-total")).not_to_have_text("–")
    expect(overview.locator("#links-by-state")).to_contain_text("open")
    shot(overview, screenshots, "overview")

    # The diff between the two revisions, chosen with the radio buttons.
    detail.get_by_label("compare from revision 1").check()
    detail.get_by_label("compare to revision 2").check()
    detail.get_by_role("button", name="Compare selected revisions").click()
    diff = detail.locator("#diff")
    expect(diff).to_contain_text("-second line")
    expect(diff).to_contain_text("+changed")
    detail.get_by_role("button", name="Show #1").click()
    expect(detail.locator("#content")).to_have_text("first line\nsecond line\n")
    shot(detail, screenshots, "subscription")

    # The links page lists the link and the subscription; filters narrow them.
    links = context.new_page()
    links.goto(f"{daemon.tcp_url}/ui/links")
    expect(links.locator("#subscriptions")).to_contain_text("test://console/live")
    links.get_by_label("URI pattern (* is a wildcard)").fill("*nothing-matches*")
    links.get_by_role("button", name="Filter").click()
    expect(links.locator("#subscriptions tbody tr")).to_have_count(0)
    links.get_by_label("URI pattern (* is a wildcard)").fill("test://console/*")
    links.get_by_role("button", name="Filter").click()
    expect(links.locator("#subscriptions")).to_contain_text("test://console/live")
    shot(links, screenshots, "links")
    links.set_viewport_size(NARROW)
    shot(links, screenshots, "links-narrow")


def test_markup_in_a_resource_renders_as_text(
    logged_in: Any, daemon: Daemon, lab: LabServer
) -> None:
    hostile = '<script>window.__pwned = 1</script><b id="injected">bold</b><img src=x onerror="window.__pwned=2">'
    uri = "test://console/<i>markup</i>"
    sub = subscribe(daemon, lab, uri, hostile)
    page = logged_in
    page.goto(f"{daemon.tcp_url}/ui/subscriptions/{sub['id']}")
    expect(page.locator("#content")).to_have_text(hostile)
    expect(page.locator("#title")).to_have_text(uri)
    assert page.locator("#injected").count() == 0
    assert page.locator("main i").count() == 0
    assert page.evaluate("window.__pwned") is None
    page.goto(f"{daemon.tcp_url}/ui/events")
    expect(page.locator("#events")).to_contain_text(uri)
    assert page.locator("main i").count() == 0


def test_requests_without_the_cookie_or_from_another_origin_are_refused(
    logged_in: Any, context: Any, daemon: Daemon
) -> None:
    base = daemon.tcp_url
    assert base is not None
    with httpx.Client(base_url=base) as anonymous:
        assert anonymous.get("/v1/status").status_code == 401
        page = anonymous.get("/ui/links")
        assert page.status_code == 303 and page.headers["location"] == "/ui/login"
        login = anonymous.get("/ui/login")
        assert "script-src 'self'" in login.headers["content-security-policy"]
        assert anonymous.get("/ui/login?ticket=made-up").status_code == 401
    cookie = next(c for c in context.cookies() if c["name"] == "mcpsub_session")
    csrf = logged_in.locator('meta[name="csrf-token"]').get_attribute("content")
    body = {"url": "http://127.0.0.1:9/mcp", "uri": "test://refused"}
    with httpx.Client(base_url=base, cookies={"mcpsub_session": cookie["value"]}) as browser:
        assert browser.get("/v1/overview").status_code == 200  # the cookie reads
        no_csrf = browser.post("/v1/subscriptions", json=body)
        assert no_csrf.status_code == 403
        assert no_csrf.json()["errorCode"] == "CSRF_TOKEN_REQUIRED"
        foreign = browser.post(
            "/v1/subscriptions",
            json=body,
            headers={"X-CSRF-Token": csrf, "Origin": "http://evil.example"},
        )
        assert foreign.status_code == 403
        assert foreign.json()["errorCode"] == "ORIGIN_NOT_ALLOWED"
        wrong = browser.post("/v1/subscriptions", json=body, headers={"X-CSRF-Token": "0" * 64})
        assert wrong.status_code == 403
    # The page's own script, without the header, is refused as well.
    status = logged_in.evaluate(
        """async () => (await fetch('/v1/subscriptions', {method: 'POST',
            headers: {'Content-Type': 'application/json'},
            body: JSON.stringify({url: 'http://127.0.0.1:9/mcp', uri: 'test://refused'})})).status"""
    )
    assert status == 403
    assert not any(
        s["uri"] == "test://refused"
        for s in daemon.api("GET", "/v1/subscriptions").json()["subscriptions"]
    )
    # Logging out ends the session in this browser.
    logged_in.get_by_role("button", name="Log out").click()
    expect(logged_in).to_have_url(f"{base}/ui/login")
    logged_in.goto(f"{base}/ui/")
    expect(logged_in).to_have_url(f"{base}/ui/login")


def test_logout_ends_the_session_for_every_copy_of_the_cookie(
    logged_in: Any, context: Any, daemon: Daemon, lab: LabServer
) -> None:
    """Logout ends the session, not only the browser's copy: another program that read the
    cookie must not get 200 on GET /v1/status and DELETE /v1/subscriptions/N."""
    base = daemon.tcp_url
    assert base is not None
    sub = subscribe(daemon, lab, "test://console/kept", "kept")
    cookie = next(c for c in context.cookies() if c["name"] == "mcpsub_session")["value"]
    csrf = logged_in.locator('meta[name="csrf-token"]').get_attribute("content")
    headers = {"Cookie": f"mcpsub_session={cookie}", "X-CSRF-Token": csrf}
    with httpx.Client(base_url=base, headers=headers) as copy:
        assert copy.get("/v1/status").status_code == 200  # the copy works while logged in
        logged_in.get_by_role("button", name="Log out").click()
        expect(logged_in).to_have_url(f"{base}/ui/login")
        assert copy.get("/v1/status").status_code == 401
        assert copy.delete(f"/v1/subscriptions/{sub['id']}").status_code == 401
        assert copy.get("/ui/", follow_redirects=False).headers["location"] == "/ui/login"
    assert daemon.api("GET", f"/v1/subscriptions/{sub['id']}").status_code == 200


def test_a_failing_webhook_target_is_retried_from_the_page_once_fixed(
    logged_in: Any, daemon: Daemon, lab: LabServer, screenshots: Path
) -> None:
    receiver = Receiver().start()
    try:
        receiver.plan(
            "/hook", Step(503, body=b'{"error": "receiver down <b>bold</b>"}'), then=Step(200)
        )
        page = logged_in
        page.goto(f"{daemon.tcp_url}/ui/webhooks")
        page.get_by_label("Endpoint URL").fill(receiver.url("/hook"))
        page.get_by_label("URI patterns (comma-separated, optional)").fill("test://hooked/*")
        page.get_by_role("button", name="Add target").click()
        expect(page.locator("#secret-box")).to_contain_text("whsec_")
        secret = page.locator("#secret-box").inner_text().split(": ")[-1].strip()
        receiver.expect_secret("/hook", secret)
        expect(page.locator("#targets")).to_contain_text(receiver.url("/hook"))

        subscribe(daemon, lab, "test://hooked/a", "hello hooks")
        receiver.wait_count("/hook", 1)
        row = page.locator("#deliveries tbody tr", has_text="test://hooked/a")
        expect(row).to_contain_text("failed", timeout=10_000)
        delivery_id = row.locator("td").first.inner_text()
        page.get_by_role("button", name=f"Attempts of delivery {delivery_id}").click()
        attempts = page.locator("#attempts")
        expect(attempts).to_contain_text("HTTP 503")
        expect(attempts).to_contain_text('{"error": "receiver down <b>bold</b>"}')
        expect(attempts).to_contain_text("webhook-signature: v1,")
        expect(attempts).to_contain_text('"uri":"test://hooked/a"')
        assert page.locator("#attempts b").count() == 0
        expect(page.locator("#targets")).to_contain_text("failing")

        # The receiver answers 200 from now on (its plan is spent): retry from the page.
        page.get_by_role("button", name=f"Retry delivery {delivery_id}").click()
        expect(row).to_contain_text("delivered", timeout=10_000)
        expect(attempts).to_contain_text("Attempt 2", timeout=10_000)
        expect(attempts).to_contain_text("delivered, HTTP 200")
        assert len(receiver.wait_count("/hook", 2)) == 2
        expect(page.locator("#targets")).to_contain_text("healthy")
        page.get_by_role("button", name="Send a test to target").first.click()
        expect(page.locator("#notice")).to_contain_text("answered 200")
        shot(page, screenshots, "webhooks")
    finally:
        receiver.close()
    assert not receiver.verification_errors()


TRIGGER_PROGRAM = """
import os, sys
print("<b>bold</b> from the program \\x1b[31m")
print("to stderr", file=sys.stderr)
sys.exit(3 if os.path.exists(sys.argv[1]) else 0)
"""


def test_a_trigger_s_runs_and_output_are_shown_and_retried_from_the_page(
    logged_in: Any, daemon: Daemon, lab: LabServer, screenshots: Path, tmp_path: Path
) -> None:
    script, fail = tmp_path / "program.py", tmp_path / "fail"
    script.write_text(TRIGGER_PROGRAM)
    fail.write_text("")
    made = daemon.api(
        "POST",
        "/v1/triggers",
        json={
            "name": "console-trigger",
            "program": sys.executable,
            "args": [str(script), str(fail)],
            "uriPatterns": ["test://triggered/*"],
            "env": ["TOKEN=never-shown-value"],
        },
    )
    assert made.status_code == 201, made.text
    trigger_id = made.json()["id"]
    page = logged_in
    page.goto(f"{daemon.tcp_url}/ui/triggers")
    expect(page.locator("#triggers")).to_contain_text("console-trigger")
    expect(page.locator("#triggers")).to_contain_text("active")
    expect(page.locator("#triggers")).to_contain_text("env TOKEN")

    subscribe(daemon, lab, "test://triggered/a", "hello triggers")
    row = page.locator("#runs tbody tr", has_text="test://triggered/a")
    expect(row).to_contain_text("dead", timeout=20_000)
    expect(row).to_contain_text("exit status 3")
    run_id = row.locator("td").first.inner_text()
    page.get_by_role("button", name=f"Output of run {run_id}").click()
    attempts = page.locator("#run-attempts")
    expect(attempts).to_contain_text("Attempt 1")
    expect(attempts).to_contain_text("exit 3")
    expect(attempts).to_contain_text("<b>bold</b> from the program \\x1b[31m")
    expect(attempts).to_contain_text("to stderr")
    assert page.locator("#run-attempts b").count() == 0
    expect(page.locator("#triggers")).to_contain_text(f"run {run_id} dead", timeout=10_000)

    fail.unlink()
    page.get_by_role("button", name=f"Retry run {run_id}").click()
    expect(row).to_contain_text("succeeded", timeout=20_000)
    expect(attempts).to_contain_text("Attempt 2", timeout=10_000)
    expect(attempts).to_contain_text("exit 0")
    page.get_by_role("button", name=f"Pause trigger {trigger_id}").click()
    expect(page.locator("#triggers")).to_contain_text("paused")
    assert "never-shown-value" not in page.content()
    shot(page, screenshots, "triggers")
    page.goto(f"{daemon.tcp_url}/ui/")
    expect(page.locator("#trigger-counts")).to_contain_text("1 (1 paused)")
    expect(page.locator("#trigger-counts")).to_contain_text("Runs succeeded")


def test_only_a_person_s_request_makes_or_fires_a_trigger(
    logged_in: Any, context: Any, daemon: Daemon
) -> None:
    """A trigger runs a program as the daemon's user: without the token (TCP) or, with the
    console's cookie, without its CSRF token or from another origin, no route that makes,
    changes or fires one does anything."""
    base = daemon.tcp_url
    assert base is not None
    body = {"program": "true", "uriPatterns": ["*"], "name": "refused"}
    cookie = next(c for c in context.cookies() if c["name"] == "mcpsub_session")
    csrf = logged_in.locator('meta[name="csrf-token"]').get_attribute("content")
    with httpx.Client(base_url=base) as anonymous:
        assert anonymous.post("/v1/triggers", json=body).status_code == 401
        assert anonymous.get("/v1/triggers").status_code == 401
    with httpx.Client(base_url=base, cookies={"mcpsub_session": cookie["value"]}) as browser:
        for path in ("/v1/triggers", "/v1/triggers/1/test", "/v1/triggers/1/resume"):
            refused = browser.post(path, json=body)
            assert refused.status_code == 403, path
            assert refused.json()["errorCode"] == "CSRF_TOKEN_REQUIRED"
        foreign = browser.post(
            "/v1/triggers",
            json=body,
            headers={"X-CSRF-Token": csrf, "Origin": "http://evil.example"},
        )
        assert foreign.status_code == 403 and foreign.json()["errorCode"] == "ORIGIN_NOT_ALLOWED"
        made = browser.post("/v1/triggers", json=body, headers={"X-CSRF-Token": csrf})
        assert made.status_code == 201, made.text  # the person in the console may
        assert daemon.api("DELETE", f"/v1/triggers/{made.json()['id']}").status_code == 200
    names = [t["name"] for t in daemon.api("GET", "/v1/triggers").json()["triggers"]]
    assert "refused" not in names


def test_events_tail_pauses_and_resumes_from_its_cursor(
    logged_in: Any, daemon: Daemon, lab: LabServer, screenshots: Path
) -> None:
    subscribe(daemon, lab, "test://console/tail", "one")
    page = logged_in
    page.goto(f"{daemon.tcp_url}/ui/events?type=resource.updated")
    expect(page.get_by_label("Types (comma-separated)")).to_have_value("resource.updated")
    expect(page.locator("#live-text")).to_have_text("Live: connected")
    expect(page.locator("#events tbody")).to_contain_text("test://console/tail")
    page.get_by_role("button", name="Pause").click()
    expect(page.locator("#live-text")).to_have_text("Paused")
    lab.control(
        "PUT", "/lab/resources", json={"uri": "test://console/tail", "text": "two"}
    ).raise_for_status()
    wait_until(
        lambda: (
            daemon.api("GET", "/v1/content", params={"uri": "test://console/tail"}).json()[
                "revision"
            ]
            == 2
        )
    )
    tail_rows = page.locator("#events tbody tr", has_text="test://console/tail")
    expect(tail_rows).to_have_count(1)
    page.get_by_role("button", name="Resume").click()
    expect(tail_rows).to_have_count(2)
    expect(page.locator("#events tbody tr").first).to_contain_text("revision 2")
    expect(page.locator("#live-text")).to_have_text("Live: connected")
    shot(page, screenshots, "events")


def test_invisible_characters_in_a_uri_are_shown_escaped(
    logged_in: Any, daemon: Daemon, lab: LabServer
) -> None:
    """Before: ``test://console/a\\u200bb`` showed as ``test://console/ab``, a look-alike of
    another URI; the CLIs escape it (``safetext.visible``), and now so does the console."""
    uri = "test://console/a\u200bb\u202ec\u2060d"
    shown = "test://console/a\\u200bb\\u202ec\\u2060d"
    assert visible(uri) == shown
    sub = subscribe(daemon, lab, uri, "text")
    page = logged_in
    page.goto(f"{daemon.tcp_url}/ui/subscriptions/{sub['id']}")
    expect(page.locator("#title")).to_have_text(shown)
    assert page.title() == f"{shown} · mcpsubd"
    page.goto(f"{daemon.tcp_url}/ui/events")
    expect(page.locator("#events")).to_contain_text(shown)


def test_the_console_escapes_what_the_clis_escape(logged_in: Any, daemon: Daemon) -> None:
    """The console's ``visible`` (console.js) and ``safetext.visible`` escape the same code
    points, checked over all of Unicode in the browser that runs the console."""
    script = (REPO_ROOT / "service" / "console" / "static" / "console.js").read_text()
    pattern = re.search(r"const INVISIBLE = (/.*?/gu);", script)
    assert pattern is not None
    escaped_in_browser = logged_in.evaluate(
        "() => { const re = " + pattern.group(1).replace("/gu", "/u") + "; const out = [];"
        " for (let c = 0; c <= 0x10ffff; c++) {"
        "   if (re.test(String.fromCodePoint(c))) out.push(c); } return out; }"
    )
    escaped_by_cli = [c for c in range(0x110000) if visible(chr(c)) != chr(c)]
    assert escaped_in_browser == escaped_by_cli
