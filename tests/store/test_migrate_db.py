"""``mcpsubd migrate-db --to postgresql://…``: a SQLite state moved up, nothing lost."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from sqlalchemy import text

from service.store import Store
from service.webhooks.repository import WebhookRepository
from tests.support.cli import run_cli
from tests.support.postgres import PgCluster
from tests.support.store import bump_generation

SECRET = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo0NTY3ODk="
TABLES = ("servers", "subscriptions", "revisions", "events", "webhook_targets", "deliveries")


async def fill(url: str) -> None:
    store = Store.open(url)
    try:
        repo = WebhookRepository(store)
        await repo.create_target("http://127.0.0.1:9/hook", secret=SECRET)
        for n in range(3):
            sub, _ = await store.add_subscription(f"http://127.0.0.1:1/mcp{n}", f"test://m/{n}")
            generation = await bump_generation(store, sub.server_id)
            assert generation is not None
            for version in range(2):
                contents = [{"uri": sub.uri, "text": f"v{version}"}]
                await store.record_read(sub.id, sub.server_id, generation, contents, f"v{version}")
        await store.remove_subscription(sub.id)  # a gap in the ids
    finally:
        await store.close()


async def rows(url: str, sql: str) -> list[tuple[object, ...]]:
    store = Store.open(url)
    try:
        async with store.engine.connect() as conn:
            return [tuple(r) for r in await conn.execute(text(sql))]
    finally:
        await store.close()


def snapshot(url: str) -> dict[str, list[tuple[object, ...]]]:
    queries = {
        "events": "SELECT id, type, uri, revision_id FROM events ORDER BY id",
        "deliveries": "SELECT id, webhook_id, event_id, state FROM deliveries ORDER BY id",
        "targets": "SELECT id, url, secret FROM webhook_targets ORDER BY id",
        "revisions": "SELECT id, subscription_id, revision, text FROM revisions ORDER BY id",
    }
    return {name: asyncio.run(rows(url, sql)) for name, sql in queries.items()}


def test_copy_verify_and_refuse_a_second_time(
    pg_cluster: PgCluster, sqlite_template: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    shutil.copyfile(sqlite_template, state / "mcpsub.db")
    source = f"sqlite:///{state / 'mcpsub.db'}"
    asyncio.run(fill(source))
    target = pg_cluster.fresh_database(migrated=False)

    result = run_cli("mcpsubd", "migrate-db", "--state-dir", str(state), "--to", target)
    assert result.code == 0, result.stderr
    for table in TABLES:
        assert f"{table} " in result.stdout
    before = snapshot(source)
    assert snapshot(target) == before, "ids, secrets, webhook-ids and texts all copied"
    assert len(before["deliveries"]) == 6 and before["targets"][0][2] == SECRET

    async def next_event_id() -> int:
        store = Store.open(target)
        try:
            await store.add_subscription("http://127.0.0.1:1/new", "test://new")
            return await store.last_event_id()
        finally:
            await store.close()

    assert asyncio.run(next_event_id()) > before["events"][-1][0], "sequences continue"

    again = run_cli("mcpsubd", "migrate-db", "--state-dir", str(state), "--to", target)
    assert again.code == 73
    assert "not empty" in again.stderr and "Traceback" not in again.stderr


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        ([], 2, "--to"),
        (["--to", "sqlite:////tmp/x.db"], 78, "postgresql://"),
        (["--to", "postgresql://u:hunter2@127.0.0.1:1/x"], 69, "***@127.0.0.1:1/x"),
    ],
)
def test_bad_targets(
    sqlite_template: Path, tmp_path: Path, args: list[str], code: int, message: str
) -> None:
    state = tmp_path / "state"
    state.mkdir()
    shutil.copyfile(sqlite_template, state / "mcpsub.db")
    result = run_cli("mcpsubd", "migrate-db", "--state-dir", str(state), *args)
    assert result.code == code, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr and "hunter2" not in result.stderr


def test_no_source_database(tmp_path: Path, pg_cluster: PgCluster) -> None:
    target = pg_cluster.fresh_database(migrated=False)
    result = run_cli("mcpsubd", "migrate-db", "--state-dir", str(tmp_path / "none"), "--to", target)
    assert result.code == 66
    assert "no SQLite database" in result.stderr
