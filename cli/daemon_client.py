"""A small synchronous client for the ``mcpsubd`` local API.

Where the API is (first match wins):

1. ``--api`` / ``MCPSUB_API``: ``unix:///path/api.sock`` or ``http://127.0.0.1:PORT``;
2. the unix socket ``<state dir>/api.sock``, state dir = ``MCPSUB_STATE_DIR``, else
   ``$XDG_STATE_HOME/mcpsub`` (``~/.local/state/mcpsub``; macOS
   ``~/Library/Application Support/mcpsub``).

Over TCP the bearer token comes from ``MCPSUB_API_TOKEN`` or ``<state dir>/api.token``; it is
never printed. A daemon that is not running raises :class:`DaemonUnavailable`, whose hint
names the command that starts it.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import httpx
from httpx_sse import EventSource, ServerSentEvent

from service.pathowner import owner_of

DEFAULT_TIMEOUT_S = 10.0
WAIT_SLACK_S = 5.0
"""Extra seconds a long-poll request may take beyond the wait it asks the daemon for."""


class DaemonUnavailable(Exception):
    error_code = "DAEMON_UNAVAILABLE"

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class DaemonError(Exception):
    """The daemon answered with an error (non-2xx) or an unusable response."""

    def __init__(
        self, status: int, error_code: str, message: str, hint: str | None, body: dict[str, Any]
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message
        self.hint = hint
        self.body = body


def state_dir() -> Path:
    explicit = os.environ.get("MCPSUB_STATE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "mcpsub"
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".local" / "state"
    return base / "mcpsub"


@dataclass(frozen=True)
class Endpoint:
    """Where the API listens: a unix socket path, or a loopback base URL (+ token)."""

    socket: Path | None = None
    base_url: str = "http://localhost"
    token: str | None = None
    explicit: bool = False

    @property
    def display(self) -> str:
        return f"unix://{self.socket}" if self.socket else self.base_url

    def start_hint(self) -> str:
        if self.socket is not None:
            default = state_dir() / "api.sock"
            if self.socket == default and "MCPSUB_STATE_DIR" not in os.environ:
                command = "mcpsubd"
            else:
                command = f"mcpsubd --state-dir {shlex.quote(str(self.socket.parent))}"
            return f"start the daemon with `{command}` (it listens on {self.display})"
        return f"start the daemon with `mcpsubd` and its API on {self.base_url}"


def _read_token(directory: Path) -> str | None:
    token = os.environ.get("MCPSUB_API_TOKEN")
    if token:
        return token.strip()
    try:
        return (directory / "api.token").read_text().strip() or None
    except OSError:
        return None


def _exists(path: Path) -> bool:
    """``Path.exists`` that counts "cannot look" as "exists": the connect then says why."""
    try:
        return path.exists()
    except PermissionError:
        return True


def permission_problem(socket: Path) -> DaemonError | None:
    """A :class:`DaemonError` when this user may not reach ``socket`` (else None).

    Someone else's daemon (a system unit, another user) is running: suggesting to start one
    would be wrong; saying whose it probably is helps.
    """
    try:
        socket.stat()
        allowed = os.access(socket, os.R_OK | os.W_OK)
    except PermissionError:
        allowed = False
    except OSError:
        return None
    if allowed:
        return None
    owner = owner_of(socket)
    message = f"permission denied on {socket}" + (
        f" (the daemon runs as {owner}?)" if owner else ""
    )
    sudo = "sudo" if owner == "root" else f"sudo -u {owner}"
    hint = (
        f"run the command as {owner} (e.g. `{sudo} mcpsubctl …`) or pass --api"
        if owner
        else "run the command as the daemon's user or pass --api"
    )
    return DaemonError(0, "PERMISSION_DENIED", message, hint, {})


def resolve_endpoint(api: str | None = None) -> Endpoint:
    """Parse ``--api`` / ``MCPSUB_API`` or fall back to the default socket."""
    spec = api or os.environ.get("MCPSUB_API")
    if not spec:
        default = state_dir() / "api.sock"
        runtime = os.environ.get("XDG_RUNTIME_DIR")
        unit_socket = Path(runtime) / "mcpsubd" / "api.sock" if runtime else None
        if not _exists(default) and unit_socket is not None and _exists(unit_socket):
            return Endpoint(socket=unit_socket)  # the systemd user unit's RuntimeDirectory
        return Endpoint(socket=default)
    if spec.startswith("tcp://"):  # the daemon's own spelling of its TCP listener
        spec = "http://" + spec[len("tcp://") :]
    if spec.startswith("unix:"):
        path = unquote(spec[len("unix:") :])
        if path.startswith("//"):
            path = path[2:]
        if not path:
            raise ValueError(f"--api {spec!r}: no socket path")
        return Endpoint(socket=Path(path).expanduser(), explicit=True)
    parts = urlsplit(spec)
    if parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1"):
        return Endpoint(base_url=spec.rstrip("/"), token=_read_token(state_dir()), explicit=True)
    raise ValueError(
        f"--api must be unix:///path/api.sock or http://127.0.0.1:PORT (or tcp://…), got {spec!r}"
    )


class DaemonClient:
    def __init__(
        self, endpoint: Endpoint, *, timeout_s: float = DEFAULT_TIMEOUT_S, quiet: bool = False
    ) -> None:
        self.endpoint = endpoint
        self.quiet = quiet
        self._waited_for_start = False
        transport = httpx.HTTPTransport(uds=str(endpoint.socket)) if endpoint.socket else None
        headers = {"Accept": "application/json"}
        if endpoint.token:
            headers["Authorization"] = f"Bearer {endpoint.token}"
        self._http = httpx.Client(
            transport=transport,
            base_url=endpoint.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout_s, connect=5.0),
            trust_env=False,
        )

    @classmethod
    def from_options(cls, api: str | None = None, *, quiet: bool = False) -> DaemonClient:
        return cls(resolve_endpoint(api), quiet=quiet)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> DaemonClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ---- plumbing -----------------------------------------------------------------------
    def _unavailable(self, exc: Exception) -> DaemonUnavailable | DaemonError:
        if self.endpoint.socket is not None:
            denied = permission_problem(self.endpoint.socket)
            if denied is not None:
                return denied
        return DaemonUnavailable(
            f"the daemon is not reachable at {self.endpoint.display}: {exc}",
            self.endpoint.start_hint(),
        )

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: dict[str, Any] | None = None,
        timeout_s: float | None = None,
    ) -> tuple[int, dict[str, Any]]:
        """Send one request; return (status, JSON body) for 2xx, raise otherwise."""
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        kwargs: dict[str, Any] = {"params": clean}
        if body is not None:
            kwargs["json"] = body
        if timeout_s is not None:
            kwargs["timeout"] = httpx.Timeout(timeout_s, connect=5.0)
        try:
            try:
                response = self._http.request(method, path, **kwargs)
            except (httpx.ConnectError, httpx.ConnectTimeout):
                if not self.wait_for_start():
                    raise
                response = self._http.request(method, path, **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise self._unavailable(exc) from None
        except httpx.TimeoutException as exc:
            raise DaemonError(
                0,
                "REQUEST_TIMEOUT",
                f"the daemon did not answer: {exc}",
                "retry; check the daemon log",
                {},
            ) from None
        except httpx.TransportError as exc:
            raise DaemonError(
                0,
                "NETWORK_ERROR",
                f"talking to the daemon failed: {exc}",
                "retry; check the daemon log",
                {},
            ) from None
        return response.status_code, _json_or_error(response)

    def _state_dir(self) -> Path:
        return self.endpoint.socket.parent if self.endpoint.socket else state_dir()

    def _connectable(self) -> bool:
        if self.endpoint.socket is None:
            try:
                self._http.get("/readyz", timeout=httpx.Timeout(1.0))
            except httpx.TransportError:
                return False
            return True
        import socket as sockets

        probe = sockets.socket(sockets.AF_UNIX, sockets.SOCK_STREAM)
        try:
            probe.settimeout(1.0)
            probe.connect(str(self.endpoint.socket))
        except OSError:
            return False
        finally:
            probe.close()
        return True

    def wait_for_start(self) -> bool:
        """After a failed connect: wait (at most ``CLIENT_WAIT_S``, once per client) while a
        daemon is starting in the state dir; True when its API now accepts connections."""
        from service.daemon import starting
        from service.statusline import StatusLine

        directory = self._state_dir()
        if self._waited_for_start or not starting.starting(directory):
            return False
        self._waited_for_start = True
        deadline = time.monotonic() + starting.CLIENT_WAIT_S
        with StatusLine.for_terminal(self.quiet) as status:
            status.phase(f"waiting for mcpsubd to start ({self.endpoint.display})")
            while time.monotonic() < deadline:
                if self._connectable():
                    return True
                if not starting.starting(directory) and not self._connectable():
                    return False  # it gave up (or finished and failed)
                time.sleep(0.05)
        return False

    def get(self, path: str, **params: Any) -> dict[str, Any]:
        return self.request("GET", path, params=params)[1]

    # ---- API ----------------------------------------------------------------------------
    def subscribe(self, url: str, uri: str) -> tuple[dict[str, Any], bool]:
        status, body = self.request("POST", "/v1/subscriptions", body={"url": url, "uri": uri})
        return body, status == 201

    def unsubscribe(self, subscription_id: int) -> dict[str, Any]:
        return self.request("DELETE", f"/v1/subscriptions/{subscription_id}")[1]

    def subscriptions(self) -> list[dict[str, Any]]:
        return list(self.get("/v1/subscriptions")["subscriptions"])

    def subscription(self, subscription_id: int) -> dict[str, Any]:
        return self.get(f"/v1/subscriptions/{subscription_id}")

    def status(self) -> dict[str, Any]:
        return self.get("/v1/status")

    def resubscribe(self, url: str | None = None) -> list[str]:
        return list(self.request("POST", "/v1/resubscribe", params={"url": url})[1]["rechecked"])

    def content(self, uri: str, url: str | None = None) -> dict[str, Any]:
        return self.get("/v1/content", uri=uri, url=url)

    def events(
        self, after: int = 0, limit: int = 100, uri: str | None = None, types: str | None = None
    ) -> dict[str, Any]:
        return self.get("/v1/events", after=after, limit=limit, uri=uri, type=types)

    def wait(
        self, uri: str, *, url: str | None, after: int | None, timeout_ms: float
    ) -> dict[str, Any]:
        """Long-poll; raises DaemonError NOTIFICATION_TIMEOUT (408) when nothing came."""
        params = {"uri": uri, "url": url, "after": after, "timeout_ms": int(timeout_ms)}
        return self.request(
            "GET", "/v1/wait", params=params, timeout_s=timeout_ms / 1000 + WAIT_SLACK_S
        )[1]

    # ---- webhooks -------------------------------------------------------------------------
    def add_webhook(
        self,
        url: str,
        *,
        uri_patterns: list[str] | None = None,
        subscription_ids: list[int] | None = None,
        mode: str | None = None,
        secret: str | None = None,
        allow_private_target: bool = False,
    ) -> dict[str, Any]:
        """A new target; the answer's ``secret`` is the only time the daemon shows it."""
        body: dict[str, Any] = {"url": url}
        if uri_patterns:
            body["uriPatterns"] = uri_patterns
        if subscription_ids:
            body["subscriptionIds"] = subscription_ids
        if mode is not None:
            body["mode"] = mode
        if secret is not None:
            body["secret"] = secret
        if allow_private_target:
            body["allowPrivateTarget"] = True
        return self.request("POST", "/v1/webhooks", body=body)[1]

    def webhooks(self) -> list[dict[str, Any]]:
        return list(self.get("/v1/webhooks")["webhooks"])

    def webhook(self, target_id: int) -> dict[str, Any]:
        return self.get(f"/v1/webhooks/{target_id}")

    def remove_webhook(self, target_id: int) -> dict[str, Any]:
        return self.request("DELETE", f"/v1/webhooks/{target_id}")[1]

    def webhook_action(self, target_id: int, action: str) -> dict[str, Any]:
        """``enable``, ``disable``, ``test`` or ``rotate-secret``."""
        return self.request("POST", f"/v1/webhooks/{target_id}/{action}", body={})[1]

    def deliveries(
        self,
        *,
        target: int | None = None,
        state: str | None = None,
        after: int = 0,
        limit: int = 100,
    ) -> dict[str, Any]:
        return self.get("/v1/deliveries", target=target, state=state, after=after, limit=limit)

    def delivery(self, delivery_id: int) -> dict[str, Any]:
        return self.get(f"/v1/deliveries/{delivery_id}")

    def retry_delivery(self, delivery_id: int) -> dict[str, Any]:
        return self.request("POST", f"/v1/deliveries/{delivery_id}/retry")[1]

    def recover_deliveries(self, target: int, since: str) -> dict[str, Any]:
        body = {"target": target, "since": since}
        return self.request("POST", "/v1/deliveries/recover", body=body)[1]

    def stream(
        self,
        *,
        last_event_id: int | None = None,
        uri: str | None = None,
        types: str | None = None,
    ) -> Iterator[tuple[int | None, str, dict[str, Any]]]:
        """Server-sent events as (id, type, data) until the daemon closes the stream."""
        headers = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            headers["Last-Event-ID"] = str(last_event_id)
        params = {k: v for k, v in {"uri": uri, "type": types}.items() if v is not None}
        try:
            with self._http.stream(
                "GET",
                "/v1/events/stream",
                params=params,
                headers=headers,
                timeout=httpx.Timeout(DEFAULT_TIMEOUT_S, connect=5.0, read=None),
            ) as response:
                if response.status_code != 200:
                    response.read()
                    _json_or_error(response)
                # httpx-sse decodes the frames: the peer is our own daemon on a local socket,
                # so its unbounded line reading does not matter here (the MCP side uses the
                # bounded service.mcp.sse decoder; docs/architecture.md).
                for sse in EventSource(response).iter_sse():
                    if sse.data:
                        yield sse_frame(sse)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise self._unavailable(exc) from None


def sse_frame(sse: ServerSentEvent) -> tuple[int | None, str, dict[str, Any]]:
    """One decoded event as (id, type, JSON data); data that is not an object is wrapped."""
    event_id = int(sse.id) if sse.id.isdigit() else None
    try:
        payload = json.loads(sse.data)
    except ValueError:
        payload = {"raw": sse.data}
    return event_id, sse.event, payload if isinstance(payload, dict) else {"value": payload}


def _json_or_error(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {}
    if response.is_success:
        return body
    code = body.get("errorCode") or f"HTTP_{response.status_code}"
    message = body.get("message") or f"the daemon answered HTTP {response.status_code}"
    raise DaemonError(response.status_code, str(code), str(message), body.get("hint"), body)
