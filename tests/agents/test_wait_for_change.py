"""``wait_for_change`` over stdio in Claude Code, Codex and Gemini CLI: the
scripted model calls the tool, the lab's resource changes, and the model's next request holds
the new text: the content a real agent CLI hands its model, not only an event."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest


@pytest.mark.parametrize("cli", ["claude-code", "codex", "gemini"])
def test_the_change_reaches_the_models_next_request(
    scenario: Callable[..., dict[str, Any]], cli: str
) -> None:
    facts = scenario("wait", cli, "--transport", "stdio", "--changes", "2")
    run = facts["run"]
    assert run["exit"] == 0 and not run["timedOut"], run
    assert facts["seen"] == [True, True], facts
    # the model asked twice, each time answered by the next change, then it answered
    assert facts["modelRequests"] == 3, facts
    assert "finalText" in facts["modelSaw"] or "+state: MARKER" in facts["modelSaw"], facts
    for latency in facts["latencies"]:
        assert latency is not None and latency < 10, facts
