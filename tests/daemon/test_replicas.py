"""Several mcpsubd replicas on one PostgreSQL, the scale-out scenarios: 3 replicas, server
links on 3 lab servers (a link per URL: ``?link=N`` tells them apart), a 5 s lease TTL.
``MCPSUB_TEST_REPLICA_LINKS`` sets the link count: 60 by default, so that the suite stays
within its time on a shared 2-core host; the issue's 300 is ``MCPSUB_TEST_REPLICA_LINKS=300``,
which ``.ci/run`` sets (all three scenarios at 300 links: ~55 s on an otherwise idle 2-core host).

- kill -9: the others re-listen the dead replica's links, every URI reaches its last text,
  every event is delivered (same ``webhook-id`` when re-sent), and an SSE follower on a
  survivor sees every event id once, in order;
- SIGSTOP past the lease: the others take the links; after SIGCONT the paused replica writes
  nothing under its old generations and gives the links up;
- SIGTERM: make-before-break, read from the lab servers' own logs: every moved link's new
  listen stream was acknowledged before the old one closed, and no revision row is written
  twice (docs/scale-out.md, "Handover").
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from service.store import Store
from service.store.lease_repository import LeaseRepository
from tests.daemon.test_daemon import SLOW, put
from tests.support import poll
from tests.support.daemon import Daemon
from tests.support.lab import LabServer
from tests.support.postgres import PgCluster, run_async
from tests.webhooks.helpers import FAST, add_target
from tests.webhooks.receiver import Receiver, Step

LINKS = int(os.environ.get("MCPSUB_TEST_REPLICA_LINKS", "60"))
LABS = 3
REPLICAS = 3
TTL = 5.0


def uri(n: int) -> str:
    return f"test://replica/{n}"


WAIT_S = 60.0
"""These tests' default wait: a cluster of replicas on one loaded machine."""


def until(what: str, check: Callable[[], Any], timeout: float = WAIT_S) -> Any:
    return poll.until(what, check, timeout)


def status_links(d: Daemon) -> list[dict[str, Any]]:
    links: list[dict[str, Any]] = d.api("GET", "/v1/status").json()["links"]
    return links


def links_of(d: Daemon) -> set[int]:
    return {link["serverId"] for link in status_links(d)}


def texts(d: Daemon) -> dict[str, str]:
    """Every subscribed URI's current text, from the shared database."""
    rows = d.query(
        "SELECT s.uri, r.text FROM subscriptions s JOIN revisions r "
        "ON r.subscription_id = s.id AND r.revision = s.revision"
    )
    return {u: t for u, t in rows}


def all_are(d: Daemon, text: str) -> Callable[[], bool | dict[str, str]]:
    def check() -> bool | dict[str, str]:
        found = texts(d)
        wrong = {u: t for u, t in found.items() if t != text}
        return (len(found) == LINKS and not wrong) or dict(itertools.islice(wrong.items(), 5))

    return lambda: check() is True


def metric(d: Daemon, name: str) -> float:
    for line in d.api("GET", "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def max_id(d: Daemon, table: str) -> int:
    return int(d.query(f"SELECT COALESCE(MAX(id), 0) FROM {table}")[0][0])


@dataclass
class Cluster:
    labs: list[LabServer]
    daemons: list[Daemon]

    def lab(self, n: int) -> LabServer:
        return self.labs[n % LABS]

    def put_all(self, text: str, notify: bool = True) -> None:
        with ThreadPoolExecutor(LABS) as pool:
            for lab_index in range(LABS):
                pool.submit(self._put_lab, lab_index, text, notify)

    def _put_lab(self, lab_index: int, text: str, notify: bool) -> None:
        for n in range(lab_index, LINKS, LABS):
            put(self.labs[lab_index], uri(n), text, notify=notify)

    @contextlib.contextmanager
    def changes_flowing(self) -> Iterator[None]:
        """A thread updating a rotating tenth of the URIs, round after round, until the block
        ends (then one more round): updates keep arriving while replicas come and go."""
        stop = threading.Event()
        failures: list[BaseException] = []

        def run() -> None:
            for round_ in itertools.count(1):
                try:
                    for n in range(round_ % 10, LINKS, 10):
                        put(self.lab(n), uri(n), f"flowing {round_}")
                except BaseException as exc:  # reported by the test, not lost in the thread
                    failures.append(exc)
                    return
                if stop.wait(0.05):
                    return

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(30)
        assert not failures, failures


def all_open(daemons: list[Daemon]) -> bool:
    """Every link held by exactly one of ``daemons``, its stream acknowledged."""
    links = [link for d in daemons for link in status_links(d)]
    ids = [link["serverId"] for link in links]
    return (
        len(ids) == LINKS
        and len(set(ids)) == LINKS
        and all(link["state"] == "open" for link in links)
    )


class Nothing(list[Any]):
    """Rows that should not be there: true when there are none (the rows show on failure)."""

    def __bool__(self) -> bool:
        return not len(self)


class Spread(list[int]):
    """Links per replica; true when they add up and are even (within one)."""

    def __bool__(self) -> bool:
        share = -(-LINKS // len(self))
        return sum(self) == LINKS and all(share - 1 <= c <= share for c in self)


def spread_evenly(daemons: list[Daemon]) -> Spread:
    return Spread(len(links_of(d)) for d in daemons)


async def _prepare(url: str, links: list[tuple[str, str]]) -> None:
    """Subscriptions for every link, and each replica's share of leases already held (for a
    minute): the replicas start as after a restart of the whole cluster, each taking its own
    leases back at once (one claim, one query, a hundred links) instead of 300 API calls."""
    store = Store.open(url)
    try:
        for link_url, link_uri in links:
            await store.add_subscription(link_url, link_uri)
        for k in range(REPLICAS):
            await LeaseRepository(store).claim(f"r{k}", 60.0, -(-LINKS // REPLICAS))
    finally:
        await store.close()


@pytest.fixture
def cluster(
    pg_cluster: PgCluster, lab_server_factory: Any, daemon_factory: Any, tmp_path: Path
) -> Iterator[Cluster]:
    """3 lab servers with a resource per link, 3 replicas sharing one fresh database, every
    link subscribed, spread evenly and read. (Subscribing through the API is tested
    elsewhere; here it would cost a call per link on a loaded 2-core machine.)"""
    # A lab holds seed 001's 100 listen streams by default; in a hand-over each link has two
    # (the standby's and the owner's), and a lab serves LINKS / LABS links.
    streams = {"MCP_TEST_MAX_SUBSCRIPTIONS": str(2 * LINKS)}
    labs = [lab_server_factory({**SLOW, **streams}) for _ in range(LABS)]
    url = pg_cluster.fresh_database()
    c = Cluster(labs, [])
    c.put_all("v1", notify=False)
    run_async(_prepare(url, [(f"{c.lab(n).url}?link={n}", uri(n)) for n in range(LINKS)]))
    env = {
        **FAST,
        "MCPSUB_DATABASE_URL": url,
        "MCPSUB_LEASE_TTL_S": str(TTL),
        "MCPSUB_WEBHOOK_TIMEOUT_S": "3",
        # Attempts held by the receiver time out meanwhile: enough of them that none dies.
        "MCPSUB_WEBHOOK_SCHEDULE": ",".join(["0", "0.2", "0.4"] + ["1"] * 30),
        "MCPSUB_LOG_LEVEL": "info",
        # Room for 100 standby listens on a loaded host (the default is 5 s).
        "MCPSUB_HANDOVER_TIMEOUT_S": "20",
    }
    c.daemons = [
        daemon_factory(tmp_path / f"r{k}", {**env, "MCPSUB_REPLICA_ID": f"r{k}"})
        for k in range(REPLICAS)
    ]
    until("links spread evenly over 3 replicas", lambda: spread_evenly(c.daemons))
    until("every URI read", all_are(c.daemons[0], "v1"), 120)
    yield c
    # Teardown: no hand-over cascade (each SIGTERM handing 100+ links to the next).
    for d in c.daemons:
        d.kill()


class Follower:
    """An SSE client of one replica's ``/v1/events/stream``, recording every event id."""

    def __init__(self, d: Daemon, after: int) -> None:
        self.ids: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(d, after), daemon=True)
        self._thread.start()

    def _run(self, d: Daemon, after: int) -> None:
        # The stream ends with the daemon at teardown: that is not the follower's failure.
        with (
            contextlib.suppress(httpx.HTTPError),
            d.client(timeout=60) as client,
            client.stream("GET", "/v1/events/stream", params={"after": after}) as response,
        ):
            for line in response.iter_lines():
                if line.startswith("id: "):
                    self.ids.append(int(line[4:]))
                if self._stop.is_set():
                    return

    def stop(self) -> None:
        self._stop.set()


def test_kill_9_fails_over_and_nothing_is_lost(cluster: Cluster, receiver: Receiver) -> None:
    victim, *survivors = cluster.daemons
    # Made through the victim's API, so that its dispatcher knows of it at once (the others
    # learn of a target made elsewhere at their next timed pass).
    target = add_target(victim, receiver.url("/hook"), mode="all")
    receiver.expect_secret("/hook", target["secret"])
    start = max_id(survivors[0], "events")
    follower = Follower(survivors[0], start)
    # Hold every webhook request until the victim has sent one: that attempt's outcome is
    # never written, so another replica must send it again after its lease.
    receiver.plan("/hook", then=Step(hold=True))

    def victim_sent() -> list[int]:
        sent = {r.json["eventId"] for r in receiver.received("/hook")}
        rows = victim.query(
            "SELECT id, event_id FROM deliveries WHERE lease_owner = 'r0' AND state = 'pending'"
        )
        return [delivery_id for delivery_id, event_id in rows if event_id in sent]

    with cluster.changes_flowing():
        in_flight = until("the victim sending a webhook", victim_sent)
        victim.kill()
        killed_at = time.monotonic()
        receiver.plan("/hook", then=Step())
        receiver.release()
        # Failover: the survivors hold and re-listen every link. The target is TTL + 5 s
        # (measured with an idle host by bench/scaleout.py); the bound here leaves room for
        # a shared 2-core CI host at a load of 15, where a daemon waits for a CPU more than
        # it runs. The figure is printed (pytest -s) for the record.
        until("the survivors re-listen every link", lambda: all_open(survivors), TTL + 35)
        print(f"failover of {LINKS // REPLICAS} links: {time.monotonic() - killed_at:.1f} s")
    cluster.put_all("final")
    until("every URI's last text", all_are(survivors[0], "final"))
    assert sum(metric(d, "mcpsub_lease_handovers_total") for d in survivors) >= LINKS // 3
    until("spread evenly again", lambda: spread_evenly(survivors))

    # Every revision event delivered at least once; a re-sent one kept its webhook-id.
    updated = {
        row[0]
        for row in survivors[0].query(
            "SELECT id FROM events WHERE type = 'resource.updated' AND id > :start", start=start
        )
    }

    def undelivered() -> Nothing:
        return Nothing(
            survivors[0].query(
                "SELECT id, state, attempts, last_status, last_error, lease_owner, "
                "lease_until - EXTRACT(EPOCH FROM clock_timestamp()), "
                "next_attempt_at - EXTRACT(EPOCH FROM clock_timestamp()) "
                "FROM deliveries WHERE state != 'delivered' ORDER BY id"
            )
        )

    until("every delivery made", undelivered, 60)
    got = receiver.received("/hook")
    assert updated <= {r.json["eventId"] for r in got if r.status == 200}
    ids_per_event: dict[int, set[str]] = {}
    for r in got:
        ids_per_event.setdefault(r.json["eventId"], set()).add(r.webhook_id)
    assert all(len(ids) == 1 for ids in ids_per_event.values()), "one webhook-id per event"
    resent = survivors[0].query(
        "SELECT d.id, d.event_id, d.webhook_id, d.lease_owner FROM deliveries d "
        "WHERE d.id = ANY(:ids)",
        ids=list(in_flight),
    )
    for _, event_id, webhook_id, _ in resent:
        copies = [r for r in got if r.json["eventId"] == event_id]
        assert len(copies) >= 2 and {r.webhook_id for r in copies} == {webhook_id}, copies

    # The SSE follower on a survivor saw every event any replica wrote (the other's by
    # LISTEN/NOTIFY), each exactly once, none skipped.
    written = [r[0] for r in survivors[1].query(
        "SELECT id FROM events WHERE id > :start ORDER BY id", start=start
    )]  # fmt: skip
    until("the follower saw every event", lambda: follower.ids[: len(written)] == written)
    follower.stop()
    assert len(set(follower.ids)) == len(follower.ids), "an event id twice"


def listen_coverage(lab: LabServer) -> dict[str, list[tuple[float, float]]]:
    """From the lab's own log: per URI, the [acknowledged, closed) intervals of its streams."""
    opened: dict[int, list[str]] = {}
    acked: dict[int, float] = {}
    spans: dict[str, list[tuple[float, float]]] = {}
    for entry in lab.log():
        request = entry.get("request")
        if entry["event"] == "listen.opened":
            opened[request] = list(entry["filter"].get("resourceSubscriptions", []))
        elif entry["event"] == "listen.acknowledged":
            acked[request] = entry["time"]
        elif entry["event"] == "listen.closed" and request in acked:
            for u in opened.get(request, []):
                spans.setdefault(u, []).append((acked.pop(request), entry["time"]))
    for request, at in acked.items():  # still open
        for u in opened.get(request, []):
            spans.setdefault(u, []).append((at, float("inf")))
    return spans


def gaps(spans: list[tuple[float, float]], since: float) -> list[tuple[float, float]]:
    """Moments after ``since`` no acknowledged stream covered."""
    found = []
    covered = since
    for begin, end in sorted(spans):
        if begin > covered:
            found.append((covered, begin))
        covered = max(covered, end)
    if covered != float("inf"):
        found.append((covered, float("inf")))
    return found


def test_sigterm_hands_over_make_before_break(cluster: Cluster) -> None:
    leaving, *staying = cluster.daemons
    moved = {u for link in status_links(leaving) for u in link["uris"]}
    assert len(moved) == LINKS // REPLICAS
    before = max_id(staying[0], "revisions")
    sigterm_at = time.time()
    with cluster.changes_flowing():
        assert leaving.stop(timeout=60) == 0
        until("the others hold every link", lambda: all_open(staying), TTL + 35)
    # It handed every link over before stopping: none was left to break-before-make.
    log = [json.loads(line) for line in leaving.lines if line.startswith("{")]
    handed = {e["server_id"] for e in log if e.get("event") == "link handed over"}
    assert len(handed) == LINKS // REPLICAS, [e for e in log if "hand" in e.get("event", "")]
    assert not [e for e in log if e.get("event") == "hand-over incomplete; stopping the rest"]
    assert sum(metric(d, "mcpsub_lease_takeovers_total") for d in staying) >= len(handed)
    # Make-before-break, as the lab servers saw it: from the SIGTERM on, every moved URI was
    # covered by an acknowledged listen stream at every moment (the new stream's ack came
    # before the old stream's close), so no update could fall into a gap.
    for lab in cluster.labs:
        for u, spans in listen_coverage(lab).items():
            if u in moved:
                assert gaps(spans, sigterm_at) == [], (u, spans)
    cluster.put_all("after the hand-over")
    until("updates flow", all_are(staying[0], "after the hand-over"))
    # No revision row written twice: per subscription, consecutive numbers, distinct texts.
    rows = staying[0].query(
        "SELECT subscription_id, revision, text FROM revisions WHERE id > :before ORDER BY id",
        before=before,
    )
    per_sub: dict[int, list[tuple[int, str]]] = {}
    for sub_id, revision, text in rows:
        per_sub.setdefault(sub_id, []).append((revision, text))
    assert len(per_sub) == LINKS
    for history in per_sub.values():
        numbers = [r for r, _ in history]
        assert numbers == list(range(numbers[0], numbers[0] + len(numbers))), history
        assert len({t for _, t in history}) == len(history), f"a duplicate revision: {history}"


def test_a_paused_replica_is_fenced_and_gives_its_links_up(cluster: Cluster) -> None:
    paused, *others = cluster.daemons
    assert paused.proc is not None
    old = {(link["serverId"], link["generation"]) for link in status_links(paused)}
    held = {server_id for server_id, _ in old}
    paused.proc.send_signal(signal.SIGSTOP)
    try:
        # A claim waits for the lease to lapse and for its owner's heartbeat to be a whole TTL
        # old (an expired lease of a live owner is left to it), then the survivors open
        # every listen: two TTLs plus the listens, with room for a loaded CI machine.
        until("the others took its links", lambda: all_open(others), 2 * TTL + 20)
        cluster.put_all("while paused")
        until("updates flow", all_are(others[0], "while paused"))
        mark = max_id(others[0], "revisions")
        # Changed again without a notification: only the paused replica (its queued
        # notifications for "while paused") would read this now, under a stale generation.
        cluster.put_all("read by a stale replica", notify=False)
    finally:
        paused.proc.send_signal(signal.SIGCONT)
    # Its local deadline passed while it was paused: it stops the links at once, or learns
    # from its first renew (or a rejected write) that they are gone; then it takes its fair
    # share again like any replica that joins.
    until("it gave up every link it held", lambda: given_up(paused) >= held)
    until("spread evenly again", lambda: spread_evenly(cluster.daemons))
    cluster.put_all("after")
    until("still flowing", all_are(others[1], "after"))
    stale = others[0].query(
        "SELECT s.server_id, r.generation, r.text FROM revisions r "
        "JOIN subscriptions s ON s.id = r.subscription_id WHERE r.id > :mark",
        mark=mark,
    )
    assert not [row for row in stale if (row[0], row[1]) in old], "a write under a lost lease"
    assert held, "the paused replica had links to lose"


def given_up(d: Daemon) -> set[int]:
    """Server ids the replica's log says it stopped because their lease was gone or fenced."""
    ids = set()
    for line in list(d.lines):
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("event") in (
            "lease gone; stopping the link",
            "lease lost; giving the link up",
        ):
            ids.add(int(entry["server_id"]))
        elif entry.get("event") == "leases about to expire without renewal; stopping links":
            ids.update(int(server_id) for server_id in entry["server_ids"])
    return ids
