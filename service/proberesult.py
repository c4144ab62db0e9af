"""What a probe found, as both CLIs print it: the result of ``service.probe`` and of
``mcpsubctl wait`` (which gets it from the daemon instead of a probe).

Apart from :mod:`service.probe` so that ``mcpsubctl wait`` and :mod:`cli.output` can build
and print one without importing the probe engine (asyncio, the MCP client): ``wait`` is
called in loops by agent scripts (``results/cli.md``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from service.actions import extract_next_action


@dataclass
class ProbeResult:
    """Everything the front doors print. Field names follow the JSON keys."""

    server_url: str
    resource_uri: str
    resource_uris: list[str]
    route: str = "timeout"
    capabilities: dict[str, Any] | None = None
    resource_found: bool = False
    listen_acknowledged: bool = False
    honored_uris: list[str] = field(default_factory=list)
    notification_count: int = 0
    close_reason: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    initial_text: str | None = None
    final_text: str | None = None
    notification_uri: str | None = None

    @property
    def notification_received(self) -> bool:
        return self.route == "subscription"

    @property
    def recommended_next_action(self) -> str | None:
        return extract_next_action(self.final_text)
