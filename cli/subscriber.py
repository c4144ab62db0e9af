"""``mcp-resource-subscriber``: a drop-in for the TypeScript CLI of the same name (v0.6).

Dispatch order, flags, env vars, output and exit codes follow seed-behaviour §1-§3 exactly;
anything we add (``--ca-cert``) is optional and changes no existing output. Heavy imports
(httpx, asyncio) happen only after ``--help``/``--version`` are ruled out, so those answer
at interpreter speed.
"""

from __future__ import annotations

import os
import sys

from cli.argscan import UsageError, has_flag, option, parse_timeout_ms, peek, warn_token_flag

PROGRAM = "mcp-resource-subscriber"
DEFAULT_URI = "test://review/status"
DEFAULT_TIMEOUT_MS = 15000.0
DEFAULT_PHASE_TIMEOUT_MS = 60000.0
"""Deadline of each request before the listen (discovery, list, first read)."""
PROBE_CLIENT = "mcp-resource-subscribe-probe-client"
CALL_CLIENT = "mcp-resource-subscribe-call-client"

HELP = f"""\
{PROGRAM} — wait for the next update of an MCP resource (protocol revision 2026-07-28)

Usage:
  {PROGRAM} --url <server-url> [--uri <resource-uri>] [--auth-token <token>]
      [--skip-resource-list-check] [--timeout-ms <ms>] [--ca-cert <file>] [--json]
      [--trace <file>]
  {PROGRAM} call --url <server-url> --tool <name> [--args <json-object>]
      [--auth-token <token>] [--timeout-ms <ms>] [--ca-cert <file>] [--json]
      [--trace <file>]
  {PROGRAM} --login --url <gateway-mcp-url>
  {PROGRAM} --logout --url <gateway-mcp-url>
  {PROGRAM} --help | --version

Subscribe mode (default): discover the server, check the resource is listed, read it,
open subscriptions/listen for it, read again (an update may already have happened), then
wait for notifications/resources/updated and read the new text. A text whose
recommended_next_action is POLL_AFTER is not final: the wait continues on the same stream.

Options:
  --url <url>                  MCP endpoint (env MCP_PROBE_URL)
  --uri <uri>                  resource to watch (env MCP_PROBE_URI; default {DEFAULT_URI})
  --auth-token <token>         bearer token (env MCP_PROBE_AUTH_TOKEN; the flag is visible
                               in process lists, prefer the env var or --login)
  --skip-resource-list-check   do not require the URI in resources/list
                               (env MCP_PROBE_SKIP_LIST_CHECK=true)
  --timeout-ms <ms>            budget after the listen starts (env MCP_PROBE_TIMEOUT_MS;
                               default 15000); in call mode it bounds discovery + call
                               (discovery, list and first read each have their own
                               deadline: env MCP_PROBE_PHASE_TIMEOUT_MS, default 60000)
  --ca-cert <file>             trust only this CA file for https (default: the system's
                               trust store, or SSL_CERT_FILE; NODE_EXTRA_CA_CERTS adds a CA,
                               NODE_USE_SYSTEM_CA=1 is accepted)
  --json                       print one JSON object on stdout; diagnostics go to stderr
  --trace <file>               write the wire transcript to <file> (JSON Lines, 0600,
                               secrets cut; env MCP_PROBE_TRACE)
  --tool <name>, --args <json> call mode: the tool and its arguments (a JSON object)
  --login / --logout           device-flow login to a gateway / forget its cached token
                               (env MCP_PROBE_TOKEN_STORE_PATH overrides the token store)

Exit codes: subscribe mode 0 when errorCode is null, else 1.
            call mode 0 success, 1 tool error, 2 auth error, 3 communication/usage/protocol.
"""


def _version() -> str:
    from service._version import __version__

    return __version__


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if has_flag(args, "--help", "-h") or has_flag(args, "--version", "-v"):
        # Scripts call `--version` to check an installation: answer before importing even the
        # exit handling and the stderr wrapper (its start-up budget: results/cli.md).
        return _main(args)
    from service.exits import run_main
    from service.safetext import safe_stderr

    with safe_stderr():  # server text quoted in a diagnostic cannot drive the terminal
        return run_main(lambda: _main(args))


def _main(args: list[str]) -> int:
    if has_flag(args, "--help", "-h"):
        sys.stdout.write(HELP)
        return 0
    if has_flag(args, "--version", "-v"):
        sys.stdout.write(f"{PROGRAM} v{_version()}\n")
        return 0
    _honor_node_tls()  # every https request of the run, the OAuth login's included
    if has_flag(args, "--login"):
        from cli.login import run_login

        return run_login(args, program=PROGRAM)
    if has_flag(args, "--logout"):
        from cli.login import run_logout

        return run_logout(args)
    if args and args[0] == "call":
        return _call(args[1:])
    return _subscribe(args)


def _emit(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _honor_node_tls() -> None:
    """The TypeScript CLI's TLS remedies work here too (``NODE_EXTRA_CA_CERTS`` adds a CA;
    ``NODE_USE_SYSTEM_CA=1`` asks for the system's store, which is already the default)."""
    from service.tlstrust import honor_node_variables

    warning = honor_node_variables()
    if warning:
        sys.stderr.write(f"warning: {warning}\n")


def _subscribe(args: list[str]) -> int:
    from cli import output

    as_json = has_flag(args, "--json")
    env = os.environ
    url = peek(args, "url") or env.get("MCP_PROBE_URL") or None
    uri = peek(args, "uri") or env.get("MCP_PROBE_URI") or None

    def fail(code: str, hint: str | None, message: str | None = None) -> int:
        if message:
            sys.stderr.write(f"subscribe-probe failed: {message}\n")
        if hint:
            sys.stderr.write(f"hint: {hint}\n")
        if as_json:
            _emit(output.json_text(output.failure_json(code, hint, url, uri or DEFAULT_URI)))
        else:
            _emit(output.failure_lines(code, hint, url, uri or DEFAULT_URI))
        return 1

    try:
        url = option(args, "url") or env.get("MCP_PROBE_URL") or None
        uri_flag = option(args, "uri")
        uri = uri_flag or env.get("MCP_PROBE_URI") or None
        raw_timeout = option(args, "timeout-ms") or env.get("MCP_PROBE_TIMEOUT_MS")
        timeout_ms = parse_timeout_ms(raw_timeout) if raw_timeout else DEFAULT_TIMEOUT_MS
        token_flag = option(args, "auth-token")
        ca_cert = option(args, "ca-cert")
        trace = option(args, "trace") or env.get("MCP_PROBE_TRACE") or None
        raw_phase = env.get("MCP_PROBE_PHASE_TIMEOUT_MS")
        phase_ms = parse_timeout_ms(raw_phase) if raw_phase else DEFAULT_PHASE_TIMEOUT_MS
    except UsageError as exc:
        return fail("INTERNAL_ERROR", None, str(exc))
    if not url:
        if as_json:
            _emit(
                output.json_text(
                    output.failure_json("SERVER_URL_UNKNOWN", None, None, uri or DEFAULT_URI)
                )
            )
        else:
            _emit(output.failure_lines("SERVER_URL_UNKNOWN", None, None, uri))
        sys.stderr.write("subscribe-probe failed: no server URL: pass --url or set MCP_PROBE_URL\n")
        return 1
    if not uri:
        uri = DEFAULT_URI
        sys.stderr.write(
            f"warning: using default URI {DEFAULT_URI} (pass --uri or set MCP_PROBE_URI "
            "to watch another resource)\n"
        )
    if token_flag:
        warn_token_flag()
    skip = (
        has_flag(args, "--skip-resource-list-check")
        or env.get("MCP_PROBE_SKIP_LIST_CHECK") == "true"
    )

    from cli.runner import run_subscribe_probe

    outcome = run_subscribe_probe(
        url=url,
        uris=[uri],
        explicit_token=token_flag or env.get("MCP_PROBE_AUTH_TOKEN") or None,
        timeout_ms=timeout_ms,
        skip_list_check=skip,
        ca_cert=ca_cert,
        compat=True,
        client_name=PROBE_CLIENT,
        program=PROGRAM,
        phase_timeout_s=phase_ms / 1000,
        trace=trace,
    )
    if outcome.failure is not None:
        return fail(outcome.failure.code, outcome.failure.hint, outcome.failure.message)
    result = outcome.result
    assert result is not None
    if result.error_message:
        sys.stderr.write(f"subscribe-probe: {result.error_message}\n")
    _emit(output.json_text(output.probe_json(result)) if as_json else output.probe_lines(result))
    return 0 if result.error_code is None else 1


def _call(args: list[str]) -> int:
    from cli import output
    from cli.failures import dropin_call_exit_code

    as_json = has_flag(args, "--json")
    env = os.environ
    url = peek(args, "url") or env.get("MCP_PROBE_URL") or None
    tool = peek(args, "tool")

    def finish(code: str | None, content: object, hint: str | None, is_error: bool) -> int:
        if as_json:
            _emit(output.json_text(output.call_json(url, tool, is_error, code, content, hint)))
        else:
            _emit(output.call_lines(url, tool, is_error, code, content, hint))
        return dropin_call_exit_code(code)

    def fail(code: str, message: str, hint: str | None = None) -> int:
        from service.mcp.classify import NETWORK_HINTS

        sys.stderr.write(f"call failed: {message}\n")
        if hint:
            sys.stderr.write(f"hint: {hint}\n")
        # Seed 000: `recommended-next-action` is null except on network-level errors; parsers
        # written for the TypeScript CLI branch on that null. Other hints stay on stderr.
        return finish(code, None, hint if code in NETWORK_HINTS else None, True)

    try:
        url = option(args, "url") or env.get("MCP_PROBE_URL") or None
        tool = option(args, "tool")
        raw_args = option(args, "args")
        raw_timeout = option(args, "timeout-ms") or env.get("MCP_PROBE_TIMEOUT_MS")
        timeout_ms = parse_timeout_ms(raw_timeout) if raw_timeout else DEFAULT_TIMEOUT_MS
        token_flag = option(args, "auth-token")
        ca_cert = option(args, "ca-cert")
        trace = option(args, "trace") or env.get("MCP_PROBE_TRACE") or None
    except UsageError as exc:
        return fail("INTERNAL_ERROR", str(exc))
    if not url:
        return fail("SERVER_URL_UNKNOWN", "no server URL: pass --url or set MCP_PROBE_URL")
    if not tool:
        return fail("TOOL_NAME_REQUIRED", "no tool name: pass --tool <name>")
    from service import jsondecode

    try:
        arguments = jsondecode.loads(raw_args) if raw_args is not None else {}
    except jsondecode.InvalidJson:
        arguments = None
    if not isinstance(arguments, dict):
        return fail("INVALID_ARGS", f"--args must be a JSON object, got: {str(raw_args)[:120]}")
    if token_flag:
        warn_token_flag()
    from cli.runner import run_tool_call

    outcome = run_tool_call(
        url=url,
        tool=tool,
        arguments=arguments,
        explicit_token=token_flag or env.get("MCP_PROBE_AUTH_TOKEN") or None,
        timeout_ms=timeout_ms,
        ca_cert=ca_cert,
        compat=True,
        client_name=CALL_CLIENT,
        program=PROGRAM,
        trace=trace,
    )
    if outcome.failure is not None:
        return fail(outcome.failure.code, outcome.failure.message, outcome.failure.hint)
    result = outcome.result or {}
    content = result.get("content")
    is_error = result.get("isError") is True
    return finish(
        "TOOL_ERROR" if is_error else None,
        content if isinstance(content, list) else [],
        None,
        is_error,
    )


if __name__ == "__main__":
    raise SystemExit(main())
