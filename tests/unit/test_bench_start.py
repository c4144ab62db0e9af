"""The benches measure an installed daemon's start, not one that compiles our modules.

The sessions that run the benches set ``PYTHONDONTWRITEBYTECODE=1``; the daemons inherited
it and every start compiled ~100 modules from source (~0.7 s of each cold start measured),
which an installed wheel, with its .pyc files, never does."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import harness


def test_the_daemon_starts_without_the_no_bytecode_variable_unless_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    assert "PYTHONDONTWRITEBYTECODE" not in harness.Mcpsubd(tmp_path / "state").env
    assert "installed" in harness.start_kind()
    monkeypatch.setattr(harness, "SOURCE_START", True)
    assert harness.Mcpsubd(tmp_path / "state").env["PYTHONDONTWRITEBYTECODE"] == "1"
    assert "from source" in harness.start_kind()


def test_the_tree_is_compiled_once_and_a_source_start_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # as in the sessions: not for compileall
    (tmp_path / "service" / "inner").mkdir(parents=True)
    (tmp_path / "service" / "inner" / "mod.py").write_text("VALUE = 1\n")
    harness.compile_tree(tmp_path)
    compiled = list((tmp_path / "service").rglob("*.pyc"))
    assert [p.name.split(".")[0] for p in compiled] == ["mod"]
    harness.uncompile_tree(tmp_path)
    assert list((tmp_path / "service").rglob("*.pyc")) == []


def test_the_npm_trees_under_bench_are_not_compiled(tmp_path: Path) -> None:
    """``make node-deps`` puts npm trees under ``bench/`` whose Python 2 scripts do not
    compile; a bench after ``make test`` failed on them before it started a daemon."""
    scripts = tmp_path / "bench" / "agents_lab" / "node_modules" / "node-pty" / "ship"
    scripts.mkdir(parents=True)
    (scripts / "ship.py").write_text('print "Python 2"\n')
    (tmp_path / "bench" / "ours.py").write_text("VALUE = 1\n")
    harness.compile_tree(tmp_path)
    assert [p.name.split(".")[0] for p in (tmp_path / "bench").rglob("*.pyc")] == ["ours"]
