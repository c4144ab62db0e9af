"""The daemon's local API: REST + SSE over a 0600 unix socket or loopback TCP + token."""

from service.api.app import create_app
from service.api.state import SupervisorLike

__all__ = ["SupervisorLike", "create_app"]
