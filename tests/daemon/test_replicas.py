"""Several mcpsubd replicas on one PostgreSQL: leases spread the links, survive a kill -9,
fence a paused replica, and hand over on SIGTERM (docs/scale-out.md).

Scaled down to keep the suite fast: 12 server links (distinct URLs on one lab server, told
apart by a query string) and a 2 s lease TTL.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import signal
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from tests.daemon.test_daemon import SLOW, put, subscribe
from tests.support.daemon import Daemon
from tests.support.lab import LabServer
from tests.support.postgres import PgCluster

LINKS = 12
TTL = 2.0


def uri(n: int) -> str:
    return f"test://replica/{n}"


def wait_until(what: str, check: Callable[[], Any], timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(0.1)
    raise AssertionError(f"{what}: not reached in {timeout:g} s; last {last!r}")


def links_of(d: Daemon) -> set[int]:
    return {link["serverId"] for link in d.api("GET", "/v1/status").json()["links"]}


def texts(d: Daemon) -> dict[str, str]:
    found = {}
    for n in range(LINKS):
        response = d.api("GET", "/v1/content", params={"uri": uri(n)})
        if response.status_code == 200:
            found[uri(n)] = response.json()["text"]
    return found


def metric(d: Daemon, name: str) -> float:
    for line in d.api("GET", "/metrics").text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


@pytest.fixture
def replicas(
    pg_cluster: PgCluster, lab_server_factory: Any, daemon_factory: Any
) -> tuple[LabServer, list[Daemon]]:
    """A lab server with 12 links' resources, and 3 replicas sharing one fresh database,
    every link subscribed, spread and read."""
    lab = lab_server_factory(SLOW)
    url = pg_cluster.fresh_database()
    for n in range(LINKS):
        put(lab, uri(n), "v1")
    daemons = [
        daemon_factory(
            env={
                "MCPSUB_DATABASE_URL": url,
                "MCPSUB_LEASE_TTL_S": str(TTL),
                "MCPSUB_REPLICA_ID": f"r{k}",
            }
        )
        for k in range(3)
    ]
    for n in range(LINKS):
        subscribe(daemons[n % 3], f"{lab.url}?link={n}", uri(n))
    wait_until(
        "links spread evenly over 3 replicas",
        lambda: [len(links_of(d)) for d in daemons] == [LINKS // 3] * 3,
    )
    wait_until("every URI read", lambda: texts(daemons[0]) == {uri(n): "v1" for n in range(LINKS)})
    return lab, daemons


def all_links_held(daemons: list[Daemon]) -> bool:
    held = [links_of(d) for d in daemons]
    union = set().union(*held)
    return len(union) == LINKS and sum(len(h) for h in held) == LINKS


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


def test_kill_9_moves_the_links_and_nothing_is_lost(
    replicas: tuple[LabServer, list[Daemon]],
) -> None:
    lab, (victim, *survivors) = replicas
    moved = links_of(victim)
    start = survivors[0].query("SELECT MAX(id) FROM events")[0][0]
    follower = Follower(survivors[0], start)
    victim.kill()
    for n in range(LINKS):
        put(lab, uri(n), "v2 (while a replica was dead)")
    # Failover: within the lease TTL + 5 s the survivors re-listen and re-read every link.
    wait_until("the survivors hold every link", lambda: all_links_held(survivors), TTL + 5 + 10)
    wait_until(
        "every URI's last text",
        lambda: (
            texts(survivors[0]) == {uri(n): "v2 (while a replica was dead)" for n in range(LINKS)}
        ),
    )
    assert sum(metric(d, "mcpsub_lease_handovers_total") for d in survivors) >= len(moved)
    assert [len(links_of(d)) for d in survivors] == [LINKS // 2] * 2, "spread again evenly"
    # The SSE follower on a survivor saw every event either survivor wrote (woken by
    # LISTEN/NOTIFY for the other's), each exactly once, none skipped.
    written = [row[0] for row in survivors[1].query(
        "SELECT id FROM events WHERE id > :start ORDER BY id", start=start
    )]  # fmt: skip
    wait_until("the follower saw every event", lambda: follower.ids[: len(written)] == written)
    follower.stop()
    assert len(set(follower.ids)) == len(follower.ids), "an event id twice"


def test_sigterm_hands_over_without_duplicates(
    replicas: tuple[LabServer, list[Daemon]],
) -> None:
    lab, (leaving, *staying) = replicas
    assert leaving.stop() == 0
    wait_until("the others hold every link", lambda: all_links_held(staying), TTL + 10)
    for n in range(LINKS):
        put(lab, uri(n), "v3")
    wait_until("updates flow", lambda: texts(staying[0]) == {uri(n): "v3" for n in range(LINKS)})
    rows = staying[0].query(
        "SELECT subscription_id, revision, content_hash FROM revisions ORDER BY id"
    )
    per_sub: dict[int, list[tuple[int, str]]] = {}
    for sub_id, revision, digest in rows:
        per_sub.setdefault(sub_id, []).append((revision, digest))
    for history in per_sub.values():
        digests = [d for _, d in history]
        assert [r for r, _ in history] == list(range(1, len(history) + 1))
        assert all(a != b for a, b in itertools.pairwise(digests)), "a duplicate revision row"
        assert len(history) == 2, history  # v1, v3: the hand-over wrote nothing twice


def test_a_paused_replica_is_fenced_and_gives_its_links_up(
    replicas: tuple[LabServer, list[Daemon]],
) -> None:
    lab, (paused, *others) = replicas
    assert paused.proc is not None
    held = links_of(paused)
    paused.proc.send_signal(signal.SIGSTOP)
    try:
        wait_until("the others took its links", lambda: all_links_held(others), TTL + 15)
        for n in range(LINKS):
            put(lab, uri(n), "v4")
        wait_until("updates flow", lambda: texts(others[0]) == {uri(n): "v4" for n in range(LINKS)})
        before = others[0].query("SELECT COUNT(*), MAX(id) FROM revisions")[0]
    finally:
        paused.proc.send_signal(signal.SIGCONT)
    # It learns from its first renew (or a rejected write) that the links are gone, stops
    # them, and then takes its fair share again like any replica that joins.
    wait_until("it gave up every link it held", lambda: given_up(paused) >= held)
    wait_until(
        "spread evenly again",
        lambda: [len(links_of(d)) for d in (paused, *others)] == [LINKS // 3] * 3,
    )
    # Its stale reads and state writes were rejected by the database: after the pause only
    # the new content was written, once per URI.
    for n in range(LINKS):
        put(lab, uri(n), "v5")
    wait_until("still flowing", lambda: texts(others[1]) == {uri(n): "v5" for n in range(LINKS)})
    rows = others[0].query(
        "SELECT r.subscription_id, r.generation, r.text FROM revisions r "
        "WHERE r.id > :after ORDER BY r.id",
        after=before[1],
    )
    assert {text for _, _, text in rows} == {"v5"}, rows
    assert len(rows) == LINKS
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
    return ids
