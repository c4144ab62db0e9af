"""On a real daemon: JSON-only log, redacted credentials, escaped output."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import textwrap

from tests.support.cli import cli_env
from tests.support.daemon import Daemon
from tests.support.poll import until

SECRET = "hunter2-not-for-logs"


def _wait_for(predicate, timeout: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    until("the condition", predicate, timeout)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_credentials_and_control_characters_never_reach_logs_or_terminal(daemon_factory) -> None:
    d: Daemon = daemon_factory()
    url = f"http://user:{SECRET}@127.0.0.1:{_closed_port()}/mcp"
    uri = "test://invoice\u202etxt.exe"
    created = d.api("POST", "/v1/subscriptions", json={"url": url, "uri": uri})
    assert created.status_code == 201, created.text
    sub_id = created.json()["id"]
    _wait_for(lambda: d.api("GET", f"/v1/subscriptions/{sub_id}").json()["link"]["lastError"])
    # uvicorn's own warning for garbage on the socket must be a JSON line too.
    with socket.socket(socket.AF_UNIX) as raw:
        raw.connect(str(d.socket_path))
        raw.sendall(b"NOT HTTP\x00\r\n\r\n")
        raw.recv(1024)
    for args in (("list",), ("status",), ("show", str(sub_id)), ("events",)):
        result = d.ctl(*args)
        assert result.code == 0, result
        assert SECRET not in result.stdout, args
        assert "\u202e" not in result.stdout and "\x1b" not in result.stdout, args
    listed = d.ctl("list").stdout
    assert "***@127.0.0.1" in listed and "test://invoice\\u202etxt.exe" in listed
    # The API shows the URL without its credentials (stored apart, used on the wire only).
    shown = d.api("GET", "/v1/subscriptions").json()["subscriptions"][0]["serverUrl"]
    assert shown == url.replace(f"user:{SECRET}@", "***@")
    assert d.stop() == 0
    lines = [line for line in d.lines if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all(isinstance(e, dict) and "event" in e and "level" in e for e in entries)
    assert not any(SECRET in line for line in lines)
    assert any(e.get("logger", "").startswith("uvicorn") for e in entries), lines


SCRIPT = textwrap.dedent(
    """
    import asyncio, gc, logging, threading, warnings
    import structlog
    from service.daemon.logs import configure_logging

    configure_logging("info", "json")
    log = structlog.get_logger("t")
    try:
        1 / 0
    except ZeroDivisionError:
        log.exception("own exception", url="http://u:SECRET@h/x")
    logging.getLogger("uvicorn.error").error("Exception in ASGI application", exc_info=(
        ValueError, ValueError("boom"), None))
    warnings.warn("a warning")
    t = threading.Thread(target=lambda: 1 / 0, name="worker"); t.start(); t.join()
    class Bad:
        def __del__(self):
            raise RuntimeError("in del")
    Bad(); gc.collect()

    async def forever():
        await asyncio.Event().wait()

    loop = asyncio.new_event_loop()
    task = loop.create_task(forever())
    loop.run_until_complete(asyncio.sleep(0))
    loop.close()
    del task; gc.collect()
    for _ in range(5000):
        logging.getLogger("asyncio").error("socket.accept() out of system resource",
            exc_info=(OSError, OSError(24, "Too many open files"), None))
        log.error("accept failed", error="[Errno 24] Too many open files")
    """
)


def test_every_log_source_renders_one_json_line_with_its_stack(tmp_path) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    entries = [json.loads(line) for line in proc.stderr.splitlines()]
    by_event = {e["event"]: e for e in entries}
    own = by_event["own exception"]
    assert "Traceback" in own["exception"] and "ZeroDivisionError" in own["exception"]
    assert own["url"] == "http://***@h/x" and "SECRET" not in proc.stderr
    assert "ValueError: boom" in by_event["Exception in ASGI application"]["exception"]
    assert any("a warning" in e["event"] for e in entries)
    assert any(
        "worker" in e["event"] and "ZeroDivisionError" in e.get("exception", "") for e in entries
    )
    assert any("Task was destroyed" in e["event"] for e in entries), entries
    # 5,000 identical errors of each kind: one line each (the rest within the window dropped).
    assert sum("out of system resource" in e["event"] for e in entries) == 1
    assert sum(e["event"] == "accept failed" for e in entries) == 1
    assert len(entries) < 20
