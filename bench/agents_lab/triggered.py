"""The lab's scenarios for agents started or woken by a change (docs/agents.md, "Start an
agent on a change" and "Wake a session that is open but idle").

* ``agentrun``: a change on the lab server starts ``mcpsubctl agent-run --agent CLI`` (a
  trigger's program, or piped by hand with ``via="pipe"``), which starts the real CLI
  headless; checked: its first model request holds the new text, fenced as server data, and
  with ``session`` it continues an earlier session (the model sees that session's turn).

Each returns a plain dict of facts, as the scenarios of :mod:`bench.agents_lab.scenarios`.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from bench.agents_lab import netns
from bench.agents_lab.clis import MODEL, Agent, Transport
from bench.agents_lab.model import Script
from bench.agents_lab.scenarios import make_agent, marker, said
from bench.agents_lab.world import NODE_BIN, URI, World
from bench.harness import BIN

AGENT_FLAGS: dict[str, list[str]] = {
    # what each CLI needs in the lab besides agent-run's own flags (docs/agents.md says why)
    "claude-code": ["--model", MODEL],
    "codex": ["--skip-git-repo-check"],
    "gemini": ["--approval-mode", "yolo", "--skip-trust", "-m", MODEL],
}
PROMPT = "A change to the review board arrived. Summarise it in one line.\n"
FENCE = "----- BEGIN SERVER DATA "
CODEX_ROLLOUT = re.compile(
    r"rollout-.*-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\.jsonl$"
)


def start_session(agent: Agent, cli: str, word: str) -> tuple[str, Any]:
    """A first one-shot run that says ``word``; returns (its session id, its facts)."""
    prompt = f"Remember the code word {word}."
    argv = agent.argv(prompt)
    sid = str(uuid.uuid4())
    if cli in ("claude-code", "gemini"):
        argv += ["--session-id", sid]
    netns.require_private()
    started = time.monotonic()
    done = subprocess.run(
        argv,
        cwd=agent.world.work,
        env={**agent.world.env, **agent.extra_env()},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    facts = {
        "argv": [*argv[:1], "…"],
        "exit": done.returncode,
        "seconds": round(time.monotonic() - started, 2),
        "stderrTail": done.stderr[-1500:],
    }
    if cli == "codex":
        found = sorted(
            (agent.home / ".codex" / "sessions").rglob("rollout-*.jsonl"),
            key=lambda p: p.stat().st_mtime,
        )
        match = CODEX_ROLLOUT.search(found[-1].name) if found else None
        sid = match.group(1) if match else ""
    return sid, facts


def change_json(world: World, text: str) -> bytes:
    """The change as a trigger's stdin carries it (a webhook body), for ``via="pipe"``."""
    done = world.ctl("list", "--json")
    sub = json.loads(done.stdout)["subscriptions"][0]
    return json.dumps(
        {
            "type": "resource.updated",
            "eventId": world.last_event_id(),
            "server": sub["serverUrl"],
            "uri": URI,
            "revision": sub["revision"],
            "contents": [{"uri": URI, "mimeType": "text/plain", "text": text}],
        }
    ).encode()


def agent_run_args(world: World, cli: str, prompt_file: Path, session: str | None) -> list[str]:
    args = ["agent-run", "--agent", cli, "--prompt-file", str(prompt_file)]
    if session:
        args += ["--session", session]
    return [*args, "--", *AGENT_FLAGS[cli]]


def agentrun(cli: str, session: bool = False, via: str = "pipe") -> dict[str, Any]:
    world = World()
    world.model.script = Script([{"say": "Reviewed: the board changed."}])
    with world:
        world.subscribe()
        agent = make_agent(world, cli, Transport())
        files = agent.configure()
        prompt_file = world.root / "review.md"
        prompt_file.write_text(PROMPT)
        word = f"WORD-{uuid.uuid4().hex[:8]}"
        sid, first = start_session(agent, cli, word) if session else (None, None)
        seq = max((e.seq for e in world.model.log), default=0)
        mark = marker(0)
        text = f"board: v1\nstate: {mark}"
        changed = world.put(text)
        args = agent_run_args(world, cli, prompt_file, sid)
        ran: dict[str, Any] = {}
        if via == "pipe":
            world.wait_content(mark)
            netns.require_private()
            started = time.monotonic()
            done = subprocess.run(
                [str(BIN / "mcpsubctl"), *args],
                input=change_json(world, text).decode(),
                cwd=world.work,
                env={**world.env, **agent.extra_env()},
                capture_output=True,
                text=True,
                timeout=180,
                check=False,
            )
            ran = {
                "exit": done.returncode,
                "seconds": round(time.monotonic() - started, 2),
                "stdoutTail": done.stdout[-800:],
                "stderrTail": done.stderr[-1500:],
            }
        hit = world.model.wait_for(lambda e: e.main and e.seq > seq and mark in e.raw, 120)
        return {
            "scenario": "agentrun",
            "cli": cli,
            "label": agent.label,
            "via": via,
            "session": sid,
            "config": files,
            "argv": ["mcpsubctl", *args],
            "firstSession": first,
            "run": ran,
            "newTextInFirstRequest": hit is not None,
            "fenced": bool(hit and FENCE in hit.raw),
            "earlierTurnSeen": bool(hit and word in hit.raw),
            "latency": round(hit.t - changed, 3) if hit else None,
            "modelSaw": said(hit.body, mark, 900) if hit else "",
            "nodeBin": str(NODE_BIN),
        }


SCENARIOS = {"agentrun": agentrun}
