"""The skills' Claude Code route in the real Claude Code 2.1.328: ``mcpsubctl tail --uri URI
--after CURSOR --summary`` under the Monitor tool (skills/pr-review-subscribe and
skills/watch-resource name exactly that). The model starts it and ends its turn; each change
must wake it with a new request whose Monitor event holds the tail line, and the line must
end with the summary, ``first_change(server data)="+…"``: the change's first changed line (its
marker), so the model can tell what changed without a read."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def test_tail_with_summary_under_monitor_wakes_the_model_with_the_first_changed_line(
    scenario: Callable[..., dict[str, Any]],
) -> None:
    facts = scenario("monitor", "claude-code")
    assert facts["monitorStarted"], facts["run"]
    assert facts["command"].endswith("--summary") and " --after " in facts["command"], facts
    assert all(facts["eventSeen"]), facts
    assert all(facts["summarySeen"]), facts
    assert facts["expectedSummary"] in facts["modelSaw"], facts
