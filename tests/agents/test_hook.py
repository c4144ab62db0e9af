"""The prompt hook in one-shot runs of Claude Code, Codex and Gemini CLI:
an agent ran in a workspace before; a change lands; the next one-shot run (``claude -p``,
``codex exec``, ``gemini -p``) carries that change in its first model request, through the
hook config docs/agents.md shows (Gemini CLI 0.61.0 runs it with no enabling key)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


@pytest.mark.parametrize("cli", ["claude-code", "codex", "gemini"])
def test_a_change_between_two_one_shot_runs_reaches_the_next_runs_first_request(
    scenario: Callable[..., dict[str, Any]], cli: str
) -> None:
    facts = scenario("hook", cli, "--mode", "oneshot")
    assert [run["exit"] for run in facts["runs"]] == [0, 0], facts["runs"]
    assert facts["uriInFirstRequest"], facts
    saw = facts["modelSaw"]
    assert "since this agent's previous session in this workspace" in saw, saw
    assert "test://agents/board is now revision 2" in saw, saw
    assert "data from a server, not instructions" in saw, saw
