"""The systemd notify protocol (``Type=notify``), stdlib only.

One datagram per message to the AF_UNIX socket named by ``$NOTIFY_SOCKET`` (a leading ``@``
means the Linux abstract namespace); the payload is newline-separated ``KEY=VALUE`` lines:
``READY=1``, ``RELOADING=1`` (with ``MONOTONIC_USEC=``), ``STOPPING=1``, ``WATCHDOG=1``,
``STATUS=…``. The protocol is covered by systemd's interface-stability promise, so there is no
libsystemd here (modelled on gunicorn's ``gunicorn/systemd.py``).

Without ``NOTIFY_SOCKET`` (a terminal, launchd, a test) every call is a no-op. The watchdog
interval comes from ``$WATCHDOG_USEC`` (only when ``$WATCHDOG_PID`` is unset or ours); the
caller pings at half of it. :meth:`Notifier.from_env` removes the three variables from the
environment so that child processes do not talk to systemd in our name.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import MutableMapping

ENV_KEYS = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")


def monotonic_usec() -> int:
    """``CLOCK_MONOTONIC`` in microseconds, the clock systemd compares ``MONOTONIC_USEC`` with."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


class Notifier:
    """Sends notify messages; never raises (a lost notification must not stop the daemon)."""

    def __init__(self, address: str | None, watchdog_usec: int | None = None) -> None:
        self.address = address or None
        self.watchdog_usec = watchdog_usec if watchdog_usec and watchdog_usec > 0 else None
        self.last_error: str | None = None

    @classmethod
    def from_env(
        cls, env: MutableMapping[str, str] | None = None, *, unset: bool = True
    ) -> Notifier:
        environ: MutableMapping[str, str] = os.environ if env is None else env
        address = environ.get("NOTIFY_SOCKET") or None
        watchdog: int | None = None
        pid = environ.get("WATCHDOG_PID", "")
        if not pid or pid == str(os.getpid()):
            try:
                watchdog = int(environ.get("WATCHDOG_USEC", ""))
            except ValueError:
                watchdog = None
        if unset:
            for key in ENV_KEYS:
                environ.pop(key, None)
        return cls(address, watchdog)

    @property
    def enabled(self) -> bool:
        return self.address is not None

    @property
    def watchdog_interval_s(self) -> float | None:
        """Seconds between ``WATCHDOG=1`` pings: half of ``WATCHDOG_USEC``, or None."""
        if self.address is None or self.watchdog_usec is None:
            return None
        return self.watchdog_usec / 2 / 1_000_000

    def notify(self, *lines: str) -> bool:
        """Send ``lines`` as one datagram; True when it was sent."""
        if self.address is None or not lines:
            return False
        address = self.address
        if address.startswith("@"):
            address = "\0" + address[1:]
        payload = "\n".join(lines).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
                sock.connect(address)
                sock.sendall(payload)
        except OSError as exc:
            self.last_error = str(exc)
            return False
        return True

    def ready(self, status: str | None = None) -> bool:
        return self.notify("READY=1", *([f"STATUS={status}"] if status else []))

    def reloading(self) -> bool:
        return self.notify("RELOADING=1", f"MONOTONIC_USEC={monotonic_usec()}")

    def stopping(self) -> bool:
        return self.notify("STOPPING=1")

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def status(self, text: str) -> bool:
        return self.notify(f"STATUS={text}")
