"""The lab's scenarios: one real agent CLI, one scripted model, one question each.

Each scenario starts a :class:`~bench.agents_lab.world.World`, configures one CLI, runs it
one-shot (or twice), and returns a plain dict of facts: exit codes, what reached the model
(quoted), and timings. They must run inside the private network namespace; ``python -m
bench.agents_lab scenario …`` puts them there and prints the dict as JSON, which is how
tests/agents and the bench call them.
"""

from __future__ import annotations

import json
import re
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import httpx

from bench.agents_lab.clis import AGENTS, Agent, Ran, Transport
from bench.agents_lab.model import Logged, Script
from bench.agents_lab.world import NODE_BIN, URI, World

CHANGE_DELAY_S = 1.0
"""How long after the model asked for ``wait_for_change`` the lab changes the resource, so the
call is pending by then (most CLIs dispatch a tool call in tens of milliseconds; OpenCode's
first MCP call took 2-3.5 s). A change that still came first is returned at once (the call
passes the cursor), so nothing is lost, only measured long."""
WAIT_TIMEOUT_S = 20
EXCERPT = 600


def marker(i: int) -> str:
    return f"MARKER-{i:03d}-{int(time.time() * 1000) % 100000:05d}"


def said(body: Any, needle: str, width: int = EXCERPT, *, longest: bool = False) -> str:
    """The last string in a request body that holds ``needle`` (a tool result, a hook's
    context): what the model read, cut to ``width`` characters around it."""
    found = ""
    stack = [body]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if needle in value and (not longest or len(value) > len(found)):
                found = value
        elif isinstance(value, dict):
            stack.extend(reversed(list(value.values())))
        elif isinstance(value, list):
            stack.extend(reversed(value))
    if len(found) > width:
        at = found.find(needle)
        start = max(0, min(at - width // 3, len(found) - width))
        found = ("…" if start else "") + found[start : start + width] + "…"
    return found


def ran_facts(ran: Ran) -> dict[str, Any]:
    return {
        "argv": ran.argv,
        "exit": ran.code,
        "seconds": round(ran.seconds, 2),
        "timedOut": ran.timed_out,
        "stdoutTail": ran.stdout[-1500:],
        "stderrTail": ran.stderr[-3000:],
    }


def make_agent(world: World, cli: str, transport: Transport, *, hooks: bool = False) -> Agent:
    agent = AGENTS[cli](world, transport, hooks)
    return agent


def http_transport(world: World) -> Transport:
    assert world.daemon is not None and world.tcp_url
    token = (world.daemon.state_dir / "api.token").read_text().strip()
    return Transport("http", f"{world.tcp_url}/mcp", token)


# ---- wait_for_change -----------------------------------------------------------------------------
def wait(cli: str, transport: str = "stdio", changes: int = 1) -> dict[str, Any]:
    """The model calls ``wait_for_change`` ``changes`` times (passing the cursor back); after
    each call the lab changes the resource; measured: change → the model's next request, and
    whether that request holds the new text."""
    world = World(tcp=transport == "http")
    marks = [marker(i) for i in range(changes)]
    changed: dict[int, float] = {}

    def after(step: int) -> None:
        if step >= changes:
            return

        def go() -> None:
            time.sleep(CHANGE_DELAY_S)
            changed[step] = world.put(f"board: v{step + 1}\nstate: {marks[step]}")

        threading.Thread(target=go, daemon=True).start()

    args = {"uri": URI, "after": "{cursor}", "timeoutSeconds": WAIT_TIMEOUT_S}
    steps: list[dict[str, Any]] = [{"tool": "wait_for_change", "args": dict(args)} for _ in marks]
    steps.append({"say": "The board changed; done."})
    world.model.script = Script(steps, after)
    with world:
        world.subscribe()
        steps[0]["args"]["after"] = world.last_event_id()
        agent = make_agent(
            world, cli, http_transport(world) if transport == "http" else Transport()
        )
        files = agent.configure()
        ran = agent.run(
            "Wait for the review board to change (use the mcpsub wait_for_change tool), then tell me what changed.",
            timeout=60 + changes * (CHANGE_DELAY_S + 5),
        )
        mains = world.model.main_requests()
        latencies: list[float | None] = []
        seen: list[bool] = []
        for i, mark in enumerate(marks):
            hit = next((e for e in mains if e.step == i + 1 and mark in e.raw), None)
            seen.append(hit is not None)
            latencies.append(
                round(hit.t - changed[i], 4) if hit is not None and i in changed else None
            )
        last = next((e for e in reversed(mains) if marks[-1] in e.raw), None)
        return {
            "scenario": "wait",
            "cli": cli,
            "label": agent.label,
            "transport": transport,
            "config": files,
            "run": ran_facts(ran),
            "changes": changes,
            "seen": seen,
            "latencies": latencies,
            "modelRequests": len(mains),
            "modelSaw": said(last.body, marks[-1]) if last else "",
            "firstRequestTools": tool_names(mains[0]) if mains else [],
        }


def tool_names(entry: Logged) -> list[str]:
    body = entry.body
    names: list[str] = []
    for spec in body.get("tools") or []:
        if not isinstance(spec, dict):
            continue
        if "functionDeclarations" in spec:
            names += [str(d.get("name")) for d in spec["functionDeclarations"]]
        elif spec.get("type") == "namespace":
            names += [f"{spec.get('name')}.{t.get('name')}" for t in spec.get("tools") or []]
        else:
            names.append(str(spec.get("name")))
    return names


# ---- the prompt hook -----------------------------------------------------------------------------
def hook(cli: str, mode: str = "oneshot") -> dict[str, Any]:
    """Run 1 answers once (the hook sees this agent and workspace for the first time); then the
    resource changes; run 2 (a new one-shot session, or ``mode="resume"``: the same session
    resumed) answers once. Checked: run 2's first model request carries the change."""
    world = World()
    world.model.script = Script([{"say": "Noted."}])
    with world:
        world.subscribe()
        agent = make_agent(world, cli, Transport(), hooks=True)
        files = agent.configure()
        first = agent.run("Say hello.")
        before = len(world.model.main_requests())
        mark = marker(0)
        t = world.put(f"board: v1\nstate: {mark}")
        world.wait_content(mark)
        second = agent.run("What changed on the board?", resume=mode == "resume")
        mains = world.model.main_requests()[before:]
        first_request = mains[0] if mains else None
        raw = first_request.raw if first_request else ""
        return {
            "scenario": "hook",
            "mode": mode,
            "cli": cli,
            "label": agent.label,
            "config": files,
            "runs": [ran_facts(first), ran_facts(second)],
            "changedAt": t,
            "secondRunRequests": len(mains),
            "uriInFirstRequest": URI in raw,
            "markerInFirstRequest": mark in raw,
            "modelSaw": said(first_request.body, URI, 900) if first_request else "",
        }


SCENARIOS: dict[str, Callable[..., dict[str, Any]]] = {"wait": wait, "hook": hook}


# ---- Claude Code Channels --------------------------------------------------------------------------
CHANNEL_VERDICT = re.compile(r'MCP server "mcpsub": (Channel notifications [^\n]*)')
NEGOTIATED = re.compile(r'MCP server "mcpsub": Connection established with capabilities: (\{.*\})')


def channel(cli: str = "claude-code", flag: str = "development") -> dict[str, Any]:
    """Claude Code, interactive (it decides on channels only there: ``-p`` registers none),
    with ``mcpsubctl mcp --channel`` loaded as a channel (``flag``: ``development`` =
    ``--dangerously-load-development-channels server:mcpsub``, ``channels`` = ``--channels
    server:mcpsub``). Quoted from its debug log: the protocol revision it negotiated and its
    own verdict on the channel."""
    world = World()
    world.model.script = Script([{"say": "Noted."}])
    with world:
        world.subscribe()
        agent = make_agent(world, cli, Transport(channel=True))
        agent.channel_flag = flag  # type: ignore[attr-defined]
        files = agent.configure()

        def debug_log() -> str:
            return "\n".join(
                p.read_text(errors="replace") for p in (world.home / ".claude").glob("debug/*.txt")
            )

        ok, screen = agent.run_interactive(
            lambda: CHANNEL_VERDICT.search(debug_log()) is not None, timeout=60
        )
        log = debug_log()
        negotiated = NEGOTIATED.search(log)
        caps = json.loads(negotiated.group(1)) if negotiated else {}
        verdict = CHANNEL_VERDICT.search(log)
        return {
            "scenario": "channel",
            "cli": cli,
            "flag": flag,
            "label": agent.label,
            "config": files,
            "argv": agent.argv("", interactive=True),
            "decided": ok,
            "protocolEra": caps.get("protocolEra"),
            "negotiatedProtocolVersion": caps.get("negotiatedProtocolVersion"),
            "channelVerdict": verdict.group(1) if verdict else None,
            "screen": screen[-2000:],
        }


SCENARIOS["channel"] = channel


# ---- tail under Claude Code's Monitor tool -------------------------------------------------------
def holds(body: Any, needle: str) -> bool:
    """Some string in a request body (a tool result, a system reminder) holds ``needle``
    as the model reads it (not JSON-escaped, unlike the raw body)."""
    return bool(said(body, needle))


def monitor(cli: str = "claude-code", changes: int = 3) -> dict[str, Any]:
    """Claude Code ``-p``: the model starts what the skills name (``mcpsubctl tail --uri URI
    --after CURSOR --summary``, the cursor being the daemon's newest event after the
    subscribe) under the Monitor tool and ends its turn; each change should wake it with the
    tail line. Each change's first line carries its marker, so the line's summary is
    ``first_change(server data)="+board: vN MARKER-…"``. Measured per change: change → the
    model's next request holding the line's ``revision=N``, and whether that request also
    held the summary (the marker line). The lab ends the run after the last one."""
    world = World()
    changed: dict[int, float] = {}
    marks = [marker(i) for i in range(changes)]
    lines = [f"board: v{i + 1} {mark}" for i, mark in enumerate(marks)]
    steps: list[dict[str, Any]] = [
        {
            "tool": "Monitor",
            "exact": "Monitor",
            "args": {"description": "mcpsub changes", "timeout_ms": 120000, "command": ""},
        },
        {"say": "Watching the board."},
    ]
    world.model.script = Script(steps)
    with world:
        world.subscribe()
        cursor = world.last_event_id()
        command = f"mcpsubctl tail --uri '{URI}' --after {cursor} --summary"
        steps[0]["args"]["command"] = command
        agent = make_agent(world, cli, Transport())
        agent.allowed = ["Monitor", "Bash(mcpsubctl tail:*)"]
        files = agent.configure()
        t0 = time.monotonic()
        proc = agent.start("Watch the board.")
        started = world.model.wait_for(lambda e: e.main and e.step == 1, 60)
        events_seen: list[Logged | None] = []
        if started is not None:
            time.sleep(2.0)  # the tail is running by then (it prints nothing until a change)
            for i, line in enumerate(lines):
                changed[i] = world.put(f"{line}\nstate: changed")
                revision = f"revision={i + 2}"
                hit = world.model.wait_for(
                    lambda e, r=revision, t=changed[i]: e.main and e.t > t and r in e.raw, 20
                )
                events_seen.append(hit)
                time.sleep(1.0)
        ran = agent.finish(proc, t0, 30, stop=True)
        summaries = [f'first_change(server data)="+{line}"' for line in lines]
        latencies = [
            round(hit.t - changed[i], 4) if hit else None for i, hit in enumerate(events_seen)
        ]
        summary_seen = [
            bool(hit and holds(hit.body, summaries[i])) for i, hit in enumerate(events_seen)
        ]
        last = next((h for h in reversed(events_seen) if h), None)
        last_i = events_seen.index(last) if last else 0
        return {
            "scenario": "monitor",
            "cli": cli,
            "label": agent.label,
            "config": files,
            "command": command,
            "run": ran_facts(ran),
            "monitorStarted": started is not None,
            "changes": changes,
            "eventSeen": [hit is not None for hit in events_seen],
            "summarySeen": summary_seen,
            "latencies": latencies,
            "expectedSummary": summaries[last_i] if last else "",
            "modelSaw": said(last.body, f"revision={last_i + 2}") if last else "",
        }


SCENARIOS["monitor"] = monitor


# ---- Matrix 1: the lab server judging each CLI ---------------------------------------------------
REVIEW = "test://review/status"
LAB_TOOLS: dict[str, dict[str, tuple[str, dict[str, Any]]]] = {
    "claude-code": {
        "list": ("ListMcpResourcesTool", {"server": "lab"}),
        "read": ("ReadMcpResourceTool", {"server": "lab", "uri": REVIEW}),
        "sleep": ("Bash", {"command": "sleep 6", "description": "wait for the review"}),
    },
    "codex": {
        "list": ("list_mcp_resources", {"server": "lab"}),
        "read": ("read_mcp_resource", {"server": "lab", "uri": REVIEW}),
        "sleep": ("exec_command", {"cmd": "sleep 6"}),
    },
    "opencode": {
        "list": ("list_mcp_resources", {"server": "lab"}),
        "read": ("read_mcp_resource", {"server": "lab", "uri": REVIEW}),
        "sleep": ("bash", {"command": "sleep 6", "description": "wait for the review"}),
    },
    "gemini": {
        "list": ("list_mcp_resources", {"serverName": "lab"}),
        "read": ("read_mcp_resource", {"uri": REVIEW}),
        "sleep": ("run_shell_command", {"command": "sleep 6", "description": "wait"}),
    },
}


def labjudge(cli: str) -> dict[str, Any]:
    """The CLI with ``mcp-lab-server`` (2026-07-28 only, over HTTP) as an MCP server named
    ``lab``, in whatever era the CLI speaks. The model lists resources, reads the review
    resource and then waits 6 s in a shell while the lab publishes its update (to any
    listen open by then); the lab's own report judges the client. Also checked: does the
    model's next request hold the updated text (``status: reviewed``) without a re-read
    the model asked for?"""
    world = World()
    tools = LAB_TOOLS[cli]
    fired: dict[str, float] = {}

    def after(step: int) -> None:
        if step == 2:  # the shell wait has started: publish the update now

            def go() -> None:
                time.sleep(1.0)
                fired["t"] = time.time()
                assert world.lab is not None
                with httpx.Client(base_url=world.lab.base_url, timeout=10, trust_env=False) as h:
                    h.post("/lab/update", json={"uri": REVIEW})

            threading.Thread(target=go, daemon=True).start()

    steps = [
        {"tool": tools[k][0], "exact": tools[k][0], "args": tools[k][1]}
        for k in ("list", "read", "sleep")
    ]
    steps.append({"say": "Done."})
    world.model.script = Script(steps, after)
    with world.start(daemon=False):
        assert world.lab is not None
        agent = make_agent(world, cli, Transport("http", world.lab.url, server="lab"))
        agent.allowed = ["Bash(sleep:*)", "ListMcpResourcesTool", "ReadMcpResourceTool"]
        files = agent.configure()
        ran = agent.run(
            f"Read the MCP resource {REVIEW} from the lab server, subscribe to it, and tell me "
            "its status when it changes."
        )
        time.sleep(1.0)
        report = world.lab_report()
        mains = world.model.main_requests()
        final = next((e for e in mains if e.step == 3), None)
        read_result = next((e for e in mains if e.step == 2), None)
        return {
            "scenario": "labjudge",
            "cli": cli,
            "label": agent.label,
            "config": files,
            "run": ran_facts(ran),
            "updateFired": "t" in fired,
            "modelSawInitial": bool(read_result and "status: pending" in read_result.raw),
            "modelSawUpdate": bool(final and "status: reviewed" in final.raw),
            "readResult": said(read_result.body, "status:") if read_result else "",
            "report": report,
            "labLog": [
                {k: e.get(k) for k in ("seq", "event", "method", "era", "clientInfo", "status")}
                for e in world.lab_log()
            ][:60],
        }


SCENARIOS["labjudge"] = labjudge


# ---- OpenCode and Copilot CLI: what the lab can check of them ---------------------------------------
def _cmd(world: World, argv: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    from bench.agents_lab import netns

    netns.require_private()
    try:
        done = subprocess.run(
            argv,
            cwd=world.work,
            env={**world.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )
        out = ANSI.sub("", done.stdout + done.stderr)
        return {"argv": argv, "exit": done.returncode, "output": out.strip()[-1500:]}
    except subprocess.TimeoutExpired as exc:
        return {"argv": argv, "exit": None, "output": f"timed out after {exc.timeout} s"}


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def others(cli: str) -> dict[str, Any]:
    """OpenCode and Copilot CLI: their own ``mcp list`` over stdio and over ``/mcp``, and a
    one-shot run pointed at the scripted model (quoting why it cannot run, when it cannot)."""
    facts: dict[str, Any] = {"scenario": "others", "cli": cli}
    for transport in ("stdio", "http"):
        world = World(tcp=transport == "http")
        world.model.script = Script([{"tool": "list_subscriptions", "args": {}}, {"say": "ok"}])
        with world:
            world.subscribe()
            t = http_transport(world) if transport == "http" else Transport()
            files: dict[str, str] = {}
            if cli == "opencode":
                entry: dict[str, Any] = (
                    {"type": "local", "command": ["mcpsubctl", "mcp"]}
                    if t.kind == "stdio"
                    else {
                        "type": "remote",
                        "url": t.url,
                        "headers": {"Authorization": f"Bearer {t.token}"},
                    }
                )
                config = {
                    "$schema": "https://opencode.ai/config.json",
                    "mcp": {"mcpsub": entry},
                    "provider": {
                        "anthropic": {
                            "options": {"baseURL": f"{world.model.url}/v1", "apiKey": "sk-lab"}
                        }
                    },
                    "model": "anthropic/claude-sonnet-4-5",
                    "autoupdate": False,
                    "share": "disabled",
                }
                path = world.work / "opencode.json"
                path.write_text(json.dumps(config, indent=2))
                files[str(path.relative_to(world.root))] = path.read_text()
                binary = str(NODE_BIN / "opencode")
                facts[f"{transport}List"] = _cmd(world, [binary, "mcp", "list"])
                facts[f"{transport}Run"] = _cmd(world, [binary, "run", "List my subscriptions."])
            else:
                entry = (
                    {"type": "local", "command": "mcpsubctl", "args": ["mcp"], "tools": ["*"]}
                    if t.kind == "stdio"
                    else {
                        "type": "http",
                        "url": t.url,
                        "headers": {"Authorization": f"Bearer {t.token}"},
                        "tools": ["*"],
                    }
                )
                path = world.home / ".copilot" / "mcp-config.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps({"mcpServers": {"mcpsub": entry}}, indent=2))
                files[str(path.relative_to(world.root))] = path.read_text()
                binary = str(NODE_BIN / "copilot")
                facts[f"{transport}List"] = _cmd(world, [binary, "mcp", "get", "mcpsub"])
                facts[f"{transport}Run"] = _cmd(
                    world, [binary, "-p", "List my subscriptions.", "--allow-all-tools"]
                )
            facts[f"{transport}Config"] = files
            facts[f"{transport}ModelRequests"] = len(world.model.log)
            facts[f"{transport}ModelSawTools"] = (
                tool_names(world.model.main_requests()[0]) if world.model.main_requests() else []
            )
    return facts


SCENARIOS["others"] = others


# ---- the skills, installed with mcpsubctl skills install -----------------------------------------
SKILL = "pr-review-subscribe"
LOAD_SKILL: dict[str, tuple[str, dict[str, Any]]] = {
    "claude-code": ("Skill", {"skill": SKILL}),
    "codex": ("exec_command", {"cmd": f"cat .agents/skills/{SKILL}/SKILL.md"}),
    "gemini": ("activate_skill", {"name": SKILL}),
}


def skill(cli: str) -> dict[str, Any]:
    """``mcpsubctl skills install CLI --project WORK``, then a one-shot run whose model loads
    ``pr-review-subscribe`` the way the CLI offers skills, and follows its route: ``read``
    (keep the ``eventId`` as the cursor), then ``wait_for_change`` with ``after`` = the
    cursor. Checked: the first request lists the skill, the skill's text reached the model,
    and the change's new text reached the model's next request."""
    world = World()
    mark = marker(0)
    changed: dict[str, float] = {}

    def after(step: int) -> None:
        if step == 2:

            def go() -> None:
                time.sleep(CHANGE_DELAY_S)
                changed["t"] = world.put(f"board: v1\nstate: {mark}")

            threading.Thread(target=go, daemon=True).start()

    name, args = LOAD_SKILL[cli]
    steps: list[dict[str, Any]] = [
        {"tool": name, "exact": name, "args": args},
        {"tool": "read", "args": {"uri": URI}},
        {
            "tool": "wait_for_change",
            "args": {"uri": URI, "after": "{cursor}", "timeoutSeconds": 20},
        },
        {"say": "The review board changed; done."},
    ]
    world.model.script = Script(steps, after)
    with world:
        world.subscribe()
        installed = world.ctl("skills", "install", cli, "--project", str(world.work))
        agent = make_agent(world, cli, Transport())
        agent.allowed = ["Skill", "Read"]
        files = agent.configure()
        ran = agent.run("Wait for the review on the board (test://agents/board), then tell me.")
        mains = world.model.main_requests()
        by_step = {e.step: e for e in mains}
        first = mains[0] if mains else None
        loaded = by_step.get(1)
        final = by_step.get(3)
        return {
            "scenario": "skill",
            "cli": cli,
            "label": agent.label,
            "install": {
                "exit": installed.returncode,
                "output": (installed.stdout + installed.stderr)[-1200:],
            },
            "config": files,
            "run": ran_facts(ran),
            "listedInFirstRequest": bool(first and SKILL in first.raw),
            "listing": said(first.body, SKILL, 400, longest=True) if first else "",
            "skillTextReachedModel": bool(
                loaded and "wait_for_change" in loaded.raw and "Start or identify" in loaded.raw
            ),
            "newContentReachedModel": bool(final and mark in final.raw),
            "latency": round(final.t - changed["t"], 4)
            if final and "t" in changed and mark in final.raw
            else None,
            "modelSaw": said(final.body, mark) if final else "",
        }


SCENARIOS["skill"] = skill
