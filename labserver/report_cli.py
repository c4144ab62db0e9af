"""``mcp-lab-server report --url …``: print a running lab's per-client report.

Exit codes: 0 printed, 1 the lab could not be reached or did not answer with a report,
2 usage. ``--url`` takes the MCP endpoint a person already has at hand
(``http://127.0.0.1:8089/mcp``) or the bare base URL; either way the report is fetched
from ``<base>/lab/report.md`` (``/lab/report`` with ``--json``).
"""

from __future__ import annotations

import argparse
import sys
from urllib.parse import urlsplit, urlunsplit

import httpx

DEFAULT_URL = "http://127.0.0.1:8089/mcp"
TIMEOUT_SECONDS = 10.0


def report_url(url: str, as_json: bool) -> str:
    """``<scheme>://<host>/lab/report(.md)`` for an MCP endpoint or base URL."""
    parts = urlsplit(url if "://" in url else f"http://{url}")
    path = "/lab/report" if as_json else "/lab/report.md"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="mcp-lab-server report",
        description="Print the lab's per-client checklist (GET /lab/report.md).",
    )
    parser.add_argument("--url", default=DEFAULT_URL, help=f"lab MCP URL (default {DEFAULT_URL})")
    parser.add_argument("--json", action="store_true", help="print GET /lab/report (JSON)")
    args = parser.parse_args(argv)
    target = report_url(args.url, args.json)
    try:
        response = httpx.get(target, timeout=TIMEOUT_SECONDS)
    except httpx.HTTPError as exc:
        print(f"mcp-lab-server report: cannot reach {target}: {exc}", file=sys.stderr)
        print("hint: start the lab (mcp-lab-server) and pass its URL with --url", file=sys.stderr)
        return 1
    if response.status_code != 200:
        print(
            f"mcp-lab-server report: {target} answered HTTP {response.status_code}",
            file=sys.stderr,
        )
        print("hint: is this URL a lab server (mcp-lab-server)?", file=sys.stderr)
        return 1
    sys.stdout.write(response.text if response.text.endswith("\n") else response.text + "\n")
    return 0
