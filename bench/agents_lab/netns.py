"""A private network namespace with only loopback: where every agent CLI of the lab runs.

The agent CLIs are real programs that would phone home (telemetry, updates, feature flags,
their vendors' model endpoints). The lab runs each one, and everything it talks to (the
scripted model, the lab server, ``mcpsubd``), inside a fresh network namespace
(``unshare -n``) whose only interface is ``lo``: no packet can leave the machine, whatever a
CLI tries. :func:`reexec_inside` re-runs the current command there; :func:`require_private`
is called before any CLI starts and refuses to start one anywhere else.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys

MARK = "MCPSUB_AGENTS_LAB_NETNS"


class NetnsError(RuntimeError):
    """No private namespace could be made (no ``unshare``, not root, no ``ip``)."""


def interfaces() -> list[str]:
    """The network interfaces of this process's namespace (asked through the kernel, not
    /sys, which shows the namespace that mounted it)."""
    return sorted(name for _, name in socket.if_nameindex())


def is_private() -> bool:
    return interfaces() == ["lo"]


def require_private() -> None:
    """Refuse to go on outside a loopback-only namespace (a CLI must never reach a network)."""
    names = interfaces()
    if names != ["lo"]:
        raise NetnsError(f"not in a loopback-only network namespace (interfaces: {names})")
    up = subprocess.run(
        ["ip", "-o", "link", "show", "lo"], capture_output=True, text=True, check=False
    )
    if "UP" not in up.stdout.split("mtu")[0]:
        raise NetnsError("loopback is down in this namespace")


def missing() -> str | None:
    """Why no private namespace can be made here, or None."""
    if shutil.which("unshare") is None:
        return "`unshare` (util-linux) is not installed"
    if shutil.which("ip") is None:
        return "`ip` (iproute2) is not installed"
    probe = subprocess.run(
        ["unshare", "-n", "true"], capture_output=True, text=True, check=False, timeout=30
    )
    if probe.returncode != 0:
        return f"`unshare -n` failed: {probe.stderr.strip() or probe.returncode}"
    return None


def wrap(argv: list[str]) -> list[str]:
    """``argv`` run in a new loopback-only namespace (``lo`` brought up first)."""
    script = 'ip link set lo up && exec "$@"'
    return ["unshare", "-n", "sh", "-c", script, "sh", *argv]


def reexec_inside() -> None:
    """Re-run this Python command inside a private namespace, unless already in one."""
    if os.environ.get(MARK) == "1" and is_private():
        return
    reason = missing()
    if reason:
        raise NetnsError(reason)
    env = {**os.environ, MARK: "1"}
    argv = wrap([sys.executable, *sys.orig_argv[1:]])
    os.execvpe(argv[0], argv, env)
