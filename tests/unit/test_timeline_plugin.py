"""``tests/support/timeline.py``: one JSON line per test with ``MCPSUB_TEST_TIMELINE`` set, and
nothing without it (bench/testsuite.py reads these lines)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _not_a_worker() -> dict[str, str]:
    """This environment without xdist's worker variables (the inner run is not a worker)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST_")}


def _run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "test_two.py").write_text("def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "tests.support.timeline", "-p", "no:cacheprovider",
         "--rootdir", str(tmp_path), str(tmp_path / "test_two.py")],
        cwd=REPO, env={**_not_a_worker(), "PYTHONPATH": str(REPO), **env},
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def test_each_test_is_one_line_with_its_times_and_worker(tmp_path: Path) -> None:
    out = tmp_path / "timeline"
    out.mkdir()
    done = _run(tmp_path, MCPSUB_TEST_TIMELINE=str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    lines = (out / "timeline.main.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    assert [r["test"].split("::")[1] for r in records] == ["test_a", "test_b"]
    assert all(r["worker"] == "main" and r["end"] >= r["start"] and r["cpu"] >= 0 for r in records)


def test_without_the_variable_nothing_is_written(tmp_path: Path) -> None:
    done = _run(tmp_path, MCPSUB_TEST_TIMELINE="")
    assert done.returncode == 0, done.stdout + done.stderr
    assert not list(tmp_path.rglob("timeline.*.jsonl"))
