"""Waking a Claude Code session that is open but idle, with the plugin ``mcpsubctl plugin
install claude-code`` writes (docs/agents.md, "Wake a session that is open but idle"): the
real Claude Code 2.1.328, interactive in a private tmux server, loaded with
``--plugin-dir``; and Gemini CLI 0.61.0's background-completion injection. A change must
reach the model in a request nobody typed."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.demo.test_agents_doc import checked


def test_the_plugins_monitor_wakes_a_session_nobody_prompted_with_the_change(
    scenario: Callable[..., dict[str, Any]],
) -> None:
    facts = scenario("wake", "claude-code", "--way", "monitor", needs=("tmux",))
    assert facts["armed"], facts["screen"]  # the monitor's `mcpsubctl tail` ran at start
    assert facts["requestsBeforeChange"] == 0, facts
    assert facts["woken"], facts["screen"]
    assert "<task-notification>" in facts["modelSaw"], facts["modelSaw"]
    assert 'first_change(server data)="+board: v1 MARKER-' in facts["modelSaw"]


def test_the_rewake_hook_wakes_the_session_after_its_turn_without_server_text(
    scenario: Callable[..., dict[str, Any]],
) -> None:
    facts = scenario("wake", "claude-code", "--way", "rewake", needs=("tmux",))
    assert facts["typedPrompt"] and facts["armed"], facts["screen"]
    assert facts["woken"], facts["screen"]
    assert "test://agents/board changed" in facts["modelSaw"], facts["modelSaw"]
    assert "MARKER-" not in facts["modelSaw"]


def test_gemini_background_completion_wakes_the_idle_session_as_its_docs_configure_it(
    scenario: Callable[..., dict[str, Any]],
) -> None:
    facts = scenario("wake", "gemini", needs=("tmux",))
    assert facts["settings"] == checked()[("gemini", "wake")]  # what docs/agents.md shows
    assert facts["armed"], facts["screen"]
    assert facts["woken"], facts["screen"]
    assert "test://agents/board changed" in facts["modelSaw"]
    assert not facts["serverTextSeen"]  # Gemini shows it as the user's own words: none of it


@pytest.mark.parametrize("cli", ["codex", "opencode"])
def test_agent_run_delivers_the_change_into_a_running_session(
    scenario: Callable[..., dict[str, Any]], cli: str
) -> None:
    """Codex: ``agent-run --queue`` (``codex queue --resume``) into a TUI session open in
    tmux; OpenCode: ``prompt_async`` into a session of ``opencode serve``."""
    facts = scenario("wake", cli, needs=("tmux",) if cli == "codex" else ())
    assert facts["run"]["exit"] == 0, facts["run"]
    assert facts["woken"], facts
    assert facts["fenced"], facts["modelSaw"]
