"""What each console page SHOWS, checked against what the API says: the
overview's counts by state, the latest changes from the log, a subscription page that follows
new revisions (content and diff) until the person picks one, the Events page in the words of
the subscription page, the webhooks page's counts and why pending deliveries wait, URIs that
wrap only after a separator, and the icon. Headless Chromium against a real daemon and lab."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import expect

from tests.console.conftest import shot, subscribe, wait_until
from tests.support.browser import NARROW
from tests.support.daemon import Daemon
from tests.support.lab import LabServer
from tests.webhooks.receiver import Receiver, Step

NEWEST = "9223372036854775807"

# Line breaks that split a word: within each block of an element, the characters on either
# side of every line break (compared by the top of each character's box).
BREAKS_IN_WORDS = """(node) => {
  const bad = [];
  let prev = null;
  const walker = document.createTreeWalker(node, NodeFilter.SHOW_TEXT);
  for (let text = walker.nextNode(); text; text = walker.nextNode()) {
    const block = text.parentElement.closest("div, td, li, dd, p");
    if (prev && prev.block !== block) prev = null;  // another block: its own lines
    for (let i = 0; i < text.data.length; i++) {
      const range = document.createRange();
      range.setStart(text, i);
      range.setEnd(text, i + 1);
      const box = range.getClientRects()[0];
      if (!box) continue;
      const ch = text.data[i];
      if (prev && box.top > prev.top + 2 && /[A-Za-z0-9]/.test(prev.ch) && /[A-Za-z0-9]/.test(ch)) {
        bad.push(prev.ch + "|" + ch);
      }
      prev = { top: box.top, ch, block };
    }
  }
  return bad;
}"""


def put(lab: LabServer, uri: str, text: str) -> None:
    lab.control("PUT", "/lab/resources", json={"uri": uri, "text": text}).raise_for_status()


def change(daemon: Daemon, lab: LabServer, sub: dict[str, Any], text: str) -> int:
    """Change the resource on the lab and wait until the daemon stored it; its revision."""
    before = daemon.api("GET", f"/v1/subscriptions/{sub['id']}").json()["revision"]
    put(lab, sub["uri"], text)
    wait_until(
        lambda: daemon.api("GET", f"/v1/subscriptions/{sub['id']}").json()["revision"] > before
    )
    return int(daemon.api("GET", f"/v1/subscriptions/{sub['id']}").json()["revision"])


def rows(page: Any, table: str) -> list[list[str]]:
    return [
        [cell.strip() for cell in row]
        for row in page.locator(f"#{table} tbody tr").evaluate_all(
            "rows => rows.map(r => [...r.cells].map(c => c.innerText))"
        )
    ]


def test_the_overview_shows_the_apis_counts_and_the_latest_changes_from_the_log(
    logged_in: Any, daemon: Daemon, lab: LabServer, screenshots: Path
) -> None:
    sub = subscribe(daemon, lab, "test://shows/overview", "one")
    change(daemon, lab, sub, "two")
    page = logged_in
    page.reload()
    api = daemon.api("GET", "/v1/overview").json()
    assert api["links"]["byState"] == {"open": 1}, api["links"]
    expect(page.locator("#links-total")).to_have_text(str(api["links"]["total"]))
    expect(page.locator("#subs-total")).to_have_text(str(api["subscriptions"]["total"]))
    wait_until(lambda: rows(page, "links-by-state"))
    shown = {name.removeprefix("● "): int(n) for name, n in rows(page, "links-by-state")}
    assert shown["open"] == 1  # the console showed "open 0" and a row "LinkState.OPEN 1"
    assert {name: n for name, n in shown.items() if n} == api["links"]["byState"]
    subs = {name.removeprefix("● "): int(n) for name, n in rows(page, "subs-by-state")}
    assert subs == api["subscriptions"]["byState"]
    hooks = page.locator("#webhook-counts").inner_text()
    for state, n in api["deliveries"].items():
        assert f"Deliveries {state}\n{n}" in hooks
    # Latest changes: filled from the log when the page opens, before any new change.
    stored = daemon.api(
        "GET", "/v1/events", params={"type": "resource.updated", "limit": 10, "before": NEWEST}
    ).json()["events"]
    expect(page.locator("#recent li")).to_have_count(len(stored))
    expect(page.locator("#recent-empty")).to_be_hidden()
    items = page.locator("#recent li").all_inner_texts()
    for item, event in zip(items, reversed(stored), strict=True):
        assert item.startswith(f"{event['uri']} revision {event['revision']} on ")
    # A new change goes on top, once.
    revision = change(daemon, lab, sub, "three")
    expect(page.locator("#recent li").first).to_contain_text(
        f"test://shows/overview revision {revision}"
    )
    expect(page.locator("#recent li", has_text=f"revision {revision} ")).to_have_count(1)


def test_the_subscription_page_follows_new_revisions_until_one_is_picked(
    logged_in: Any, daemon: Daemon, lab: LabServer, screenshots: Path
) -> None:
    sub = subscribe(daemon, lab, "test://shows/follow", "alpha\nbeta\ngamma\n")
    change(daemon, lab, sub, "alpha\nBETA\ngamma\n")
    page = logged_in
    page.goto(f"{daemon.tcp_url}/ui/subscriptions/{sub['id']}")
    expect(page.locator("#content")).to_have_text("alpha\nBETA\ngamma\n")
    # The preselected From/To (the two newest) show their diff without a click.
    expect(page.get_by_label("compare from revision 1")).to_be_checked()
    expect(page.get_by_label("compare to revision 2")).to_be_checked()
    expect(page.locator("#diff-label")).to_contain_text("Revision 1 → revision 2")
    lines = daemon.api("GET", f"/v1/subscriptions/{sub['id']}/diff?from=1&to=2").json()["lines"]
    expect(page.locator("#diff")).to_contain_text("+BETA")
    # As many lines on screen as the diff has: no blank line between two of them.
    assert page.locator("#diff").inner_text().rstrip("\n").split("\n") == lines
    heights = page.locator("#diff").evaluate(
        "pre => [pre.scrollHeight, ...[...pre.children].map(line => line.offsetHeight)]"
    )
    padding = 16  # pre.text: 8 px above and below
    assert len(heights) == len(lines) + 1 and len(set(heights[1:])) == 1, heights
    assert abs(heights[0] - padding - sum(heights[1:])) < heights[1] / 2, heights

    # A new revision: the summary, the content and the diff all move to it.
    assert change(daemon, lab, sub, "alpha\nBETA\nGAMMA\n") == 3
    expect(page.locator("#summary dt:text-is('Revision') + dd")).to_have_text("3")
    expect(page.locator("#content")).to_have_text("alpha\nBETA\nGAMMA\n")
    expect(page.locator("#content-label")).to_contain_text("Revision 3")
    expect(page.locator("#diff-label")).to_contain_text("Revision 2 → revision 3")
    expect(page.locator("#diff")).to_contain_text("+GAMMA")

    # The person picks revision 1 and the pair 1 → 2: a new revision leaves both in place.
    page.get_by_role("button", name="Show #1").click()
    expect(page.locator("#content")).to_have_text("alpha\nbeta\ngamma\n")
    page.get_by_label("compare from revision 1").check()
    page.get_by_label("compare to revision 2").check()
    page.get_by_role("button", name="Compare selected revisions").click()
    expect(page.locator("#diff-label")).to_contain_text("Revision 1 → revision 2")
    assert change(daemon, lab, sub, "delta\n") == 4
    expect(page.locator("#revisions tbody tr")).to_have_count(4)
    expect(page.locator("#content-label")).to_contain_text("the newest is 4")
    expect(page.locator("#content")).to_have_text("alpha\nbeta\ngamma\n")
    expect(page.locator("#diff-label")).to_contain_text("Revision 1 → revision 2")
    expect(page.get_by_label("compare from revision 1")).to_be_checked()
    page.locator("#content-label").get_by_role("button", name="Follow the newest").click()
    expect(page.locator("#content")).to_have_text("delta\n")
    page.locator("#diff-label").get_by_role("button", name="Follow the newest").click()
    expect(page.locator("#diff-label")).to_contain_text("Revision 3 → revision 4")


def test_the_events_page_uses_the_subscription_pages_words(
    logged_in: Any, context: Any, daemon: Daemon, lab: LabServer, screenshots: Path
) -> None:
    sub = subscribe(daemon, lab, "test://shows/words", "x")
    page = logged_in
    page.goto(f"{daemon.tcp_url}/ui/subscriptions/{sub['id']}")
    expect(page.locator("#events tbody")).to_contain_text("pending → active")
    on_sub = {r[0]: r[3] for r in rows(page, "events")}
    events = context.new_page()
    events.goto(f"{daemon.tcp_url}/ui/events?uri=test://shows/words")
    expect(events.locator("#events tbody tr")).to_have_count(len(on_sub))
    on_events = {r[0]: r[4] for r in rows(events, "events")}
    assert on_events == on_sub
    assert set(on_events.values()) == {"subscribed", "pending → active", "revision 1"}
    assert not any("{" in words for words in on_events.values())


def test_webhooks_say_how_many_were_delivered_and_why_pending_ones_wait(
    logged_in: Any, daemon: Daemon, lab: LabServer, screenshots: Path
) -> None:
    uri = "test://hooked/quarterly-report/engineering-department/summary"
    receiver = Receiver().start()
    try:
        receiver.plan("/down", then=Step(503, body=b"down for maintenance"))
        target = daemon.api(
            "POST", "/v1/webhooks", json={"url": receiver.url("/down"), "uriPatterns": [uri]}
        ).json()
        sub = subscribe(daemon, lab, uri, "first")
        receiver.wait_count("/down", 1)
        change(daemon, lab, sub, "second")
        change(daemon, lab, sub, "third")
        wait_until(
            lambda: (
                daemon.api("GET", f"/v1/webhooks/{target['id']}").json()["deliveries"]
                == {"pending": 2, "failed": 1, "delivered": 0, "dead": 0, "superseded": 0}
            )
        )
        page = logged_in
        page.goto(f"{daemon.tcp_url}/ui/webhooks")
        row = page.locator("#targets tbody tr", has_text=receiver.url("/down"))
        expect(row).to_contain_text("0 of 1 delivered, 2 waiting")  # was "0% of 1"
        assert "%" not in row.inner_text()
        listed = daemon.api(
            "GET", "/v1/deliveries", params={"target": target["id"], "newest": "true"}
        ).json()["deliveries"]
        failed = next(d for d in listed if d["state"] == "failed")
        note = page.locator("#held-note")
        expect(note).to_be_visible()
        expect(note).to_contain_text(
            f"2 pending deliveries wait behind a failed one (delivery {failed['id']})"
        )
        expect(note).to_contain_text("mode all")
        for d in listed:
            if d["state"] == "pending":
                line = page.locator(
                    "#deliveries tbody tr", has_text=f"waits for delivery {failed['id']}"
                )
                expect(
                    line.filter(has=page.get_by_role("button", name=f"Retry delivery {d['id']}"))
                ).to_have_count(1)
        shot(page, screenshots, "webhooks-held")
        # On a narrow window the URIs wrap after a separator, never inside a word.
        page.set_viewport_size(NARROW)
        for cell in page.locator("#deliveries tbody td:nth-child(3)").all():
            assert cell.evaluate(BREAKS_IN_WORDS) == [], cell.inner_text()
        for cell in page.locator("#targets tbody td:nth-child(2)").all():
            assert cell.evaluate(BREAKS_IN_WORDS) == [], cell.inner_text()
        wrapped = page.locator("#deliveries tbody td:nth-child(3)").first
        assert wrapped.evaluate("c => c.getClientRects()[0].height") > 30  # it did wrap
    finally:
        receiver.close()


def test_the_icon_is_served(logged_in: Any, daemon: Daemon) -> None:
    base = daemon.tcp_url
    assert base is not None
    with httpx.Client(base_url=base) as anonymous:
        for path in ("/favicon.ico", "/ui/static/favicon.svg"):
            answer = anonymous.get(path)
            assert answer.status_code == 200, (path, answer.status_code)
            assert answer.headers["content-type"].startswith("image/svg+xml")
            assert answer.text.startswith("<svg")
    icon = logged_in.locator('link[rel="icon"]').get_attribute("href")
    assert logged_in.request.get(f"{base}{icon}").status == 200
    assert logged_in.request.get(f"{base}/favicon.ico").status == 200


def test_the_links_page_shows_each_link_and_subscription_as_the_api_does(
    logged_in: Any, daemon: Daemon, lab: LabServer
) -> None:
    subscribe(daemon, lab, "test://shows/links", "x")
    page = logged_in
    page.goto(f"{daemon.tcp_url}/ui/links")
    links = daemon.api("GET", "/v1/links").json()["links"]
    subs = daemon.api("GET", "/v1/subscriptions").json()["subscriptions"]
    expect(page.locator("#links tbody tr")).to_have_count(len(links))
    expect(page.locator("#subscriptions tbody tr")).to_have_count(len(subs))
    shown_links = {r[0]: r for r in rows(page, "links")}
    for link in links:
        row = shown_links[link["url"]]
        assert row[1].removeprefix("● ") == link["state"], row
        assert row[2] == f"{link['honoredCount']}/{link['uriCount']}", row
        assert row[3] == str(link["reconnects"]), row
    shown_subs = {r[0]: r for r in rows(page, "subscriptions")}
    for sub in subs:
        row = shown_subs[sub["uri"]]
        assert [row[1], row[2].removeprefix("● "), row[3]] == [
            sub["serverUrl"],
            sub["state"],
            str(sub["revision"]),
        ], row
