"""Run the one-shot engine for a front door: resolve the token, run, classify failures.

Both CLIs call these; only the classification mode (``compat``) and the client name differ.
The elapsed time of token resolution is taken out of the caller's budget, as in the
original (seed-behaviour §3.6).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from cli.failures import Failure, classify
from service.probe import ProbeOptions, ProbeResult, run_probe


class TraceRefused(Exception):
    """The ``--trace`` file cannot be created: a usage error, found before anything is sent."""

    def __init__(self, path: str, cause: OSError) -> None:
        super().__init__(f"--trace {path}: {cause.strerror or cause}")

    def failure(self, compat: bool) -> Failure:
        # The drop-in's parse failures are INTERNAL_ERROR, as the original's (seed §2).
        code = "INTERNAL_ERROR" if compat else "USAGE_ERROR"
        return Failure(code, "pass --trace a writable file path", str(self))


@contextlib.contextmanager
def tracing(path: str | None, program: str) -> Iterator[None]:
    """The wire transcript for the block (``--trace FILE``), or nothing without a path."""
    if not path:
        yield
        return
    from service.mcp.transports.trace import recording

    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(recording(path, program=program))
        except OSError as exc:
            raise TraceRefused(path, exc) from exc
        yield


@dataclass
class Outcome:
    result: Any = None
    failure: Failure | None = None


def _resolve_token(url: str, explicit: str | None, budget_s: float, program: str) -> str | None:
    """The explicit token wins; otherwise the login cache (when the auth module is present)."""
    if explicit:
        return explicit
    import importlib

    try:
        resolve = importlib.import_module("service.auth.resolve")
    except ImportError:  # pragma: no cover - before the auth module lands
        return None
    token: str | None
    token, source = resolve.resolve_token_sync(url, budget_s, program=program)
    if source in ("cache", "cache-refreshed"):
        sys.stderr.write(f"auth token source: {source}\n")
    return token


def run_subscribe_probe(
    *,
    url: str,
    uris: list[str],
    explicit_token: str | None,
    timeout_ms: float,
    skip_list_check: bool,
    ca_cert: str | None,
    compat: bool,
    client_name: str,
    program: str,
    phase_timeout_s: float = 60.0,
    quiet: bool = False,
    trace: str | None = None,
) -> Outcome:
    """``phase_timeout_s`` bounds each request before the listen (the drop-in's budget
    covers only the wait, so without it a trickling server held discovery for minutes).
    ``quiet``: no live status line even on a terminal (it never shows off a terminal).
    ``trace``: write the wire transcript to this file (:mod:`service.mcp.transports.trace`)."""
    from service.statusline import StatusLine

    started = time.monotonic()
    result = ProbeResult(url, uris[0], list(uris))
    with StatusLine.for_terminal(quiet) as status:
        try:
            status.phase(f"resolving the token for {url}")
            token = _resolve_token(url, explicit_token, timeout_ms / 1000, program)
            remaining = max(0.001, timeout_ms / 1000 - (time.monotonic() - started))
            options = ProbeOptions(
                url=url,
                uris=uris,
                token=token,
                timeout_s=remaining,
                skip_list_check=skip_list_check,
                exact_uri_match=compat,
                bound_all_phases=not compat,
                name_violations=not compat,
                client_name=client_name,
                ca_cert=ca_cert,
                request_timeout_s=phase_timeout_s,
                on_phase=status.phase if status.enabled else None,
            )
            with tracing(trace, program):
                return Outcome(result=asyncio.run(run_probe(options, result)))
        except TraceRefused as exc:
            return Outcome(result=result, failure=exc.failure(compat))
        except Exception as exc:
            return Outcome(result=result, failure=classify(exc, mode="subscribe", compat=compat))


def run_tool_call(
    *,
    url: str,
    tool: str,
    arguments: dict[str, Any],
    explicit_token: str | None,
    timeout_ms: float,
    ca_cert: str | None,
    compat: bool,
    client_name: str,
    program: str,
    trace: str | None = None,
) -> Outcome:
    from service.toolcall import call_tool_once

    started = time.monotonic()
    try:
        token = _resolve_token(url, explicit_token, timeout_ms / 1000, program)
        remaining = max(0.001, timeout_ms / 1000 - (time.monotonic() - started))
        with tracing(trace, program):
            result = asyncio.run(
                call_tool_once(
                    url,
                    tool,
                    arguments,
                    token=token,
                    timeout_s=remaining,
                    client_name=client_name,
                    ca_cert=ca_cert,
                )
            )
        return Outcome(result=result)
    except TraceRefused as exc:
        return Outcome(failure=exc.failure(compat))
    except Exception as exc:
        return Outcome(failure=classify(exc, mode="call", compat=compat))
