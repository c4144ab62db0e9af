"""``mcpsubctl``: the product's own CLI.

This first part holds the one-shot commands that need no daemon: ``probe`` (the same engine
and output schema as ``mcp-resource-subscriber``, with several URIs, ``--follow`` and exit
codes per failure class) and ``call``. Exit codes are listed in :mod:`cli.failures` and in
``docs/cli.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from cli.parsing import HelpFormatter, add_quiet, sub_parser
from service._version import __version__

TYPE_CHECKING = False  # typing costs more than socket+json: not imported at run time
if TYPE_CHECKING:
    from typing import Any

DESCRIPTION = (
    "mcpsub control: probe and call MCP 2026-07-28 servers, and drive the mcpsubd daemon "
    "(subscriptions, events, waits, webhooks, the service unit)."
)
GLOBAL_FLAGS_NOTE = """\
global flags (before or after the command): --api API, --json, --lines, --quiet"""
EXIT_CODE_TABLE = """\
exit codes: 0 ok, 1 tool error, 2 usage, 3 auth, 4 protocol, 5 network, 6 timeout,
            7 resource not found, 8 subscription not honored/refused,
            9 subscription disconnected/closed, 10 daemon unavailable,
            11 --api is not mcpsubd, 12 API socket not trusted, 70 internal,
            130 interrupted (Ctrl-C; the --follow modes exit 0)"""


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors in our JSON/line shape with exit code 2."""

    def error(self, message: str) -> Any:
        from cli.exitcodes import EXIT_USAGE
        from cli.human import machine_lines_wanted

        as_json = "--json" in sys.argv
        if as_json:
            sys.stdout.write(json.dumps({"errorCode": "USAGE_ERROR", "message": message}) + "\n")
        elif machine_lines_wanted(False, "--lines" in sys.argv):
            sys.stdout.write(f"error-code USAGE_ERROR\nmessage {message}\n")
        # `mcpsubctl`, `mcpsubctl webhook`: the commands that can follow, not only "the
        # following arguments are required"; stdout keeps the one-line message for scripts.
        listing = self._command_listing(message)
        if listing is None:  # a bad or missing flag: the message, and where the flags are
            listing = f"{message}\nhint: see `{self.prog} --help`"
        sys.stderr.write(f"{self.prog}: {listing}\n")
        raise SystemExit(EXIT_USAGE)

    def _command_listing(self, message: str) -> str | None:
        """For a missing command (or action): the list of them and where help is."""
        for action in self._actions:
            if not isinstance(action, argparse._SubParsersAction):
                continue
            if f"required: {action.metavar}" not in message:
                return None
            names = [(a.dest, a.help or "") for a in action._choices_actions]
            width = max(len(name) for name, _ in names)
            rows = "\n".join(f"  {name.ljust(width)}  {text}" for name, text in names)
            kind = str(action.metavar).lower()
            article = "an" if kind[:1] in "aeiou" else "a"
            return (
                f"{article} {kind} is required:\n{rows}\n"
                f"run `{self.prog} --help` or `{self.prog} {action.metavar} --help` for more"
            )
        return None


def _common(p: argparse.ArgumentParser, *, follow: bool = False) -> None:
    p.add_argument(
        "--url",
        default=os.environ.get("MCP_PROBE_URL"),
        help="MCP endpoint URL (env MCP_PROBE_URL)",
    )
    p.add_argument("--auth-token", help="bearer token (prefer MCPSUB_AUTH_TOKEN or login)")
    p.add_argument(
        "--timeout-ms",
        type=float,
        default=None,
        help="budget for every phase, in ms (env MCP_PROBE_TIMEOUT_MS; default 15000)",
    )
    p.add_argument(
        "--ca-cert",
        help="trust only this CA file for https (default: the system's trust store, or SSL_CERT_FILE)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="one JSON object on stdout" + (" (NDJSON with --follow)" if follow else ""),
    )
    p.add_argument(
        "--trace",
        metavar="FILE",
        help="write the wire transcript to FILE: JSON Lines, 0600, secrets cut (docs/cli.md)",
    )
    add_quiet(p)


GLOBAL_VALUE_FLAGS = ("--api",)
GLOBAL_SWITCHES = ("--json", "--lines", "-q", "--quiet")
OWN_COMMANDS = ("probe", "call", "login", "logout", "completion")


def command_word(argv: list[str]) -> str | None:
    """The command ``argv`` names, looking past the global flags; None when unsure (help,
    an unknown flag before the command), and then the whole parser is built."""
    index = 0
    while index < len(argv):
        word = argv[index]
        if word in GLOBAL_SWITCHES or word.startswith("--api="):
            index += 1
        elif word in GLOBAL_VALUE_FLAGS:
            index += 2
        elif word.startswith("-"):
            return None
        else:
            return word
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """``mcpsubctl``'s parser; with ``command``, only the part that parses that command
    (every command's parser is built only for help, completion, man pages and errors)."""
    parser = _Parser(
        prog="mcpsubctl",
        description=DESCRIPTION,
        epilog=GLOBAL_FLAGS_NOTE + "\n\n" + EXIT_CODE_TABLE,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"mcpsubctl v{__version__}")
    # Global flags: also accepted before the command (`mcpsubctl --api … status`); they land
    # in their own dests because a subparser's defaults would overwrite the same dest.
    parser.add_argument(
        "--api",
        dest="global_api",
        metavar="API",
        default=None,
        help="daemon API for the daemon commands: unix:///path/api.sock or http://127.0.0.1:PORT",
    )
    parser.add_argument(
        "--json", dest="global_json", action="store_true", help="machine output (JSON) on stdout"
    )
    parser.add_argument(
        "--lines",
        dest="global_lines",
        action="store_true",
        help="print the error-code/recommended-next-action lines on stdout even on a terminal "
        "(they are always printed when stdout is not a terminal)",
    )
    parser.add_argument(
        "-q",
        "--quiet",
        dest="global_quiet",
        action="store_true",
        help="no live status line on a terminal",
    )
    sub = parser.add_subparsers(
        dest="command", required=True, parser_class=_Parser, metavar="COMMAND"
    )

    if command is None or command in OWN_COMMANDS:
        probe = sub_parser(
            sub,
            "probe",
            help="wait once for the next update of one or more URIs",
            epilog=EXIT_CODE_TABLE,
        )
        _common(probe, follow=True)
        probe.add_argument(
            "--uri",
            action="append",
            default=None,
            help="resource URI; repeat for several URIs on one listen stream",
        )
        probe.add_argument(
            "--skip-resource-list-check",
            action="store_true",
            help="do not require the URI in resources/list (dynamic URIs)",
        )
        probe.add_argument(
            "--follow",
            action="store_true",
            help="keep listening; print one JSON line per re-read (NDJSON); Ctrl-C exits 0",
        )
        probe.add_argument("--max-events", type=int, default=None, help=argparse.SUPPRESS)

        call = sub_parser(sub, "call", help="call one tool once", epilog=EXIT_CODE_TABLE)
        _common(call)
        call.add_argument("--tool", help="tool name")
        call.add_argument(
            "--args", default=None, help="tool arguments as a JSON object (default {})"
        )

        for name, text in (
            ("login", "device-flow login to a gateway (token cached for all tools)"),
            ("logout", "forget the cached token of a gateway"),
        ):
            auth = sub_parser(sub, name, help=text)
            auth.add_argument(
                "url",
                nargs="?",
                default=os.environ.get("MCP_PROBE_URL"),
                help="the gateway's MCP URL (env MCP_PROBE_URL)",
            )

    import importlib

    from cli.commands import GROUPS

    for module, function, names in GROUPS:
        if command is None or command in names:
            getattr(importlib.import_module(module), function)(sub, COMMANDS)
    if command is None or command in OWN_COMMANDS:
        completion = sub_parser(sub, "completion", help="print a shell completion script")
        completion.add_argument("shell", choices=("bash", "zsh", "fish"), help="the shell")
    return parser


def apply_global_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Merge the flags given before the command into the command's own."""
    if args.global_api is not None:
        if not hasattr(args, "api"):
            parser.error(f"--api does not apply to `{args.command}`")
        if args.api is None:
            args.api = args.global_api
    if args.global_json:
        if not hasattr(args, "json"):
            parser.error(f"--json does not apply to `{args.command}`")
        args.json = True
    args.quiet = bool(getattr(args, "quiet", False) or args.global_quiet)
    args.lines = bool(getattr(args, "lines", False) or args.global_lines)


def _timeout_ms(value: float | None, default: float) -> float:
    from cli.failures import EXIT_USAGE

    if value is None:
        raw = os.environ.get("MCP_PROBE_TIMEOUT_MS")
        if not raw:
            return default
        try:
            value = float(raw)
        except ValueError:
            value = -1
    if not (value > 0 and value != float("inf")):
        sys.stdout.write("error-code USAGE_ERROR\n")
        sys.stderr.write(f"mcpsubctl: --timeout-ms must be a number > 0, got {value}\n")
        raise SystemExit(EXIT_USAGE)
    return value


def _token(args: argparse.Namespace) -> str | None:
    if args.auth_token:
        from cli.argscan import warn_token_flag

        warn_token_flag("MCPSUB_AUTH_TOKEN or `mcpsubctl login`")
        return str(args.auth_token)
    return os.environ.get("MCPSUB_AUTH_TOKEN") or os.environ.get("MCP_PROBE_AUTH_TOKEN") or None


def _emit(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def cmd_probe(args: argparse.Namespace) -> int:
    from cli import output
    from cli.failures import ctl_exit_code
    from cli.human import machine_lines_wanted

    uris: list[str] = args.uri or []
    if not args.url:
        return _usage_failure("SERVER_URL_UNKNOWN", "pass --url or set MCP_PROBE_URL", args, uris)
    if not uris:
        return _usage_failure(
            "RESOURCE_URI_REQUIRED", "pass --uri (repeat it for several)", args, uris
        )
    input_error = _input_error(args)
    if input_error is not None:
        return _usage_failure(*input_error, args, uris)
    follow_forever = args.follow and args.timeout_ms is None
    timeout_ms = None if follow_forever else _timeout_ms(args.timeout_ms, 15000.0)
    if args.follow:
        return _follow(args, uris, timeout_ms)

    from cli.runner import run_subscribe_probe

    assert timeout_ms is not None
    outcome = run_subscribe_probe(
        url=args.url,
        uris=uris,
        explicit_token=_token(args),
        timeout_ms=timeout_ms,
        skip_list_check=args.skip_resource_list_check,
        ca_cert=args.ca_cert,
        compat=False,
        client_name="mcpsubctl",
        program="mcpsubctl",
        quiet=args.quiet,
        trace=args.trace,
    )
    extra: dict[str, Any] = {"resourceUris": uris, "notificationUri": None}
    if outcome.failure is not None:
        f = outcome.failure
        sys.stderr.write(f"probe failed: {f.message}\n")
        if f.hint:
            sys.stderr.write(f"hint: {f.hint}\n")
        if args.json:
            extra["message"] = f.message
            learnt = outcome.result
            if learnt is not None and learnt.listen_acknowledged:
                # Say what was seen: the ack arrived before the frame that broke the rules.
                extra.update(
                    listenAcknowledged=True,
                    honoredUris=learnt.honored_uris,
                    closeReason=learnt.close_reason,
                    initialText=learnt.initial_text,
                )
            _emit(output.json_text(output.failure_json(f.code, f.hint, args.url, uris[0], extra)))
        elif machine_lines_wanted(False, args.lines):
            _emit(output.failure_lines(f.code, f.hint, args.url, uris[0]))
        return ctl_exit_code(f.code)
    result = outcome.result
    if result.error_message:
        sys.stderr.write(f"probe: {result.error_message}\n")
    extra["notificationUri"] = result.notification_uri
    _emit(
        output.json_text(output.probe_json(result, extra))
        if args.json
        else output.probe_lines(result)
    )
    return ctl_exit_code(result.error_code)


def _input_error(args: argparse.Namespace) -> tuple[str, str] | None:
    """(code, hint) for an unusable --url or --ca-cert, found before any network I/O.

    A URL that is not http(s) is an input error (INVALID_URL, exit 2), not a network
    failure to retry; a missing CA file is a usage error that names the file.
    """
    from service.failures import INVALID_URL_HINT, url_problem
    from service.safetext import redact_urls

    problem = url_problem(args.url)
    if problem is not None:
        # The hint is printed on stdout too (recommended-next-action): the URL as shown.
        hint = f"--url {args.url!r} is not usable: {problem}; {INVALID_URL_HINT}"
        return "INVALID_URL", redact_urls(hint)
    ca_cert = getattr(args, "ca_cert", None)
    if ca_cert and not os.path.isfile(ca_cert):
        return "USAGE_ERROR", f"--ca-cert {ca_cert}: no such file (pass the CA's PEM file)"
    return None


def _usage_failure(code: str, hint: str, args: argparse.Namespace, uris: list[str]) -> int:
    from cli import output
    from cli.failures import ctl_exit_code
    from cli.human import machine_lines_wanted

    sys.stderr.write(f"mcpsubctl: {hint}\n")
    uri = uris[0] if uris else None
    if args.json:
        _emit(output.json_text(output.failure_json(code, hint, args.url, uri)))
    elif machine_lines_wanted(False, args.lines):
        _emit(output.failure_lines(code, hint, args.url, uri))
    return ctl_exit_code(code)


def _follow(args: argparse.Namespace, uris: list[str], timeout_ms: float | None) -> int:
    import asyncio

    from cli.failures import classify, ctl_exit_code
    from service import eventloop
    from service.backoff import Backoff
    from service.probe import ProbeOptions
    from service.probe_follow import follow_server

    try:
        # uvloop, as the daemon: a follow runs for hours, and asyncio's loop was the largest
        # share of its CPU per re-read left (docs/benchmarks.md); a one-shot probe keeps
        # asyncio's, which costs no import
        loop = eventloop.choose()
    except eventloop.EventLoopError as exc:
        return _usage_failure("INVALID_ARGUMENT", str(exc), args, uris)
    options = ProbeOptions(
        url=args.url,
        uris=uris,
        token=_token(args),
        client_name="mcpsubctl",
        ca_cert=args.ca_cert,
        exact_uri_match=False,
        bound_all_phases=True,
    )
    base = float(os.environ.get("MCPSUB_BACKOFF_BASE_S", "1.0"))
    backoff = Backoff(base_s=base, cap_s=max(base, 60.0))
    try:
        relisten_per_minute = max(1, int(os.environ.get("MCPSUB_RELISTEN_PER_MINUTE", "60")))
    except ValueError:
        relisten_per_minute = 60

    from service.jsonencode import json_text

    def emit(record: dict[str, Any]) -> None:
        # orjson (the daemon's one encoder): json.dumps was a twentieth of a re-read's CPU
        _emit(json_text(record))

    async def run() -> None:
        task = follow_server(
            options,
            emit,
            backoff=backoff,
            max_events=args.max_events,
            relisten_per_minute=relisten_per_minute,
        )
        if timeout_ms is None:
            await task
        else:
            try:
                async with asyncio.timeout(timeout_ms / 1000):
                    await task
            except TimeoutError:
                return

    from cli.runner import TraceRefused, tracing

    try:
        with tracing(args.trace, "mcpsubctl"):
            eventloop.run(run(), loop=loop)
    except KeyboardInterrupt:
        return 0
    except TraceRefused as exc:
        refused = exc.failure(compat=False)
        return _usage_failure(refused.code, refused.message, args, uris)
    except Exception as exc:
        failure = classify(exc, mode="subscribe", compat=False)
        code = (
            getattr(exc, "error_code", None) if failure.code == "INTERNAL_ERROR" else failure.code
        )
        code = code or failure.code
        emit(
            {
                "type": "error",
                "errorCode": code,
                "message": failure.message,
                "recommendedNextAction": failure.hint,
            }
        )
        sys.stderr.write(f"probe --follow failed: {failure.message}\n")
        return ctl_exit_code(code)
    return 0


def cmd_call(args: argparse.Namespace) -> int:
    from cli import output
    from cli.failures import ctl_exit_code

    def finish(
        code: str | None,
        content: object,
        hint: str | None,
        is_error: bool,
        message: str | None = None,
    ) -> int:
        if message:
            sys.stderr.write(f"call failed: {message}\n")
        if hint and code != "TOOL_ERROR":
            sys.stderr.write(f"hint: {hint}\n")
        if args.json:
            _emit(
                output.json_text(
                    output.call_json(args.url, args.tool, is_error, code, content, hint)
                )
            )
        else:
            _emit(output.call_lines(args.url, args.tool, is_error, code, content, hint))
        return ctl_exit_code(code)

    if not args.url:
        return finish("SERVER_URL_UNKNOWN", None, "pass --url or set MCP_PROBE_URL", True, "no URL")
    if not args.tool:
        return finish("TOOL_NAME_REQUIRED", None, "pass --tool NAME", True, "no tool name")
    input_error = _input_error(args)
    if input_error is not None:
        return finish(input_error[0], None, input_error[1], True, input_error[1])
    from service import jsondecode

    try:
        arguments = jsondecode.loads(args.args) if args.args is not None else {}
    except jsondecode.InvalidJson:
        arguments = None
    if not isinstance(arguments, dict):
        return finish(
            "INVALID_ARGS",
            None,
            "--args must be a JSON object",
            True,
            f"--args is not a JSON object (or nests too deep): {str(args.args)[:120]}",
        )
    timeout_ms = _timeout_ms(args.timeout_ms, 15000.0)
    from cli.runner import run_tool_call

    outcome = run_tool_call(
        url=args.url,
        tool=args.tool,
        arguments=arguments,
        explicit_token=_token(args),
        timeout_ms=timeout_ms,
        ca_cert=args.ca_cert,
        compat=False,
        client_name="mcpsubctl",
        program="mcpsubctl",
        trace=args.trace,
    )
    if outcome.failure is not None:
        f = outcome.failure
        return finish(f.code, None, f.hint, True, f.message)
    result = outcome.result or {}
    content = result.get("content")
    is_error = result.get("isError") is True
    return finish(
        "TOOL_ERROR" if is_error else None,
        content if isinstance(content, list) else [],
        None,
        is_error,
    )


def cmd_login(args: argparse.Namespace) -> int:
    from cli.failures import EXIT_USAGE
    from cli.login import run_login

    if not args.url:  # a usage error here (exit 2); the drop-in's --login keeps its exit 1
        _emit("login-status failed\nerror-code SERVER_URL_UNKNOWN")
        sys.stderr.write("mcpsubctl login: pass the gateway's URL (or set MCP_PROBE_URL)\n")
        return EXIT_USAGE
    return run_login(["--url", args.url], program="mcpsubctl")


def cmd_completion(args: argparse.Namespace) -> int:
    from cli.completion import render

    sys.stdout.write(render(args.shell, build_parser()))
    return 0


def cmd_logout(args: argparse.Namespace) -> int:
    from cli.login import run_logout

    return run_logout(["--url", args.url] if args.url else [])


COMMANDS = {
    "probe": cmd_probe,
    "call": cmd_call,
    "login": cmd_login,
    "logout": cmd_logout,
    "completion": cmd_completion,
}


def main(argv: list[str] | None = None) -> int:
    from service.exits import run_main

    argv = sys.argv[1:] if argv is None else argv
    return run_main(lambda: _main(argv))


def _main(argv: list[str]) -> int:
    if argv == ["--version"]:  # answer before building the parser: scripts call it often
        sys.stdout.write(f"mcpsubctl v{__version__}\n")
        return 0
    from cli.commands import owner

    word = command_word(argv)
    known = word is not None and (word in OWN_COMMANDS or owner(word) is not None)
    parser = build_parser(word if known else None)
    args = parser.parse_args(argv)
    apply_global_flags(parser, args)
    return COMMANDS[args.command](args)


if __name__ == "__main__":
    raise SystemExit(main())
