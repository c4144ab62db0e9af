"""Migration 0015, both backends: subscriptions get an index on ``state``, so the counts per
state that every ``/metrics`` scrape and ``/v1/status`` make read their groups from it instead
of sorting every subscription (80 ms at 100,000 on SQLite, 11 ms with the index)."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.store import catalog
from service.store.migrate import upgrade
from tests.support.postgres import BACKENDS
from tests.support.store import run_sql, unmigrated_database

INDEXES = {
    "sqlite": "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'subscriptions'",
    "postgresql": "SELECT indexname FROM pg_indexes WHERE tablename = 'subscriptions'",
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_0015_indexes_the_subscription_states(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = unmigrated_database(backend, tmp_path, request)
    upgrade(url, "0014")
    (before,) = run_sql(url, (INDEXES[backend], {}))
    upgrade(url)
    (after,) = run_sql(url, (INDEXES[backend], {}))
    assert "ix_subscriptions_state" not in {name for (name,) in before}
    assert "ix_subscriptions_state" in {name for (name,) in after}


def test_sqlite_counts_the_states_without_sorting_every_subscription(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    upgrade(url)
    (plan,) = run_sql(url, (f"EXPLAIN QUERY PLAN {catalog.STATE_COUNTS.text}", {}))
    steps = " / ".join(str(row[-1]) for row in plan)
    assert "ix_subscriptions_state" in steps
    assert "TEMP B-TREE" not in steps
