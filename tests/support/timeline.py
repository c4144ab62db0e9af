"""A pytest plugin that records when each test ran, on which worker, and the CPU it used.

Loaded with ``-p tests.support.timeline`` and ``MCPSUB_TEST_TIMELINE=DIR``: each worker appends
one JSON line per test to ``DIR/timeline.<worker>.jsonl`` (start and end, wall clock; the
worker's own CPU and that of the children it waited for, a daemon or a CLI it stopped).
``bench/testsuite.py`` runs the suite with it and writes results/testsuite.md: where the
suite's time goes, which is what made ``make test`` run one worker more than the cores,
with ``--dist worksteal`` (see the Makefile).

Without ``MCPSUB_TEST_TIMELINE`` it records nothing.
"""

from __future__ import annotations

import json
import os
import resource
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

_out: IO[str] | None = None


def _cpu(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    global _out
    where = os.environ.get("MCPSUB_TEST_TIMELINE")
    if not where:
        return (yield)
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    if _out is None:
        _out = (Path(where) / f"timeline.{worker}.jsonl").open("a")
    started, own, kids = time.time(), _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    try:
        return (yield)
    finally:
        record = {
            "test": item.nodeid,
            "worker": worker,
            "start": started,
            "end": time.time(),
            "cpu": _cpu(resource.RUSAGE_SELF) - own + _cpu(resource.RUSAGE_CHILDREN) - kids,
        }
        _out.write(json.dumps(record) + "\n")
        _out.flush()
