"""A small webhook receiver for trying mcpsub out: ``python -m cli.receiver --port 8090
--secret whsec_…`` answers every POST with 204 and prints one line per delivery, with whether
its Standard Webhooks signature verified (``make run`` and README's walkthrough use it).

Not a production endpoint: it keeps nothing, and answers 204 even to a bad signature (the
line says ``BAD SIGNATURE``), so that a walkthrough's deliveries never pile up as failures.
docs/webhooks.md shows how a real receiver verifies and refuses.
"""

from __future__ import annotations

import argparse
import json
import queue
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MAX_BODY = 16 * 1024 * 1024
"""A delivery carries the revision's content; anything larger is refused (413) unread."""


class Receiver:
    """A webhook endpoint on 127.0.0.1 that checks the signature of every request and queues
    what it received (the payload, plus ``_verified`` and ``_webhook_id``)."""

    def __init__(self, port: int = 0, secret: str | None = None) -> None:
        self.secret = secret
        self.deliveries: queue.Queue[dict[str, Any]] = queue.Queue()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                from service.webhooks.signing import ID_HEADER, verify_headers

                length = int(self.headers.get("content-length") or "0")
                if not 0 <= length <= MAX_BODY:
                    self.send_response(413)
                    self.end_headers()
                    return
                body = self.rfile.read(length)
                ok = receiver.secret is not None and verify_headers(
                    receiver.secret, {k.lower(): v for k, v in self.headers.items()}, body
                )
                self.send_response(204)
                self.end_headers()
                try:
                    payload = json.loads(body) if ok else {}
                except ValueError:
                    payload = {}
                payload["_verified"] = ok
                payload["_webhook_id"] = self.headers.get(ID_HEADER)
                receiver.deliveries.put(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = int(self.server.server_address[1])
        self.url = f"http://127.0.0.1:{self.port}/hooks/mcpsub"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def text_of(payload: dict[str, Any]) -> str:
    for content in payload.get("contents") or []:
        if isinstance(content, dict) and isinstance(content.get("text"), str):
            return str(content["text"])
    return ""


def delivery_line(payload: dict[str, Any]) -> str:
    """One delivery as a line (server text escaped as every CLI escapes it)."""
    from service.safetext import terminal_safe

    mark = "verified" if payload["_verified"] else "BAD SIGNATURE"
    text = terminal_safe(text_of(payload).replace("\n", " | "))
    uri = terminal_safe(str(payload.get("uri", "")))
    head = f"  [{mark}] {payload['_webhook_id']}"
    return f"{head} {uri} revision {payload.get('revision')}: {text}" if uri else head


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m cli.receiver", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--port", type=int, default=8090, help="port on 127.0.0.1 (default 8090)")
    parser.add_argument("--secret", help="the target's whsec_… secret, to verify signatures")
    args = parser.parse_args(argv)
    receiver = Receiver(args.port, args.secret)
    print(f"webhook receiver: {receiver.url}", flush=True)
    try:
        while True:
            print(delivery_line(receiver.deliveries.get()), flush=True)
    except KeyboardInterrupt:
        return 0
    finally:
        receiver.stop()


if __name__ == "__main__":
    raise SystemExit(main())
