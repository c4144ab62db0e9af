"""What a probe found, as both CLIs print it: the result of ``service.probe`` and of
``mcpsubctl wait`` (which gets it from the daemon instead of a probe).

Apart from :mod:`service.probe` so that ``mcpsubctl wait`` and :mod:`cli.output` can build
and print one without importing the probe engine (asyncio, the MCP client): ``wait`` is
called in loops by agent scripts (``results/cli.md``).
"""

from __future__ import annotations

from service.actions import extract_next_action

TYPE_CHECKING = False  # typing and dataclasses (inspect) cost more than wait's own work
if TYPE_CHECKING:
    from typing import Any


class ProbeResult:
    """Everything the front doors print. Field names follow the JSON keys.

    A plain class rather than a dataclass: ``mcpsubctl wait`` builds one on every call, and
    ``dataclasses`` imports ``inspect``, more than the rest of the call's imports together."""

    __slots__ = (
        "capabilities",
        "close_reason",
        "error_code",
        "error_message",
        "final_text",
        "honored_uris",
        "initial_text",
        "listen_acknowledged",
        "notification_count",
        "notification_uri",
        "resource_found",
        "resource_uri",
        "resource_uris",
        "route",
        "server_url",
    )

    def __init__(
        self,
        server_url: str,
        resource_uri: str,
        resource_uris: list[str],
        route: str = "timeout",
        capabilities: dict[str, Any] | None = None,
        resource_found: bool = False,
        listen_acknowledged: bool = False,
        honored_uris: list[str] | None = None,
        notification_count: int = 0,
        close_reason: str | None = None,
        error_code: str | None = None,
        error_message: str | None = None,
        initial_text: str | None = None,
        final_text: str | None = None,
        notification_uri: str | None = None,
    ) -> None:
        self.server_url = server_url
        self.resource_uri = resource_uri
        self.resource_uris = resource_uris
        self.route = route
        self.capabilities = capabilities
        self.resource_found = resource_found
        self.listen_acknowledged = listen_acknowledged
        self.honored_uris: list[str] = [] if honored_uris is None else honored_uris
        self.notification_count = notification_count
        self.close_reason = close_reason
        self.error_code = error_code
        self.error_message = error_message
        self.initial_text = initial_text
        self.final_text = final_text
        self.notification_uri = notification_uri

    def _fields(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ProbeResult):
            return NotImplemented
        return self._fields() == other._fields()

    __hash__ = None  # type: ignore[assignment]  # mutable, like the dataclass it was

    def __repr__(self) -> str:
        body = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"ProbeResult({body})"

    @property
    def notification_received(self) -> bool:
        return self.route == "subscription"

    @property
    def recommended_next_action(self) -> str | None:
        return extract_next_action(self.final_text)
