"""``mcpsubctl trigger …``: programs the daemon runs on matching revisions, and their runs.

``trigger add|list|show|pause|resume|remove|test`` and ``trigger runs|run|retry``, over the
daemon's local API (``docs/triggers.md``). Same conventions as :mod:`cli.webhook_cmds`:
``--api``, ``--json``, error lines on stdout, the message on stderr, one exit code per
class. Output tails and everything a server wrote are escaped before they reach a terminal.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from typing import TYPE_CHECKING, Any

from cli.apicmd import api_flags, emit, exit_code, fail, json_text, run, table, when
from service.safetext import shown, terminal_safe

if TYPE_CHECKING:
    from cli.localapi import DaemonClient

MODES = ("all", "latest")
STATES = ("pending", "failed", "running", "succeeded", "dead", "superseded")
TEST_SLACK_S = 30.0
"""``trigger test`` waits for the program: its timeout, its kill grace and this."""

# ---- formatting (pure) ------------------------------------------------------------------
TRIGGER_HEADERS = ("ID", "NAME", "STATE", "MODE", "URI", "RUNS", "LAST RUN", "PROGRAM")
RUN_HEADERS = ("ID", "TRIGGER", "STATE", "ATTEMPTS", "EXIT", "WHEN", "URI", "LAST ERROR")


def command_line(t: dict[str, Any]) -> str:
    return " ".join([t["program"], *t.get("args", [])])


def run_counts(t: dict[str, Any]) -> str:
    counts = t.get("runs")
    if not isinstance(counts, dict):
        return "-"
    return " ".join(f"{k} {v}" for k, v in counts.items() if v) or "none"


def trigger_rows(triggers: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for t in triggers:
        last = t.get("lastRun") or {}
        rows.append(
            [
                t["id"],
                t.get("name"),
                "active" if t["enabled"] else "paused",
                t["mode"],
                " ".join(t["uriPatterns"]),
                run_counts(t),
                f"{last['id']} {last['state']}" if last else None,
                command_line(t),
            ]
        )
    return rows


def exit_text(r: dict[str, Any]) -> str | None:
    """``0``, ``3``, ``SIGTERM``: how a run's last attempt ended (None: none yet)."""
    if r.get("lastSignal"):
        return str(r["lastSignal"])
    if r.get("exitCode", r.get("lastExit")) is not None:
        return str(r.get("exitCode", r.get("lastExit")))
    return None


def run_rows(runs: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for r in runs:
        moment = r.get("finishedAt") or r.get("nextAttemptAt")
        rows.append(
            [
                r["id"],
                r["triggerId"],
                r["state"],
                r["attempts"],
                exit_text(r),
                when(moment),
                r["uri"],
                r.get("lastError"),
            ]
        )
    return rows


def trigger_lines(t: dict[str, Any]) -> str:
    last = t.get("lastRun") or {}
    lines = [
        f"id:           {t['id']}",
        f"name:         {shown(t.get('name') or '-')}",
        f"state:        {'active' if t['enabled'] else 'paused'}",
        f"uri:          {shown(' '.join(t['uriPatterns']))}",
        f"mode:         {t['mode']}",
        f"concurrency:  {t['concurrency']}",
        f"timeout:      {t['timeoutS']:g} s",
        f"program:      {shown(t['program'])}",
        f"args:         {shown(json_text(t.get('args', [])))}",
        f"env:          {shown(' '.join(t.get('env', [])) or '-')} (and PATH, HOME, LANG, MCPSUB_*)",
        f"cwd:          {shown(t.get('cwd') or '-')}",
        f"created:      {when(t.get('createdAt'))}",
        f"runs:         {run_counts(t)}",
        f"last run:     {last['id']} {last['state']} {when(last.get('updatedAt'))}"
        if last
        else "last run:     -",
    ]
    return "\n".join(lines)


def tail_block(label: str, text: str | None, total: int) -> list[str]:
    if not text:
        return [f"  {label}: (empty)" if not total else f"  {label}: {total} bytes, none kept"]
    note = f" (last {len(text.encode())} of {total} bytes)" if total > len(text.encode()) else ""
    body = terminal_safe(text.rstrip("\n"), keep_lines=True)
    return [f"  {label}{note}:", *(f"    {line}" for line in body.splitlines())]


def attempt_lines(a: dict[str, Any]) -> list[str]:
    if a.get("signal"):
        ended = f"signal {a['signal']}"
    elif a.get("exitCode") is not None:
        ended = f"exit {a['exitCode']}"
    else:
        ended = "did not start"
    if a.get("timedOut"):
        ended += " (timed out)"
    duration = a.get("durationMs")
    lines = [
        f"attempt {a['attempt']}: {ended}, "
        f"{'-' if duration is None else f'{duration:g} ms'}, "
        f"{when(a.get('startedAt'))} -> {when(a.get('endedAt'))}",
    ]
    if a.get("error"):
        lines.append(f"  error: {shown(a['error'])}")
    lines += tail_block("stdout", a.get("stdoutTail"), int(a.get("stdoutBytes") or 0))
    lines += tail_block("stderr", a.get("stderrTail"), int(a.get("stderrBytes") or 0))
    return lines


def run_lines(r: dict[str, Any]) -> str:
    """One run in full (``trigger run``): its fields, then every attempt with its tails
    (``attempts`` is their list, as ``GET /v1/triggers/runs/{id}`` answers)."""
    attempts = r.get("attempts") or []
    lines = [
        f"id:           {r['id']}",
        f"trigger:      {r['triggerId']}",
        f"state:        {r['state']}",
        f"uri:          {shown(r['uri'])}",
        f"event:        {r.get('eventId') if r.get('eventId') is not None else '-'}",
        f"attempts:     {len(attempts)}",
        f"last error:   {shown(r['lastError']) if r.get('lastError') else '-'}",
        f"next attempt: {when(r.get('nextAttemptAt')) if r['state'] == 'failed' else '-'}",
        f"created:      {when(r.get('createdAt'))}",
        f"finished:     {when(r.get('finishedAt'))}",
    ]
    for attempt in attempts:
        lines += attempt_lines(attempt)
    return "\n".join(lines)


def resolve_program(program: str) -> str:
    """A bare name becomes the path it has on this shell's PATH (the daemon may run with
    another PATH); a path becomes absolute; a name not found is left for the daemon."""
    if os.sep in program:
        return os.path.abspath(program)
    return shutil.which(program) or program


# ---- the command ----------------------------------------------------------------------------
def cmd_trigger(args: argparse.Namespace) -> int:
    action: str = args.action

    def body(client: DaemonClient) -> int:
        if action == "add":
            return _add(client, args)
        if action == "list":
            triggers = client.get("/v1/triggers")["triggers"]
            if args.json:
                emit(json_text({"triggers": triggers}))
            else:
                emit(table(TRIGGER_HEADERS, trigger_rows(triggers)) if triggers else "no triggers")
            return 0
        if action == "show":
            found = client.get(f"/v1/triggers/{args.id}")
            emit(json_text(found) if args.json else trigger_lines(found))
            return 0
        if action == "remove":
            removed = client.request("DELETE", f"/v1/triggers/{args.id}")[1]
            emit(json_text(removed) if args.json else f"removed trigger {removed['id']}")
            return 0
        if action in ("pause", "resume"):
            changed = client.request("POST", f"/v1/triggers/{args.id}/{action}", body={})[1]
            emit(
                json_text(changed) if args.json else table(TRIGGER_HEADERS, trigger_rows([changed]))
            )
            return 0
        if action == "test":
            return _test(client, args)
        if action == "runs":
            page = client.get(
                "/v1/triggers/runs",
                trigger=args.id,
                state=args.state,
                limit=args.limit,
                newest="true",
            )
            runs = list(reversed(page["runs"]))  # the newest `limit`, oldest first
            if args.json:
                emit(json_text({"runs": runs}))
            else:
                emit(table(RUN_HEADERS, run_rows(runs)) if runs else "no runs")
            return 0
        if action == "run":
            found = client.get(f"/v1/triggers/runs/{args.id}")
            emit(json_text(found) if args.json else run_lines(found))
            return 0
        if action == "retry":
            again = client.request("POST", f"/v1/triggers/runs/{args.id}/retry", body={})[1]
            emit(json_text(again) if args.json else table(RUN_HEADERS, run_rows([again])))
            return 0
        raise AssertionError(action)

    return run(args, body)


def _add(client: DaemonClient, args: argparse.Namespace) -> int:
    command = list(args.command_line)
    if command and command[0] == "--":
        command = command[1:]
    from cli.agent_run import expand_trigger_agent

    problem = expand_trigger_agent(args, command, client.endpoint.socket)
    if problem:
        return fail(args, "USAGE_ERROR", problem, "docs/agents.md, 'Start an agent on a change'")
    if not command:
        return fail(
            args,
            "USAGE_ERROR",
            "no program: put it after --",
            "mcpsubctl trigger add --uri 'PATTERN' -- PROGRAM ARGS...",
        )
    body: dict[str, Any] = {
        "program": resolve_program(command[0]),
        "args": command[1:],
        "uriPatterns": args.uri,
    }
    for key, value in (
        ("name", args.name),
        ("mode", args.mode),
        ("concurrency", args.concurrency),
        ("timeoutS", args.timeout),
        ("env", args.env),
        ("cwd", os.path.abspath(args.cwd) if args.cwd else None),
    ):
        if value is not None:
            body[key] = value
    created = client.request("POST", "/v1/triggers", body=body)[1]
    emit(json_text(created) if args.json else table(TRIGGER_HEADERS, trigger_rows([created])))
    return 0


def _test(client: DaemonClient, args: argparse.Namespace) -> int:
    trigger = client.get(f"/v1/triggers/{args.id}")
    wait_s = float(trigger["timeoutS"]) + TEST_SLACK_S
    result = client.request("POST", f"/v1/triggers/{args.id}/test", body={}, timeout_s=wait_s)[1]
    if args.json:
        emit(json_text(result))
    else:
        emit("\n".join(attempt_lines({**result, "attempt": 1})))
    if result["ok"]:
        return 0
    reason = (
        result.get("error")
        or (f"signal {result['signal']}" if result.get("signal") else None)
        or f"exit status {result.get('exitCode')}"
    )
    if args.json:
        sys.stderr.write(f"mcpsubctl trigger test: the program failed: {shown(reason)}\n")
        return exit_code("TRIGGER_TEST_FAILED")
    return fail(
        args,
        "TRIGGER_TEST_FAILED",
        f"the program failed: {reason}",
        "see its stderr above; `mcpsubctl trigger show ID` shows its command line",
    )


# ---- argparse wiring ------------------------------------------------------------------
def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an id: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"an id is >= 1, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"a timeout is above 0, got {text}")
    return value


def add_trigger_arguments(p: argparse.ArgumentParser) -> None:
    """``trigger add``'s flags (a function of its own: other commands build on it)."""
    p.add_argument(
        "--uri", action="append", required=True, help="URI glob to run on (repeatable; '*': all)"
    )
    p.add_argument("--name", default=None, help="a name to recognise it by")
    p.add_argument(
        "--mode",
        choices=MODES,
        default=None,
        help="all: a run per revision; latest: skip revisions superseded while one ran "
        "(default all)",
    )
    p.add_argument(
        "--concurrency", type=_positive_int, default=None, help="runs at once (default 1)"
    )
    p.add_argument(
        "--timeout", type=_seconds, default=None, help="seconds per attempt (default 600)"
    )
    p.add_argument(
        "--env",
        action="append",
        default=None,
        metavar="NAME[=VALUE]",
        help="pass NAME from the daemon's environment, or set it (repeatable)",
    )
    p.add_argument("--cwd", default=None, help="working directory (default: the daemon's HOME)")
    from cli.agent_run import add_trigger_agent_arguments

    add_trigger_agent_arguments(p)
    p.add_argument(
        "command_line",
        nargs=argparse.REMAINDER,
        metavar="-- PROGRAM ARGS",
        help="the program and its arguments, run with no shell; an argument that is exactly "
        "{uri}, {revision}, {event_id}, {server}, {attempt} or {run_id} is replaced",
    )


def add_trigger_commands(sub: Any, commands: dict[str, Any]) -> None:
    """Add ``trigger`` to ``mcpsubctl``'s subparsers and ``commands``."""
    from cli.parsing import sub_parser

    parser_class = sub._parser_class  # the _Parser of ctl.py: JSON usage errors, exit 2
    trigger = sub_parser(sub, "trigger", help="daemon: run a program on a change (add, runs, …)")
    actions = trigger.add_subparsers(
        dest="action", required=True, parser_class=parser_class, metavar="ACTION"
    )
    p = sub_parser(actions, "add", help="run PROGRAM on every stored revision of a URI")
    api_flags(p)
    add_trigger_arguments(p)
    p = sub_parser(actions, "list", help="list triggers, their runs by state, the last run")
    api_flags(p)
    for name, text in (
        ("show", "one trigger"),
        ("pause", "start no new run until resumed (runs are still recorded)"),
        ("resume", "start runs again"),
        ("remove", "remove a trigger and its runs (a run in flight is ended)"),
        ("test", "run the program once now with a synthetic change"),
    ):
        p = sub_parser(actions, name, help=text)
        api_flags(p)
        p.add_argument("id", type=_positive_int, help="trigger ID")
    p = sub_parser(actions, "runs", help="the newest runs (of one trigger)")
    api_flags(p)
    p.add_argument("id", type=_positive_int, nargs="?", default=None, help="trigger ID")
    p.add_argument("--state", choices=STATES, default=None, help="only this state")
    p.add_argument("--limit", type=_positive_int, default=20, help="how many (<= 1000)")
    p = sub_parser(actions, "run", help="one run in full: every attempt and its output tail")
    api_flags(p)
    p.add_argument("id", type=_positive_int, help="run ID")
    p = sub_parser(actions, "retry", help="run a run again now (a dead one too)")
    api_flags(p)
    p.add_argument("id", type=_positive_int, help="run ID")
    commands.update({"trigger": cmd_trigger})
