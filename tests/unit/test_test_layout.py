"""The test tree's layout (docs/architecture.md, "Layout today"): no two test modules share a
file name, so a name in a failure report, a ``-k`` or a conversation points at one file."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
# Package markers and per-directory fixtures and helpers repeat by design.
MAY_REPEAT = {"__init__.py", "conftest.py", "helpers.py"}


def test_no_two_test_modules_share_a_file_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for path in TESTS.rglob("*.py"):
        if "node_modules" in path.parts or path.name in MAY_REPEAT:
            continue
        where[path.name].append(str(path.relative_to(TESTS)))
    repeated = {name: sorted(paths) for name, paths in where.items() if len(paths) > 1}
    assert repeated == {}, "name each for what it tests: " + repr(repeated)
