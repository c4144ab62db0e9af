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
import threading
import time
from collections.abc import Callable
from typing import Any

from bench.agents_lab.clis import AGENTS, Agent, Ran, Transport
from bench.agents_lab.model import Logged, Script
from bench.agents_lab.world import URI, World

CHANGE_DELAY_S = 0.5
"""How long after the model asked for ``wait_for_change`` the lab changes the resource: the
CLI has started the call by then (a CLI dispatches a tool call in tens of milliseconds)."""
WAIT_TIMEOUT_S = 20
EXCERPT = 600


def marker(i: int) -> str:
    return f"MARKER-{i:03d}-{int(time.time() * 1000) % 100000:05d}"


def said(body: Any, needle: str, width: int = EXCERPT) -> str:
    """The last string in a request body that holds ``needle`` (a tool result, a hook's
    context): what the model read, cut to ``width`` characters around it."""
    found = ""
    stack = [body]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if needle in value:
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
        steps[0]["args"]["after"] = str(world.last_event_id())
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
