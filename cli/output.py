"""Pure formatting of probe and call results: result in, exact text out.

The line and JSON shapes are a contract with scripts written against the TypeScript CLI
(seed-behaviour §3.1-§3.3, §3.7): same keys, same order, same spellings, including the two
spellings of the action key (``recommended_next_action`` in a probe result,
``recommended-next-action`` in a failure). Golden tests pin every shape. One departure:
credentials in the server URL (``user:password@``, ``?token=…``) are shown as ``***``
(``service.safetext.redact_urls``); the seed printed them.
"""

from __future__ import annotations

import json

from service.proberesult import ProbeResult
from service.safetext import redact_urls

TYPE_CHECKING = False  # typing costs more than socket+json: not imported at run time
if TYPE_CHECKING:
    from typing import Any


def json_text(value: Any) -> str:
    """``JSON.stringify`` without indentation: compact, non-ASCII kept."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def probe_json(result: ProbeResult, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    data: dict[str, Any] = {
        "route": result.route,
        "serverUrl": redact_urls(result.server_url),
        "resourceUri": result.resource_uri,
        "listenAcknowledged": result.listen_acknowledged,
        "honoredUris": list(result.honored_uris),
        "notificationReceived": result.notification_received,
        "notificationCount": result.notification_count,
        "closeReason": result.close_reason,
        "errorCode": result.error_code,
        "initialText": result.initial_text or None,
        "finalText": result.final_text or None,
        "recommendedNextAction": result.recommended_next_action,
    }
    if extra:
        data.update(extra)
    return data


def probe_lines(result: ProbeResult) -> str:
    lines = [
        f"capabilities {json_text(result.capabilities)}",
        f"resource-found {json_text(result.resource_found)}",
        f"resource-uri {result.resource_uri}",
        f"server-url {redact_urls(result.server_url)}",
    ]
    if result.initial_text:
        lines += ["initial", result.initial_text]
    lines += [
        f"route {result.route}",
        f"listen-acknowledged {json_text(result.listen_acknowledged)}",
        f"honored-uris {json_text(result.honored_uris)}",
        f"notification-received {json_text(result.notification_received)}",
        f"notification-count {result.notification_count}",
        f"close-reason {result.close_reason or 'null'}",
    ]
    action = result.recommended_next_action
    if action is not None:
        lines.append(f"recommended_next_action {action}")
    lines.append(f"error-code {result.error_code or 'null'}")
    if result.notification_uri:
        lines.append(f"notification {result.notification_uri}")
    if result.final_text:
        lines += ["final", result.final_text]
    summary = f"phase-summary route={result.route} url={redact_urls(result.server_url)} uri={result.resource_uri}"
    if result.error_code:
        summary += f" error-code={result.error_code}"
    lines.append(summary)
    return "\n".join(lines)


def failure_json(
    code: str,
    hint: str | None,
    url: str | None,
    uri: str | None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "route": "failed",
        "serverUrl": None if url is None else redact_urls(url),
        "resourceUri": uri,
        "listenAcknowledged": False,
        "honoredUris": [],
        "notificationReceived": False,
        "notificationCount": 0,
        "closeReason": None,
        "errorCode": code,
        "initialText": None,
        "finalText": None,
        "recommendedNextAction": hint,
    }
    if extra:
        data.update(extra)
    return data


def failure_lines(code: str, hint: str | None, url: str | None, uri: str | None) -> str:
    if code == "SERVER_URL_UNKNOWN":
        return f"error-code {code}\nphase-summary route=failed url=unknown error-code={code}"
    return "\n".join(
        [
            f"error-code {code}",
            f"recommended-next-action {hint or 'null'}",
            f"phase-summary route=failed url={redact_urls(url or 'unknown')} uri={uri or ''} error-code={code}",
        ]
    )


def call_json(
    url: str | None,
    tool: str | None,
    is_error: bool,
    code: str | None,
    content: Any,
    hint: str | None,
) -> dict[str, Any]:
    return {
        "serverUrl": None if url is None else redact_urls(url),
        "tool": tool,
        "isError": is_error,
        "errorCode": code,
        "content": content,
        "recommendedNextAction": hint,
    }


def call_lines(
    url: str | None,
    tool: str | None,
    is_error: bool,
    code: str | None,
    content: Any,
    hint: str | None,
) -> str:
    return "\n".join(
        [
            f"server-url {redact_urls(url or 'unknown')}",
            f"tool {tool or 'unknown'}",
            f"is-error {json_text(is_error)}",
            f"error-code {code or 'null'}",
            f"recommended-next-action {hint or 'null'}",
            "content",
            json_text(content) if content is not None else "null",
        ]
    )
