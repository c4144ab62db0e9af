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


LONGEST_FIRST = (
    "tests/api/test_schemathesis.py",
    "tests/daemon/test_replicas.py",
    "tests/agents/test_change_starts_agent.py",
    "tests/demo/test_readme.py",
    "tests/face/test_face_node_clients.py",
    "tests/hostile/test_face_takeover_race.py",
    "tests/agents/test_wake.py",
    "tests/demo/test_install_doc.py",
    "tests/daemon/test_storage_full.py",
    "tests/daemon/test_resource_limits.py",
)
"""The files whose tests run longest (15-110 s each on a loaded 2-core host, from
``--durations``), longest first. ``--dist worksteal`` hands each worker a third of the
collection in order and steals from the ends of the queues: a long test near the end of a
queue ran alone while the other workers had finished (a tail of a minute or more). Run
first, the long tests overlap the many short ones, and the run ends on short tests."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the files of :data:`LONGEST_FIRST` to the front, in that order; the rest keep
    theirs (a file's tests stay together, so module-scoped fixtures are set up once)."""
    rank = {path: n for n, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


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
