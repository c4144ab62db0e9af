"""The scripted model: one small HTTP server that plays a model for real agent CLIs.

It speaks the three wire formats the pinned CLIs use, each with server-sent events:

* Anthropic Messages (``POST /v1/messages``; Claude Code with ``ANTHROPIC_BASE_URL``);
* OpenAI Responses (``POST /v1/responses``; Codex through a ``model_providers`` entry with
  ``wire_api = "responses"``);
* Gemini ``streamGenerateContent`` / ``generateContent`` (Gemini CLI with
  ``GOOGLE_GEMINI_BASE_URL``).

A *script* is a list of steps, each ``{"tool": NAME, "args": {...}}`` (call that tool) or
``{"say": TEXT}`` (answer and end the turn). Which step a request gets is read from the
request itself: the number of tool results it carries. So a retried request, a resumed
session or a side request (a title, a token count) never moves the script along; a request
without tools is a side request and gets a short plain answer. ``args`` values may hold
``{cursor}``: the last ``cursor`` seen in the request's tool results (so a script can pass a
``wait_for_change`` cursor back as ``after``).

Every request is logged (method, path, time, body) so a check can grep for what reached the
model. Bodies are bounded (``MAX_BODY``): a larger one is answered 413 and logged as such.
Only ever bound to 127.0.0.1.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 16 * 1024 * 1024
"""Largest request body read (the CLIs send their whole conversation each turn)."""
MAX_LOG = 2000
"""Requests kept in the log; older ones are dropped (a run makes a few dozen)."""

_CURSOR = re.compile(r'\\?"cursor\\?"\s*:\s*\\?"?(\d+)')
_CURSOR_TEXT = re.compile(r"\bpass after=(\d+)")
_EVENT_ID = re.compile(r'\\?"eventId\\?"\s*:\s*(\d+)|\bevent (\d+)\b')
"""A ``wait_for_change`` cursor (an event id) in the JSON result or its text rendering."""


@dataclass
class Logged:
    """One request as it reached the model."""

    seq: int
    t: float
    method: str
    path: str
    wire: str
    main: bool
    step: int | None
    body: dict[str, Any]
    raw: str = field(repr=False, default="")

    def text(self) -> str:
        return self.raw


@dataclass
class Script:
    steps: list[dict[str, Any]]
    after_step: Callable[[int], None] | None = None
    """Called (on the server thread) just after step N's answer was sent."""
    before_main: Callable[[Logged], None] | None = None
    """Called (on the server thread) with each main request once logged, before it is
    answered: a scenario may hold the answer back there (a model that hangs)."""


class ScriptedModel:
    """The server and its log; ``start()`` binds 127.0.0.1 on a free port."""

    def __init__(self, script: Script | None = None) -> None:
        self.script = script or Script([{"say": "ok"}])
        self.log: list[Logged] = []
        self._lock = threading.Condition()
        self._seq = 0
        self._server: ThreadingHTTPServer | None = None

    # ---- lifecycle ----------------------------------------------------------------------
    def start(self) -> ScriptedModel:
        model = self

        class Handler(_Handler):
            owner = model

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # ---- the log ------------------------------------------------------------------------
    def record(self, entry: Logged) -> None:
        with self._lock:
            self.log.append(entry)
            del self.log[:-MAX_LOG]
            self._lock.notify_all()

    def next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def main_requests(self) -> list[Logged]:
        with self._lock:
            return [e for e in self.log if e.main]

    def wait_for(self, check: Callable[[Logged], bool], timeout: float) -> Logged | None:
        """The first logged request for which ``check`` holds, waiting up to ``timeout``."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                for entry in self.log:
                    if check(entry):
                        return entry
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                self._lock.wait(left)

    def step_for(self, tool_results: int) -> tuple[int, dict[str, Any]]:
        steps = self.script.steps
        index = min(tool_results, len(steps) - 1)
        return index, steps[index]


def _resolve(args: Any, cursor: str | None) -> Any:
    if isinstance(args, dict):
        resolved = {k: _resolve(v, cursor) for k, v in args.items()}
        return {k: v for k, v in resolved.items() if v is not None}
    if args == "{cursor}":
        # an event id is an integer in the face's schema (Gemini CLI validates it)
        return int(cursor) if cursor is not None and cursor.isdigit() else cursor
    return args


def last_cursor(raw: str) -> str | None:
    """The last ``cursor`` a tool result carried (JSON or text rendering), if any."""
    found = _CURSOR.findall(raw) or _CURSOR_TEXT.findall(raw)
    if found:
        return str(found[-1])
    ids = [a or b for a, b in _EVENT_ID.findall(raw)]
    return ids[-1] if ids else None


# ---- the three wire formats ------------------------------------------------------------------
def _sse(event: str | None, data: dict[str, Any]) -> bytes:
    head = f"event: {event}\n" if event else ""
    return (head + "data: " + json.dumps(data) + "\n\n").encode()


MAX_RETRIES = 60
"""Waits for a missing MCP tool before the script calls it anyway (the CLI then says why)."""
RETRY = "retry_"
"""Id prefix of a call the model makes only to let time pass (see :func:`not_ready`); its
result does not move the script along."""


def not_ready(step: dict[str, Any], wire: str, body: dict[str, Any], raw: str) -> bool:
    """The step calls an MCP tool the CLI has not offered yet: its MCP server is still
    starting (Codex and Claude Code start them without blocking the first request). A model
    cannot call such a tool; the scripted one waits a moment in the shell and asks again."""
    if "tool" not in step or step.get("exact") or raw.count(RETRY) > MAX_RETRIES:
        return False
    tool = step["tool"]
    if wire == "anthropic":
        return f"mcp__mcpsub__{tool}" not in raw and f"mcpsub_{tool}" not in raw
    return responses_tool(body, tool) == ("mcp__mcpsub", tool) and not any(
        spec.get("type") == "namespace" for spec in body.get("tools") or []
    )


RETRY_STEP: dict[str, dict[str, Any]] = {
    "anthropic": {"tool": "Bash", "exact": "Bash", "args": {"command": "sleep 0.3"}, "retry": True},
    "responses": {
        "tool": "exec_command",
        "exact": "exec_command",
        "args": {"cmd": "sleep 0.3"},
        "retry": True,
    },
}


def anthropic_tool_results(body: dict[str, Any]) -> int:
    count = 0
    for message in body.get("messages") or []:
        content = message.get("content")
        if isinstance(content, list):
            count += sum(
                1
                for b in content
                if isinstance(b, dict)
                and b.get("type") == "tool_result"
                and not str(b.get("tool_use_id", "")).startswith(RETRY)
            )
    return count


def anthropic_tool_name(body: dict[str, Any], tool: str) -> str:
    """The name the CLI gave an MCP tool (Claude Code: ``mcp__SERVER__TOOL``, often deferred:
    named in a reminder, not in ``tools``; a direct call works either way)."""
    for spec in body.get("tools") or []:
        name = str(spec.get("name", ""))
        if name == tool or name.endswith("__" + tool) or name == "mcpsub_" + tool:
            return name
    return tool if tool.startswith("mcp__") else f"mcp__mcpsub__{tool}"


def anthropic_answer(
    body: dict[str, Any], step: dict[str, Any], cursor: str | None
) -> Iterator[bytes]:
    model = body.get("model", "scripted")
    start = {
        "type": "message_start",
        "message": {
            "id": f"msg_{time.monotonic_ns()}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 1},
        },
    }
    yield _sse("message_start", start)
    if "tool" in step:
        block = {
            "type": "tool_use",
            "id": f"{RETRY if step.get('retry') else 'toolu_'}{time.monotonic_ns()}",
            "name": step.get("exact") or anthropic_tool_name(body, step["tool"]),
            "input": {},
        }
        yield _sse(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        )
        partial = json.dumps(_resolve(step.get("args", {}), cursor))
        delta = {"type": "input_json_delta", "partial_json": partial}
        yield _sse(
            "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        )
        stop = "tool_use"
    else:
        block = {"type": "text", "text": ""}
        yield _sse(
            "content_block_start",
            {"type": "content_block_start", "index": 0, "content_block": block},
        )
        delta = {"type": "text_delta", "text": step.get("say", "ok")}
        yield _sse(
            "content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}
        )
        stop = "end_turn"
    yield _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
    yield _sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": 5},
        },
    )
    yield _sse("message_stop", {"type": "message_stop"})


def anthropic_plain(body: dict[str, Any], text: str) -> dict[str, Any]:
    return {
        "id": f"msg_{time.monotonic_ns()}",
        "type": "message",
        "role": "assistant",
        "model": body.get("model", "scripted"),
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 10, "output_tokens": 1},
    }


def responses_tool_results(body: dict[str, Any]) -> int:
    items = body.get("input")
    if not isinstance(items, list):
        return 0
    return sum(
        1
        for i in items
        if isinstance(i, dict)
        and i.get("type") == "function_call_output"
        and not str(i.get("call_id", "")).startswith(RETRY)
    )


def responses_tool(body: dict[str, Any], tool: str) -> tuple[str | None, str]:
    """(namespace, name) of an MCP tool: Codex sends MCP tools as ``{"type": "namespace",
    "name": "mcp__SERVER", "tools": [...]}``; a call names both."""
    for spec in body.get("tools") or []:
        if spec.get("type") == "namespace":
            for inner in spec.get("tools") or []:
                if inner.get("name") == tool:
                    return str(spec.get("name")), tool
        elif spec.get("name") == tool:
            return None, tool
    return "mcp__mcpsub", tool


def responses_answer(
    body: dict[str, Any], step: dict[str, Any], cursor: str | None
) -> Iterator[bytes]:
    rid = f"resp_{time.monotonic_ns()}"
    yield _sse("response.created", {"type": "response.created", "response": {"id": rid}})
    if "tool" in step:
        namespace, name = responses_tool(body, step["tool"])
        item: dict[str, Any] = {
            "type": "function_call",
            "id": f"fc_{time.monotonic_ns()}",
            "call_id": f"{RETRY if step.get('retry') else 'call_'}{time.monotonic_ns()}",
            "name": name,
            "arguments": json.dumps(_resolve(step.get("args", {}), cursor)),
        }
        if namespace:
            item["namespace"] = namespace
    else:
        item = {
            "type": "message",
            "role": "assistant",
            "id": f"msg_{time.monotonic_ns()}",
            "content": [{"type": "output_text", "text": step.get("say", "ok"), "annotations": []}],
        }
    yield _sse(
        "response.output_item.added",
        {"type": "response.output_item.added", "output_index": 0, "item": item},
    )
    yield _sse(
        "response.output_item.done",
        {"type": "response.output_item.done", "output_index": 0, "item": item},
    )
    usage = {
        "input_tokens": 10,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 5,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 15,
    }
    yield _sse(
        "response.completed",
        {"type": "response.completed", "response": {"id": rid, "usage": usage}},
    )


def gemini_tool_results(body: dict[str, Any]) -> int:
    count = 0
    for content in body.get("contents") or []:
        for part in content.get("parts") or []:
            if isinstance(part, dict) and "functionResponse" in part:
                count += 1
    return count


def gemini_has_tools(body: dict[str, Any]) -> bool:
    return any(
        t.get("functionDeclarations") for t in body.get("tools") or [] if isinstance(t, dict)
    )


def gemini_tool_name(body: dict[str, Any], tool: str) -> str:
    for group in body.get("tools") or []:
        for decl in group.get("functionDeclarations") or []:
            name = str(decl.get("name", ""))
            if name == tool or name.endswith("__" + tool) or name.endswith("_" + tool):
                return name
    return tool


def gemini_answer(body: dict[str, Any], step: dict[str, Any], cursor: str | None) -> dict[str, Any]:
    if "tool" in step:
        part: dict[str, Any] = {
            "functionCall": {
                "name": gemini_tool_name(body, step["tool"]),
                "args": _resolve(step.get("args", {}), cursor),
            }
        }
    else:
        part = {"text": step.get("say", "ok")}
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [part]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": "scripted",
    }


def gemini_side_answer(body: dict[str, Any]) -> dict[str, Any]:
    """A side request (no tools): Gemini CLI asks for JSON (who speaks next, a routing
    decision) with a response schema; an object that says 'the user' satisfies those."""
    config = body.get("generationConfig") or {}
    if (
        config.get("responseMimeType") == "application/json"
        or config.get("responseJsonSchema")
        or config.get("responseSchema")
    ):
        text = json.dumps(
            {"next_speaker": "user", "reasoning": "scripted", "model_choice": "flash"}
        )
    else:
        text = "ok"
    return gemini_answer(body, {"say": text}, None)


# ---- HTTP ------------------------------------------------------------------------------------
class _Handler(BaseHTTPRequestHandler):
    owner: ScriptedModel
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _read(self) -> tuple[str, dict[str, Any]] | None:
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._json(413, {"error": {"message": "body too large"}})
            return None
        raw = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {}
        return raw, body if isinstance(body, dict) else {}

    def _json(self, status: int, body: Any) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _stream(self, chunks: Iterator[bytes]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(chunk)
            self.wfile.flush()
        self.close_connection = True

    def do_GET(self) -> None:
        owner = self.owner
        owner.record(
            Logged(owner.next_seq(), time.time(), "GET", self.path, "other", False, None, {})
        )
        if self.path.split("?")[0].endswith("/models"):
            self._json(200, {"object": "list", "data": [], "models": []})
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        t = time.time()
        got = self._read()
        if got is None:
            return
        raw, body = got
        path = self.path.split("?")[0]
        owner = self.owner
        seq = owner.next_seq()
        cursor = last_cursor(raw)
        if path.endswith("/messages/count_tokens"):
            owner.record(Logged(seq, t, "POST", self.path, "anthropic", False, None, body, raw))
            self._json(200, {"input_tokens": 10})
        elif path.endswith("/messages"):
            main = bool(body.get("tools"))
            step_index: int | None = None
            if main:
                step_index, step = owner.step_for(anthropic_tool_results(body))
            logged = Logged(seq, t, "POST", self.path, "anthropic", main, step_index, body, raw)
            owner.record(logged)
            self._before(logged)
            if not main:
                step = {"say": "ok"}
            elif not_ready(step, "anthropic", body, raw):
                step, step_index = RETRY_STEP["anthropic"], None
            if body.get("stream"):
                self._stream(anthropic_answer(body, step, cursor))
            else:
                self._json(200, anthropic_plain(body, step.get("say", "ok")))
            self._after(step_index)
        elif path.endswith("/responses"):
            main = bool(body.get("tools"))
            step_index, step = (
                owner.step_for(responses_tool_results(body)) if main else (None, {"say": "ok"})
            )
            logged = Logged(seq, t, "POST", self.path, "responses", main, step_index, body, raw)
            owner.record(logged)
            self._before(logged)
            if main and not_ready(step, "responses", body, raw):
                step, step_index = RETRY_STEP["responses"], None
            self._stream(responses_answer(body, step, cursor))
            self._after(step_index)
        elif ":streamGenerateContent" in path or ":generateContent" in path:
            main = gemini_has_tools(body)
            step_index = None
            if main:
                step_index, step = owner.step_for(gemini_tool_results(body))
                answer = gemini_answer(body, step, cursor)
            else:
                answer = gemini_side_answer(body)
            logged = Logged(seq, t, "POST", self.path, "gemini", main, step_index, body, raw)
            owner.record(logged)
            self._before(logged)
            if ":streamGenerateContent" in path:
                self._stream(iter([_sse(None, answer)]))
            else:
                self._json(200, answer)
            self._after(step_index)
        elif ":countTokens" in path:
            owner.record(Logged(seq, t, "POST", self.path, "gemini", False, None, body, raw))
            self._json(200, {"totalTokens": 10})
        else:
            owner.record(Logged(seq, t, "POST", self.path, "other", False, None, body, raw))
            self._json(404, {"error": {"message": f"scripted model: no route {path}"}})

    def _before(self, entry: Logged) -> None:
        hook = self.owner.script.before_main
        if entry.main and hook is not None:
            hook(entry)

    def _after(self, step_index: int | None) -> None:
        hook = self.owner.script.after_step
        if step_index is not None and hook is not None:
            hook(step_index)
