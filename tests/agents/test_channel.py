"""``mcpsubctl mcp --channel`` in the real Claude Code 2.1.328: it must lead Claude Code into
the era where channels work. A face that answers ``server/discover`` makes Claude Code
negotiate 2026-07-28, and its debug log then says "Channel notifications skipped: connection
negotiated a modern protocol revision with no unsolicited notification path". Claude Code
must negotiate 2025-11-25 and get as far as the lab can take it offline: its own
feature switch (the research preview, asked of Anthropic's servers)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def test_claude_code_negotiates_the_channel_era_and_stops_only_at_its_feature_switch(
    scenario: Callable[..., dict[str, Any]],
) -> None:
    facts = scenario("channel", "claude-code", needs=("tmux",))
    assert facts["decided"], facts
    assert facts["negotiatedProtocolVersion"] == "2025-11-25", facts
    assert facts["protocolEra"] == "legacy", facts
    verdict = facts["channelVerdict"]
    assert "modern protocol revision" not in verdict, facts
    assert verdict == "Channel notifications skipped: channels feature is not currently available"
