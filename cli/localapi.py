"""``DaemonClient``: the local API's calls as ``mcpsubctl`` makes them, and their errors.

Every daemon command (``subscribe`` … ``resubscribe``, ``status`` and ``--wait-ready``,
``read``, ``events`` and ``events --follow``, ``wait``, the webhook and delivery commands,
``ui``) and ``mcpsubctl tail`` reach the daemon through it. Agent scripts call these in loops, so a
call's start-up is its cost: this module imports ``json`` and
:mod:`service.localclient` (the one client of the local API: where it is, and the bounded
HTTP/1.1 reader the hook and the stdio face use too), which imports ``_socket``, not
``socket``, httpx or ``http.client`` (``results/cli.md``).

Failures are two exception classes the CLI maps to exit codes (``cli.failures``):
:class:`DaemonUnavailable` (nothing listens: exit 10, with the command that starts the
daemon) and :class:`DaemonError` (the daemon answered an error, e.g. 401
``API_TOKEN_REQUIRED`` → exit 3; or the exchange failed: ``REQUEST_TIMEOUT`` → 6,
``NETWORK_ERROR`` → 5, ``RESPONSE_TOO_LARGE`` → 4). Every answer is bounded: headers by
:data:`service.localclient.MAX_HEADER_BYTES`, bodies by ``max_response_bytes``, each SSE
event by the decoder's limit, and every wait by a socket timeout.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator

from service import statepaths
from service.apishapes import answer_problem
from service.localclient import (
    Closed,
    Connection,
    Endpoint,
    Gone,
    NotTrusted,
    ProtocolError,
    ResponseReader,
    TooLarge,
    connect,
    resolve_endpoint,
)
from service.localclient import query as _query

TYPE_CHECKING = False  # typing costs more than socket+json: not imported at run time
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

__all__ = [
    "DaemonClient",
    "DaemonError",
    "DaemonUnavailable",
    "Endpoint",
    "_query",
    "permission_problem",
    "resolve_endpoint",
    "sse_frame",
    "state_dir",
]

DEFAULT_TIMEOUT_S = 10.0
WAIT_SLACK_S = 5.0
"""Extra seconds a long-poll request may take beyond the wait it asks the daemon for."""
MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""Largest answer body read (the largest resource content, JSON-escaped, with room)."""


class DaemonUnavailable(Exception):
    """Nothing answers where the API should be; the hint names the command that starts it."""

    error_code = "DAEMON_UNAVAILABLE"

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class DaemonError(Exception):
    """The daemon answered with an error (non-2xx), or the exchange failed midway."""

    def __init__(
        self, status: int, error_code: str, message: str, hint: str | None, body: dict[str, Any]
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error_code = error_code
        self.message = message
        self.hint = hint
        self.body = body


def state_dir() -> str:
    """The state directory (:func:`service.statepaths.state_dir`), as a string."""
    return statepaths.state_dir()


def permission_problem(path: str | Path) -> DaemonError | None:
    """A :class:`DaemonError` when this user may not reach the socket ``path`` (else None).

    Someone else's daemon (a system unit, another user) is running: suggesting to start one
    would be wrong; saying whose it probably is helps.
    """
    try:
        os.stat(path)
        allowed = os.access(path, os.R_OK | os.W_OK)
    except PermissionError:
        allowed = False
    except OSError:
        return None
    if allowed:
        return None
    from pathlib import Path

    from service.pathowner import owner_of

    owner = owner_of(Path(path))
    message = f"permission denied on {path}" + (f" (the daemon runs as {owner}?)" if owner else "")
    sudo = "sudo" if owner == "root" else f"sudo -u {owner}"
    hint = (
        f"run the command as {owner} (e.g. `{sudo} mcpsubctl …`) or pass --api"
        if owner
        else "run the command as the daemon's user or pass --api"
    )
    return DaemonError(0, "PERMISSION_DENIED", message, hint, {})


class DaemonClient:
    """Blocking requests to the local API on one kept-alive connection.

    Cheap to make; the connection opens at the first request and is reused while the daemon
    keeps it alive (``subscribe`` polls a subscription's first state on it). A request that
    finds a reused connection closed before any answer byte is sent once more on a new one.
    """

    def __init__(
        self,
        endpoint: Endpoint,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        quiet: bool = False,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.endpoint = endpoint
        self.quiet = quiet
        self.timeout_s = timeout_s
        self.max_response_bytes = max_response_bytes
        self._waited_for_start = False
        self._connection: Connection | None = None

    @classmethod
    def from_options(cls, api: str | None = None, *, quiet: bool = False) -> DaemonClient:
        return cls(resolve_endpoint(api), quiet=quiet)

    def reread_token(self) -> bool:
        """Read the TCP API's token again (``MCPSUB_API_TOKEN`` or ``<state dir>/api.token``);
        True when it changed. A client started just before the daemon read no token, or the
        previous run's: the daemon writes the file while it starts, so a client that waits
        for it (``status --wait-ready``) must look again after a 401."""
        if self.endpoint.socket is not None:
            return False
        token = statepaths.read_token(state_dir())
        if token is None or token == self.endpoint.token:
            return False
        self.endpoint.token = token
        return True

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def __enter__(self) -> DaemonClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # ---- plumbing -----------------------------------------------------------------------
    def _unavailable(self, exc: BaseException) -> DaemonUnavailable | DaemonError:
        if self.endpoint.socket is not None:
            denied = permission_problem(self.endpoint.socket)
            if denied is not None:
                return denied
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        hint = self.endpoint.start_hint()
        socket = self.endpoint.socket
        if socket is not None and not statepaths.fits(socket):
            reason = (
                f"the path is {len(os.fsencode(socket))} bytes, longer than a unix socket "
                f"address holds ({statepaths.max_socket_path()})"
            )
            hint = (
                "name a shorter socket with --api unix:///PATH, or leave --api and MCPSUB_API "
                "out: the default socket always fits (docs/operations.md)"
            )
        return DaemonUnavailable(
            f"the daemon is not reachable at {self.endpoint.display}: {reason or 'timed out'}",
            hint,
        )

    def _open(self) -> Connection:
        """Connect, or wait (once) for a daemon that is starting; raises DaemonUnavailable."""
        try:
            sock = connect(self.endpoint)
        except NotTrusted as exc:
            raise _not_trusted(exc) from None
        except OSError as exc:
            if not self.wait_for_start():
                raise self._unavailable(exc) from None
            try:
                sock = connect(self.endpoint)
            except NotTrusted as again:
                raise _not_trusted(again) from None
            except OSError as again:
                raise self._unavailable(again) from None
        self._connection = Connection(sock)
        return self._connection

    def _exchange(
        self, payload: bytes, timeout_s: float | None, max_body: int | None
    ) -> tuple[Connection, ResponseReader]:
        """Send ``payload`` and read the answer's head, on the kept connection or a new one.

        A kept connection the daemon closed while idle (uvicorn's keep-alive timeout) fails
        before any answer byte: the request is sent once more on a new connection.
        """
        connection = self._connection
        if connection is None:
            connection = self._open()
            return connection, connection.exchange(payload, max_body, timeout_s=timeout_s)
        try:
            return connection, connection.exchange(payload, max_body, timeout_s=timeout_s)
        except (Closed, ConnectionResetError, BrokenPipeError):
            pass
        self.close()
        connection = self._open()
        return connection, connection.exchange(payload, max_body, timeout_s=timeout_s)

    def _failed(self, exc: BaseException) -> DaemonError:
        """An exchange that broke after the connect, as the error the CLI prints."""
        self.close()
        if isinstance(exc, TimeoutError):
            return DaemonError(
                0, "REQUEST_TIMEOUT", "the daemon did not answer in time", _RETRY_HINT, {}
            )
        if isinstance(exc, TooLarge):
            return DaemonError(
                0,
                "RESPONSE_TOO_LARGE",
                f"the daemon's answer is larger than {self.max_response_bytes} bytes",
                "is --api pointing at mcpsubd? otherwise narrow the request (e.g. --limit)",
                {},
            )
        detail = str(exc) or type(exc).__name__
        return DaemonError(
            0, "NETWORK_ERROR", f"talking to the daemon failed: {detail}", _RETRY_HINT, {}
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
        data = json.dumps(body).encode() if body is not None else None
        payload = self.endpoint.request(method, path + _query(params or {}), data)
        try:
            connection, answer = self._exchange(
                payload, timeout_s or self.timeout_s, self.max_response_bytes
            )
            raw = connection.body(answer)
        except (OSError, ProtocolError, TooLarge, ValueError) as exc:
            raise self._failed(exc) from None
        if not answer.keep_alive:
            self.close()
        return answer.status, self._answer(method, path, answer.status, raw)

    def _answer(self, method: str, path: str, status: int, raw: bytes) -> dict[str, Any]:
        """A 2xx answer's JSON object, in the shape its route has (``service.apishapes``);
        an error answer raised as its :class:`DaemonError`; anything else ``NOT_MCPSUBD``."""
        if not 200 <= status < 300:
            _json_or_error(status, raw)  # raises
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = None
        problem = answer_problem(method, path, body)
        if problem is not None:
            raise DaemonError(
                status,
                NOT_MCPSUBD,
                f"what answers at {self.endpoint.display} does not look like mcpsubd "
                f"(HTTP {status}: {problem})",
                NOT_MCPSUBD_HINT,
                {},
            )
        assert isinstance(body, dict)  # answer_problem says so
        return body

    def _state_dir(self) -> str:
        return self.endpoint.state_dir

    def _connectable(self) -> bool:
        try:
            connect(self.endpoint).close()
        except OSError:
            return False
        return True

    def wait_for_start(self) -> bool:
        """After a failed connect: wait (at most ``CLIENT_WAIT_S``, once per client) while a
        daemon is starting in the state dir; True when its API now accepts connections."""
        from pathlib import Path

        from service.daemon import starting

        directory = Path(self._state_dir())
        if self._waited_for_start or not starting.starting(directory):
            return False
        self._waited_for_start = True
        from service.statusline import StatusLine

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

    def content(
        self, uri: str, url: str | None = None, server: str | None = None
    ) -> dict[str, Any]:
        return self.get("/v1/content", uri=uri, url=url, server=server)

    def events(
        self, after: int = 0, limit: int = 100, uri: str | None = None, types: str | None = None
    ) -> dict[str, Any]:
        return self.get("/v1/events", after=after, limit=limit, uri=uri, type=types)

    def wait(
        self,
        uri: str,
        *,
        url: str | None,
        after: int | None,
        timeout_ms: float,
        server: str | None = None,
    ) -> dict[str, Any]:
        """Long-poll; raises DaemonError NOTIFICATION_TIMEOUT (408) when nothing came."""
        params = {
            "uri": uri, "url": url, "server": server, "after": after,
            "timeout_ms": int(timeout_ms),
        }  # fmt: skip
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

    # ---- the event stream -------------------------------------------------------------------
    def stream(
        self,
        *,
        last_event_id: int | None = None,
        uri: str | None = None,
        types: str | None = None,
        idle_timeout_s: float | None = None,
    ) -> Iterator[tuple[int | None, str, dict[str, Any]]]:
        """Server-sent events of ``/v1/events/stream`` as (id, type, data) until the daemon
        closes the stream.

        Decoded by ``service.mcp.sse`` (the bounded decoder the daemon's listen streams use):
        an event beyond its limit ends the stream with ``NETWORK_ERROR`` instead of growing a
        buffer. ``idle_timeout_s`` (default: none) bounds the silence between two reads; the
        daemon sends a keep-alive comment every 15 s, so 45 s or more is safe.
        """
        from service.mcp.sse import Event, EventTooLarge, SSEDecoder

        extra = {"Accept": "text/event-stream"}
        if last_event_id is not None:
            extra["Last-Event-ID"] = str(last_event_id)
        target = "/v1/events/stream" + _query({"uri": uri, "type": types})
        self.close()  # the stream gets a connection of its own, closed when it ends
        payload = self.endpoint.request("GET", target, None, extra)
        try:
            connection, answer = self._exchange(payload, self.timeout_s, self.max_response_bytes)
            if answer.status != 200:
                _json_or_error(answer.status, connection.body(answer))
            answer.max_body = None  # a stream has no end: each event is bounded by the decoder
            decoder = SSEDecoder()
            for chunk in connection.stream(answer, idle_timeout_s):
                for item in decoder.feed(chunk):
                    if isinstance(item, Event) and item.data:
                        yield sse_frame(item.id, item.event, item.data)
        except (Gone, ConnectionResetError, BrokenPipeError):
            # Killed, restarted, or stopped without ending the stream: not a bad answer.
            raise DaemonUnavailable(
                f"the daemon went away ({self.endpoint.display} closed the stream)",
                self.endpoint.start_hint(),
            ) from None
        except (OSError, ProtocolError, TooLarge, EventTooLarge, ValueError) as exc:
            raise self._failed(exc) from None
        finally:
            self.close()


_RETRY_HINT = "retry; check the daemon log"
NOT_MCPSUBD = "NOT_MCPSUBD"
NOT_MCPSUBD_HINT = (
    "check --api / MCPSUB_API: mcpsubd's socket (unix://<state dir>/api.sock) or the "
    "http://127.0.0.1:PORT it logs at start"
)


def _not_trusted(exc: NotTrusted) -> DaemonError:
    """The socket may be another user's: nothing was sent (``SOCKET_NOT_TRUSTED``)."""
    return DaemonError(0, NotTrusted.error_code, exc.message, exc.hint, {})


def sse_frame(
    event_id: str | None, event_type: str, data: str
) -> tuple[int | None, str, dict[str, Any]]:
    """One decoded event as (id, type, JSON data); data that is not an object is wrapped."""
    number = int(event_id) if event_id and event_id.isascii() and event_id.isdigit() else None
    try:
        payload = json.loads(data)
    except ValueError:
        payload = {"raw": data}
    return number, event_type, payload if isinstance(payload, dict) else {"value": payload}


def _json_or_error(status: int, raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw) if raw else None
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {}
    if 200 <= status < 300:
        return body
    if not isinstance(body.get("errorCode"), str):  # every mcpsubd error carries one
        raise DaemonError(
            status,
            NOT_MCPSUBD,
            f"what answers there does not look like mcpsubd (HTTP {status} without an "
            "mcpsub error body)",
            NOT_MCPSUBD_HINT,
            body,
        )
    code = body["errorCode"]
    message = body.get("message") or f"the daemon answered HTTP {status}"
    hint = body.get("hint")
    raise DaemonError(
        status, str(code), str(message), hint if isinstance(hint, str) else None, body
    )
