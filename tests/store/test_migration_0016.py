"""Migration 0016, both backends: revisions keep the unique constraint's index on
(subscription_id, revision) and lose the second index 0001 made on the same columns, and the
lookups by subscription read from the one left (no scan, no sort)."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.store.migrate import upgrade
from tests.support.postgres import BACKENDS
from tests.support.store import run_sql, unmigrated_database

INDEXES = {
    "sqlite": "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'revisions'",
    "postgresql": "SELECT indexname FROM pg_indexes WHERE tablename = 'revisions'",
}
UNIQUE_INDEX = {
    "sqlite": "sqlite_autoindex_revisions_1",
    "postgresql": "uq_revisions_subscription_revision",
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_0016_leaves_revisions_one_index_on_subscription_and_revision(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = unmigrated_database(backend, tmp_path, request)
    upgrade(url, "0015")
    (before,) = run_sql(url, (INDEXES[backend], {}))
    upgrade(url)
    (after,) = run_sql(url, (INDEXES[backend], {}))
    assert {"ix_revisions_subscription", UNIQUE_INDEX[backend]} <= {name for (name,) in before}
    assert "ix_revisions_subscription" not in {name for (name,) in after}
    assert UNIQUE_INDEX[backend] in {name for (name,) in after}


@pytest.mark.parametrize(
    "query",
    [
        # the newest revision (Store.current_revision)
        "SELECT * FROM revisions WHERE subscription_id = 7 ORDER BY revision DESC LIMIT 1",
        # the one before a revision (Store.revision_before)
        "SELECT * FROM revisions WHERE subscription_id = 7 AND revision < 5 "
        "ORDER BY revision DESC LIMIT 1",
    ],
)
def test_sqlite_reads_a_subscriptions_revisions_from_the_unique_index(
    tmp_path: Path, query: str
) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    upgrade(url)
    (plan,) = run_sql(url, (f"EXPLAIN QUERY PLAN {query}", {}))
    steps = " / ".join(str(row[-1]) for row in plan)
    assert "sqlite_autoindex_revisions_1" in steps
    assert "TEMP B-TREE" not in steps
    assert not steps.startswith("SCAN")
