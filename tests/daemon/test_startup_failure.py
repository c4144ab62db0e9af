"""A start-up that fails after the store opened closes what it made: the links, the API
socket and the store (its writer thread), and ends with a documented exit code instead of an
uncaught exception. Before, a failure in ``supervisor.start()`` ran outside the start-up
``try``, so shutdown never ran and the store was never closed."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy.exc

from service.daemon import exitcodes
from service.daemon import run as daemon_run
from service.daemon.config import Settings
from service.daemon.reload import Reloader
from service.daemon.supervisor import Supervisor
from service.store import Store

pytestmark = pytest.mark.anyio


@pytest.fixture
def closed_stores(monkeypatch: pytest.MonkeyPatch) -> list[Store]:
    closed: list[Store] = []
    real_close = Store.close

    async def close(self: Store) -> None:
        closed.append(self)
        await real_close(self)

    monkeypatch.setattr(Store, "close", close)
    return closed


def _settings(tmp_path: Path) -> Settings:
    state = tmp_path / "state"
    return Settings(state_dir=state)


def _nobody_listens(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except OSError:
        return True
    finally:
        probe.close()
    return False


async def _fail(*_args: Any, **_kwargs: Any) -> None:
    raise RuntimeError("boom inside start-up")


@pytest.mark.parametrize(
    "where", [(Supervisor, "start"), (Reloader, "initial")], ids=["supervisor", "reload"]
)
async def test_a_failure_after_the_store_opened_closes_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    closed_stores: list[Store],
    where: tuple[type, str],
) -> None:
    stopped: list[Supervisor] = []
    real_stop = Supervisor.stop

    async def stop(self: Supervisor) -> None:
        stopped.append(self)
        await real_stop(self)

    monkeypatch.setattr(Supervisor, "stop", stop)
    monkeypatch.setattr(*where, _fail)
    settings = _settings(tmp_path)

    code = await daemon_run.serve(settings)

    assert code == exitcodes.EXIT_SOFTWARE == 70
    assert len(closed_stores) == 1, "the store (and its writer thread) was left open"
    assert len(stopped) == 1, "links started before the failure were not stopped"
    assert _nobody_listens(settings.state_dir / "api.sock")


async def test_a_database_failure_in_start_up_is_exit_69(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, closed_stores: list[Store]
) -> None:
    async def unavailable(*_args: Any, **_kwargs: Any) -> None:
        raise sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("database is locked"))

    monkeypatch.setattr(Supervisor, "start", unavailable)

    code = await daemon_run.serve(_settings(tmp_path))

    assert code == exitcodes.EXIT_DB_UNAVAILABLE
    assert len(closed_stores) == 1
