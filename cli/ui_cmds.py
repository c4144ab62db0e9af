"""``mcpsubctl ui``: print (and with ``--open`` open) a one-time login link to the daemon's
web console (docs/console.md).

On a loopback TCP daemon the link is minted on its listener (``POST /v1/console/login-link``);
a daemon on its unix socket is first asked for a loopback TCP listener a browser can reach
(``POST /v1/console/listener``). The link logs a browser in once, within two minutes.
``--revoke-all`` ends every console session instead (``DELETE /v1/console/sessions``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_ui_command(sub: Any, commands: dict[str, Any]) -> None:
    from cli.parsing import sub_parser

    p = sub_parser(
        sub,
        "ui",
        help="daemon: print a one-time login link to the web console (--open: open it)",
        description="daemon: print a one-time login link to the daemon's web console; it "
        "logs a browser in once, within two minutes. A daemon on its unix socket opens a "
        "loopback TCP listener for the browser first.",
    )
    p.add_argument(
        "--api",
        default=None,
        help="daemon API: unix:///path/api.sock or http://127.0.0.1:PORT (env MCPSUB_API)",
    )
    p.add_argument("--open", action="store_true", help="also open the link in the browser")
    p.add_argument("--json", action="store_true", help='print {"url", "expiresInSeconds"}')
    p.add_argument(
        "--revoke-all",
        action="store_true",
        help="end every console session (each browser must log in again); prints no link",
    )
    commands["ui"] = cmd_ui


def cmd_ui(args: argparse.Namespace) -> int:
    from cli.apicmd import run

    def body(client: Any) -> int:
        if args.revoke_all:
            _, answer = client.request("DELETE", "/v1/console/sessions")
            revoked = int(answer["revoked"])
            if args.json:
                import json

                sys.stdout.write(json.dumps({"revoked": revoked}) + "\n")
            else:
                plural = "" if revoked == 1 else "s"
                sys.stdout.write(f"ended {revoked} console session{plural}\n")
            sys.stdout.flush()
            return 0
        if client.endpoint.socket:
            _, answer = client.request("POST", "/v1/console/listener")
            base = str(answer["url"])
        else:
            _, answer = client.request("POST", "/v1/console/login-link")
            base = client.endpoint.base_url
        url = base.rstrip("/") + str(answer["path"])
        if args.json:
            import json

            sys.stdout.write(
                json.dumps({"url": url, "expiresInSeconds": answer["expiresInSeconds"]}) + "\n"
            )
        else:
            sys.stdout.write(url + "\n")
        sys.stdout.flush()
        if args.open:
            import webbrowser

            if not webbrowser.open(url):
                sys.stderr.write("mcpsubctl ui: no browser to open; open the link yourself\n")
        return 0

    return run(args, body)
