"""The supervisor's periodic history pruning says when it fails, and tries again."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from structlog.testing import capture_logs

from service.daemon.config import Settings
from service.daemon.supervisor import Supervisor
from service.daemon.wiring import supervisor_collaborators
from tests.api.fakes import migrated_store
from tests.support.poll import until_async


def test_a_failed_prune_is_logged_and_tried_again(tmp_path: Path) -> None:
    async def run() -> list[dict[str, Any]]:
        store = migrated_store(tmp_path / "mcpsub.db")
        settings = Settings(state_dir=tmp_path, replica_id="test", prune_interval_s=0.01)
        supervisor = Supervisor(store, settings, *supervisor_collaborators(store, settings))
        attempts = 0

        async def failing(**_: Any) -> dict[str, int]:
            nonlocal attempts
            attempts += 1
            raise OSError(28, "No space left on device")

        store.prune = failing  # type: ignore[method-assign]
        with capture_logs() as logs:
            task = asyncio.get_running_loop().create_task(supervisor._prune_forever())
            try:
                await until_async("the second interval ran", lambda: attempts >= 2, 10)
            finally:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                await store.close()
        return logs

    logs = asyncio.run(run())
    failures = [e for e in logs if e["event"].startswith("pruning history failed")]
    assert len(failures) >= 2, logs
    assert "No space left on device" in failures[0]["error"]
    assert failures[0]["log_level"] == "warning"
