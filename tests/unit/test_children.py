"""The rules for the processes tests start (tests/support/children.py), checked by
running cases from tests/unit/children_cases.py in a pytest of their own."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import children, skips
from tests.support.cli import REPO_ROOT

CASES = Path(__file__).with_name("children_cases.py")


def run_case(
    name: str, pids: Path, *, sigint_ignored: bool = False
) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"{CASES}::{name}"]
    if sigint_ignored:  # as `nohup make test &`, a script or cron start it
        command = ["sh", "-c", 'trap "" INT; exec "$@"', "sh", *command]
    env = {**os.environ, "CHILDREN_CASE_PIDS": str(pids)}
    return subprocess.run(
        command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120, check=False
    )


def written(pids: Path) -> set[int]:
    return {int(pid) for pid in pids.read_text().split()}


def gone(pids: set[int]) -> bool:
    return not any(children._alive(pid) for pid in pids)


def test_children_get_sigint_at_default_when_the_run_ignores_it(tmp_path: Path) -> None:
    done = run_case(
        "test_a_child_gets_sigint_at_its_default", tmp_path / "pids", sigint_ignored=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_failed_test_leaves_no_process_running(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    done = run_case("test_fails_while_its_processes_run", pids)
    started = written(pids)
    try:
        assert done.returncode == 1, done.stdout + done.stderr
        assert "failing on purpose" in done.stdout
        assert len(started) == 2 and gone(started), [children.describe(p) for p in started]
    finally:
        children.stop({pid for pid in started if children._alive(pid)})


def test_a_process_left_running_fails_the_run(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    done = run_case("test_passes_but_leaves_a_process_running", pids)
    started = written(pids)
    try:
        assert done.returncode != 0, done.stdout + done.stderr
        assert "1 process(es) left running by the tests (stopped now)" in done.stdout
        assert "time.sleep(600)" in done.stdout, "it names the process"
        assert gone(started)
    finally:
        children.stop({pid for pid in started if children._alive(pid)})


@pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason=skips.because("linux", "/proc and subreapers")
)
def test_descendants_sees_an_orphan_and_skips_zombies() -> None:
    from tests.unit.children_cases import orphan

    pid = orphan()
    try:
        assert pid in children.descendants(), "a subreaper adopts orphans"
    finally:
        children.stop({pid})
    assert pid not in children.descendants()
