"""Fixtures shared by every test: real lab servers, real CLI subprocesses, both databases;
and the rules for the processes tests start (tests/support/children.py): SIGINT at its
default in every child, a failed test's processes stopped, none left when the run ends."""

from collections.abc import Iterator

import pytest

from tests.support import children, skips
from tests.support.lab import lab_server, lab_server_factory  # noqa: F401
from tests.support.postgres import (  # noqa: F401
    database_url,
    db_backend,
    pg_cluster,
    sqlite_template,
)
from tests.support.store import pg_pair, store  # noqa: F401

children.sigint_at_default()
children.become_subreaper()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A test that fails (an assertion, a timeout) before stopping what it started would leave
    a CLI, a daemon or a demo running: stop every process its body started."""
    before = children.descendants()
    try:
        return (yield)
    except BaseException:
        children.stop(children.descendants() - before)
        raise


@pytest.fixture
def anyio_backend() -> str:
    """The ``anyio`` marker's backend for every async test: asyncio, as the product runs."""
    return "asyncio"


@pytest.fixture(scope="session", autouse=True)
def no_process_left() -> Iterator[None]:
    """Set up before, so torn down after, every other session fixture (the PostgreSQL
    cluster, browsers): whatever still runs then was leaked by a test, and fails the run."""
    yield
    children.reap_zombies()
    left = children.descendants()
    if left:
        shown = "\n  ".join(children.stop(left))
        pytest.fail(f"{len(left)} process(es) left running by the tests (stopped now):\n  {shown}")


def pytest_unconfigure(config: pytest.Config) -> None:
    """The run's last line: each group of skipped tests and the one command that brings it
    (tests/support/skips.py). Printed after pytest's counts, by the controller only."""
    if hasattr(config, "workerinput"):
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    reasons = [
        str(report.longrepr[2]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
        for report in reporter.stats.get("skipped", [])
    ]
    line = skips.summary(reasons)
    if line:
        reporter.write_line(line, yellow=True)
