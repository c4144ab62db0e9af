"""The skills in the real Claude Code, Codex and Gemini CLI: after ``mcpsubctl skills
install AGENT --project DIR``, the first model request of a one-shot run lists
``pr-review-subscribe``; a scripted model that loads it (the CLI's own way: Claude Code's
Skill tool, Codex reading SKILL.md, Gemini's activate_skill) gets its text, and following its
route (``read``, keep the eventId, ``wait_for_change`` with ``after``) reaches the new
content."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


@pytest.mark.parametrize("cli", ["claude-code", "codex", "gemini"])
def test_the_installed_skill_is_listed_and_its_route_reaches_the_change(
    scenario: Callable[..., dict[str, Any]], cli: str
) -> None:
    facts = scenario("skill", cli)
    assert facts["install"]["exit"] == 0, facts["install"]
    assert facts["run"]["exit"] == 0 and not facts["run"]["timedOut"], facts["run"]
    assert facts["listedInFirstRequest"], facts
    assert facts["skillTextReachedModel"], facts
    assert facts["newContentReachedModel"], facts
