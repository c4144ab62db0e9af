"""The lab's scenarios for agents started or woken by a change (docs/agents.md, "Start an
agent on a change" and "Wake a session that is open but idle").

* ``agentrun``: a change on the lab server starts ``mcpsubctl agent-run --agent CLI`` (a
  trigger's program, or piped by hand with ``via="pipe"``), which starts the real CLI
  headless; checked: its first model request holds the new text, fenced as server data, and
  with ``session`` it continues an earlier session (the model sees that session's turn).

Each returns a plain dict of facts, as the scenarios of :mod:`bench.agents_lab.scenarios`.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
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


def agent_env(world: World, agent: Agent) -> dict[str, str]:
    """What the agent CLI needs in its environment (its model endpoint and key, the
    telemetry switches): given to the daemon, and passed to the trigger with ``--env``."""
    keep = {k: v for k, v in {**world.env, **agent.extra_env()}.items() if v}
    return {
        k: v
        for k, v in keep.items()
        if k not in ("PATH", "HOME", "LANG") and not k.startswith("MCPSUB_")
    }


def start_triggered_world(cli: str, script: Script) -> tuple[World, Agent, dict[str, str]]:
    """A world whose daemon's environment has what ``cli`` needs, the CLI configured."""
    world = World()
    world.model.script = script
    world.start(daemon=False)
    agent = make_agent(world, cli, Transport())
    files = agent.configure()
    world.env.update(agent_env(world, agent))
    world.start_daemon()
    world.subscribe()
    return world, agent, files


def add_trigger(
    world: World, agent: Agent, cli: str, prompt_file: Path, session: str | None, *flags: str
) -> tuple[int, dict[str, Any]]:
    """``mcpsubctl trigger add --uri URI --agent CLI …`` as docs/agents.md shows it; returns
    (the trigger id, what it stored)."""
    args = ["trigger", "add", "--uri", URI, "--agent", cli, "--prompt-file", str(prompt_file)]
    args += ["--cwd", str(world.work), *flags]
    if session:
        args += ["--session", session]
    for name in sorted(agent_env(world, agent)):
        args += ["--env", name]
    done = world.ctl(*args, "--json", "--", *AGENT_FLAGS[cli])
    if done.returncode != 0:
        raise RuntimeError(f"trigger add: {done.returncode} {done.stdout} {done.stderr}")
    created: dict[str, Any] = json.loads(done.stdout)
    return int(created["id"]), created


def trigger_runs(world: World, trigger_id: int) -> list[dict[str, Any]]:
    done = world.ctl("trigger", "runs", str(trigger_id), "--json", "--limit", "100")
    body = json.loads(done.stdout) if done.returncode == 0 else {}
    runs = body.get("runs", body) if isinstance(body, dict) else body
    return list(runs) if isinstance(runs, list) else []


def agentrun(cli: str, session: bool = False, via: str = "trigger") -> dict[str, Any]:
    """A change on the lab starts the agent: ``via="trigger"``, through ``mcpsubctl trigger
    add --agent CLI`` (the daemon runs ``agent-run``); ``via="pipe"``, ``agent-run`` run by
    hand with the change on stdin."""
    world, agent, files = start_triggered_world(
        cli, Script([{"say": "Reviewed: the board changed."}])
    )
    try:
        prompt_file = world.root / "review.md"
        prompt_file.write_text(PROMPT)
        word = f"WORD-{uuid.uuid4().hex[:8]}"
        sid, first = start_session(agent, cli, word) if session else (None, None)
        stored: dict[str, Any] = {}
        if via == "trigger":
            _, stored = add_trigger(world, agent, cli, prompt_file, sid)
        seq = max((e.seq for e in world.model.log), default=0)
        mark = marker(0)
        text = f"board: v1\nstate: {mark}"
        changed = world.put(text)
        ran: dict[str, Any] = {}
        if via == "pipe":
            world.wait_content(mark)
            args = agent_run_args(world, cli, prompt_file, sid)
            ran = pipe_agent_run(world, agent, args, text)
        hit = world.model.wait_for(lambda e: e.main and e.seq > seq and mark in e.raw, 120)
        return {
            "scenario": "agentrun",
            "cli": cli,
            "label": agent.label,
            "via": via,
            "session": sid,
            "config": files,
            "trigger": {k: stored.get(k) for k in ("program", "args", "env", "cwd")},
            "firstSession": first,
            "run": ran,
            "newTextInFirstRequest": hit is not None,
            "fenced": bool(hit and FENCE in hit.raw),
            "earlierTurnSeen": bool(hit and word in hit.raw),
            "latency": round(hit.t - changed, 3) if hit else None,
            "modelSaw": said(hit.body, mark, 900) if hit else "",
        }
    finally:
        world.stop()


SCENARIOS = {"agentrun": agentrun}


# ---- waking a session that is open but idle ------------------------------------------------
def tail_running(world: World, needle: str) -> bool:
    """A process of this world (its HOME) whose command line holds ``needle`` is running."""
    home = f"HOME={world.home}".encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ")
            if needle.encode() in cmdline and home in (proc / "environ").read_bytes().split(b"\0"):
                return True
        except OSError:
            continue
    return False


def world_processes(world: World) -> list[int]:
    """Processes of this world (its HOME) still running, other than this one."""
    home = f"HOME={world.home}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if home in (proc / "environ").read_bytes().split(b"\0"):
                    found.append(int(proc.name))
            except OSError:
                continue
    return found


def stop_world_processes(world: World) -> list[int]:
    """End what a CLI left running in the background (``codex queue --resume`` starts Codex's
    app-server daemon, which outlives it by design): TERM, then KILL after 5 s."""
    left = world_processes(world)
    for pid in left:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 5
    while world_processes(world) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in world_processes(world):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return left


def wake_claude(way: str = "monitor") -> dict[str, Any]:
    """Claude Code, interactive in a private tmux server, with the plugin ``mcpsubctl plugin
    install claude-code`` writes, loaded with ``--plugin-dir``. ``monitor``: no prompt is ever
    typed; once the monitor's ``mcpsubctl tail`` runs, the lab changes the resource. ``rewake``:
    one prompt is typed; after its turn the Stop hook's ``mcpsubctl wait`` runs, then the
    change. Checked: a model request nobody typed arrives and holds the change."""
    world = World()
    world.model.script = Script([{"say": "Noted."}])
    state: dict[str, Any] = {}
    mark = marker(0)
    with world:
        world.subscribe()
        plugin = world.root / "plugin"
        args = ["plugin", "install", "claude-code", "--dir", str(plugin), "--uri", URI]
        installed = world.ctl(*args, *(["--rewake"] if way == "rewake" else []))
        agent = make_agent(world, "claude-code", Transport())
        files = agent.configure()
        agent.allowed = ["--plugin-dir", str(plugin / "mcpsub")]
        needle = "tail --summary" if way == "monitor" else "wait --uri"
        expect = mark if way == "monitor" else f"{URI} changed"  # rewake: no server text
        sock = str(world.root / "tmux.sock")

        def step() -> bool:
            now = time.time()
            if way == "rewake" and "typed" not in state and now - state.setdefault("t0", now) > 8:
                subprocess.run(["tmux", "-S", sock, "send-keys", "-t", "lab", "Say hello.", "Enter"],
                               capture_output=True, check=False)  # fmt: skip
                state["typed"] = now
            if "changed" not in state:
                if tail_running(world, needle):
                    time.sleep(1.0)  # the stream is open by then (it prints nothing until a change)
                    state["changed"] = world.put(f"board: v1 {mark}\nstate: changed")
                return False
            hit = world.model.wait_for(
                lambda e: e.main and e.t > state["changed"] and expect in e.raw, 0.1
            )
            if hit is not None:
                state["hit"] = hit
            return hit is not None

        ok, screen = agent.run_interactive(step, timeout=90)
        hit = state.get("hit")
        return {
            "scenario": "wake",
            "cli": "claude-code",
            "way": way,
            "label": agent.label,
            "install": (installed.stdout + installed.stderr)[-800:],
            "plugin": {
                str(p.relative_to(plugin)): p.read_text() for p in plugin.rglob("*") if p.is_file()
            },
            "config": files,
            "armed": "changed" in state,
            "woken": ok,
            "typedPrompt": "typed" in state,
            "requestsBeforeChange": len(
                [e for e in world.model.main_requests() if e.t < state.get("changed", 0)]
            ),
            "latency": round(hit.t - state["changed"], 3) if hit else None,
            "modelSaw": said(hit.body, expect, 700) if hit else "",
            "screen": screen[-1500:],
        }


def screen_of(world: World) -> str:
    sock = str(world.root / "tmux.sock")
    done = subprocess.run(["tmux", "-S", sock, "capture-pane", "-p", "-t", "lab"],
                          capture_output=True, text=True, check=False)  # fmt: skip
    return done.stdout


def type_in(world: World, text: str) -> None:
    sock = str(world.root / "tmux.sock")
    subprocess.run(["tmux", "-S", sock, "send-keys", "-t", "lab", "-l", text],
                   capture_output=True, check=False)  # fmt: skip
    time.sleep(0.3)
    subprocess.run(["tmux", "-S", sock, "send-keys", "-t", "lab", "Enter"],
                   capture_output=True, check=False)  # fmt: skip


GEMINI_WAKE_SETTINGS = {
    "experimental": {"modelSteering": True},
    "tools": {"shell": {"backgroundCompletionBehavior": "inject"}},
}


def wake_gemini() -> dict[str, Any]:
    """Gemini CLI, interactive in a private tmux server, with the two settings docs/agents.md
    names. One prompt is typed; the model starts ``mcpsubctl wait`` as a background shell
    command and ends its turn; then the lab changes the resource. Checked: the background
    command's completion starts a model request nobody typed, holding the new text."""
    mark = marker(0)
    wait = (
        f"mcpsubctl wait --uri {URI} --timeout-ms 600000 >/dev/null && echo 'mcpsub: {URI} changed'"
    )
    world = World()
    world.model.script = Script(
        [
            {
                "tool": "run_shell_command",
                "exact": "run_shell_command",
                "args": {
                    "command": wait,
                    "description": "wait for the board",
                    "is_background": True,
                },
            },
            {"say": "Waiting in the background for the board to change."},
        ]
    )
    state: dict[str, Any] = {}
    with world:
        world.subscribe()
        agent = make_agent(world, "gemini", Transport())
        agent.configure()
        path = world.home / ".gemini" / "settings.json"
        settings = json.loads(path.read_text())
        settings.update(GEMINI_WAKE_SETTINGS)
        path.write_text(json.dumps(settings, indent=2))
        argv = [str(NODE_BIN / "gemini"), "--approval-mode", "yolo", "--skip-trust", "-m", MODEL]
        agent.argv = lambda prompt, **_: argv  # type: ignore[method-assign]
        world.env.pop("CI", None)  # Gemini CLI runs headless under CI=true, whatever the tty

        def step() -> bool:
            now = time.time()
            t0 = state.setdefault("t0", now)
            if "typed" not in state:
                if "Type your message" in screen_of(world) or now - t0 > 30:
                    type_in(world, "Wait in the background for the review board to change.")
                    state["typed"] = time.time()
                return False
            if not world.model.main_requests() and now - state.setdefault("enter", now) > 3:
                state["enter"] = now  # a quick Enter after typing can read as part of a paste
                type_in(world, "")
            if "changed" not in state:
                if tail_running(world, "wait --uri") and world.model.wait_for(
                    lambda e: e.main and e.step == 1, 0.05
                ):
                    time.sleep(1.0)
                    state["settled"] = len(world.model.main_requests())
                    state["changed"] = world.put(f"board: v1 {mark}\nstate: changed")
                return False
            hit = world.model.wait_for(
                lambda e: e.main and e.t > state["changed"] and f"{URI} changed" in e.raw, 0.1
            )
            if hit is not None:
                state["hit"] = hit
            return hit is not None

        ok, screen = agent.run_interactive(step, timeout=120)
        hit = state.get("hit")
        return {
            "scenario": "wake",
            "cli": "gemini",
            "way": "background-inject",
            "label": agent.label,
            "settings": GEMINI_WAKE_SETTINGS,
            "command": wait,
            "armed": "changed" in state,
            "woken": ok,
            "latency": round(hit.t - state["changed"], 3) if hit else None,
            "modelSaw": said(hit.body, f"{URI} changed", 900) if hit else "",
            "serverTextSeen": bool(hit and mark in hit.raw),
            "screen": screen[-1500:],
        }


def wake(cli: str = "claude-code", way: str = "monitor") -> dict[str, Any]:
    if cli == "claude-code":
        return wake_claude(way)
    if cli == "gemini":
        return wake_gemini()
    if cli == "codex":
        return wake_codex()
    if cli == "opencode":
        return wake_opencode()
    raise ValueError(f"no wake scenario for {cli}")


SCENARIOS["wake"] = wake


def pipe_agent_run(world: World, agent: Agent, args: list[str], text: str) -> dict[str, Any]:
    """``mcpsubctl agent-run ARGS`` with the change on stdin, as a trigger runs it."""
    netns.require_private()
    started = time.monotonic()
    done = subprocess.run(
        [str(BIN / "mcpsubctl"), *args],
        input=change_json(world, text).decode(),
        cwd=world.work,
        env={**world.env, **agent.extra_env()},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return {
        "argv": ["mcpsubctl", *args],
        "exit": done.returncode,
        "seconds": round(time.monotonic() - started, 2),
        "stdoutTail": done.stdout[-800:],
        "stderrTail": done.stderr[-1500:],
    }


def wake_codex() -> dict[str, Any]:
    """The Codex TUI, interactive in a private tmux server: one prompt is typed and answered,
    so the session is open and idle; then a change, and ``mcpsubctl agent-run --agent codex
    --session THREAD --queue`` (``codex queue --thread … --resume``). Checked: the TUI's
    session makes a model request nobody typed, holding the new text."""
    world = World()
    world.model.script = Script([{"say": "Noted."}])
    mark = marker(0)
    state: dict[str, Any] = {}
    with world:
        world.subscribe()
        agent = make_agent(world, "codex", Transport())
        agent.configure()
        prompt_file = world.root / "review.md"
        prompt_file.write_text(PROMPT)
        argv = [str(NODE_BIN / "codex")]
        agent.argv = lambda prompt, **_: argv  # type: ignore[method-assign]
        world.env.pop("CI", None)

        def step() -> bool:
            now = time.time()
            if "typed" not in state:
                if now - state.setdefault("t0", now) > 8:
                    type_in(world, "Say hello.")
                    state["typed"] = now
                return False
            if not world.model.main_requests():
                if now - state.setdefault("enter", now) > 3:
                    state["enter"] = now
                    type_in(world, "")
                return False
            if "ran" not in state:
                time.sleep(1.0)  # the turn has ended: the session is idle
                found = sorted((world.home / ".codex" / "sessions").rglob("rollout-*.jsonl"))
                match = CODEX_ROLLOUT.search(found[-1].name) if found else None
                thread = match.group(1) if match else ""
                text = f"board: v1\nstate: {mark}"
                state["changed"] = world.put(text)
                world.wait_content(mark)
                args = ["agent-run", "--agent", "codex", "--prompt-file", str(prompt_file),
                        "--session", thread, "--queue"]  # fmt: skip
                state["ran"] = pipe_agent_run(world, agent, args, text)
                return False
            hit = world.model.wait_for(lambda e: e.main and mark in e.raw, 0.1)
            if hit is not None:
                state["hit"] = hit
            return hit is not None or now - state["changed"] > 40

        _ok, screen = agent.run_interactive(step, timeout=120)
        left = stop_world_processes(world)
        hit = state.get("hit")
        return {
            "scenario": "wake",
            "cli": "codex",
            "leftRunning": len(left),
            "way": "codex queue --resume",
            "label": agent.label,
            "run": state.get("ran"),
            "armed": "typed" in state,
            "woken": hit is not None,
            "fenced": bool(hit and FENCE in hit.raw),
            "latency": round(hit.t - state["changed"], 3) if hit else None,
            "modelSaw": said(hit.body, mark, 700) if hit else "",
            "screen": screen[-1500:],
        }


def wake_opencode() -> dict[str, Any]:
    """``opencode serve`` with one session that has answered once and is idle; a change, then
    ``mcpsubctl agent-run --agent opencode --session ID`` (``POST /session/ID/prompt_async``).
    Checked: the server's session makes a model request holding the new text."""
    import httpx

    from bench.agents_lab.world import free_port

    world = World()
    world.model.script = Script([{"say": "Noted."}])
    mark = marker(0)
    with world:
        world.subscribe()
        agent = make_agent(world, "opencode", Transport())
        agent.configure()
        prompt_file = world.root / "review.md"
        prompt_file.write_text(PROMPT)
        port = free_port()
        base = f"http://127.0.0.1:{port}"
        netns.require_private()
        server = subprocess.Popen(
            [str(NODE_BIN / "opencode"), "serve", "--port", str(port), "--hostname", "127.0.0.1"],
            cwd=world.work,
            env=world.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        facts: dict[str, Any] = {"scenario": "wake", "cli": "opencode", "label": agent.label}
        try:
            with httpx.Client(base_url=base, timeout=30, trust_env=False) as http:
                deadline = time.monotonic() + 60
                while True:
                    try:
                        # A short timeout, then again: OpenCode 1.18 never answers the first
                        # request that reaches a server still starting (it waited out a 30 s
                        # timeout in every run); the next one is answered at once.
                        session = http.post("/session", json={}, timeout=3).json()
                        break
                    except httpx.HTTPError:
                        if time.monotonic() > deadline or server.poll() is not None:
                            raise
                        time.sleep(0.2)
                sid = session["id"]
                first = http.post(
                    f"/session/{sid}/message",
                    json={"parts": [{"type": "text", "text": "Say hello."}]},
                    timeout=90,
                )
                facts["firstTurn"] = first.status_code
            before = len(world.model.main_requests())
            text = f"board: v1\nstate: {mark}"
            changed = world.put(text)
            world.wait_content(mark)
            args = ["agent-run", "--agent", "opencode", "--prompt-file", str(prompt_file),
                    "--session", sid, "--opencode-url", base]  # fmt: skip
            facts["run"] = pipe_agent_run(world, agent, args, text)
            hit = world.model.wait_for(lambda e: e.main and mark in e.raw, 60)
            facts.update(
                way="POST /session/{id}/prompt_async",
                session=sid,
                requestsBefore=before,
                woken=hit is not None,
                fenced=bool(hit and FENCE in hit.raw),
                latency=round(hit.t - changed, 3) if hit else None,
                modelSaw=said(hit.body, mark, 700) if hit else "",
            )
        finally:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                _, err = server.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                _, err = server.communicate()
            facts["serverStderrTail"] = (err or "")[-800:]
        return facts


# ---- measured for results/agents.md: a trigger that starts an agent -----------------------
FAST_RETRY = {
    "MCPSUB_TRIGGER_RETRY_BASE_S": "0.5",
    "MCPSUB_TRIGGER_RETRY_CAP_S": "1",
    "MCPSUB_TRIGGER_KILL_GRACE_S": "2",
}
"""Retries within a second, and a short TERM-to-KILL grace, so the bench does not wait out
the defaults (10 s doubling; 5 s)."""


def settled_runs(world: World, trigger_id: int, count: int, timeout: float) -> list[dict[str, Any]]:
    """The trigger's runs once ``count`` of them have finished (succeeded, dead, superseded)."""
    deadline = time.monotonic() + timeout
    while True:
        runs = trigger_runs(world, trigger_id)
        done = [r for r in runs if r.get("state") in ("succeeded", "dead", "superseded")]
        if len(done) >= count or time.monotonic() > deadline:
            return runs
        time.sleep(0.2)


def triggerbench(cli: str, changes: int = 20) -> dict[str, Any]:
    """change → the agent's first model request, over ``changes`` changes one after another
    (each once the previous run has finished: a quiet trigger, process start included)."""
    world, agent, _ = start_triggered_world(cli, Script([{"say": "Reviewed."}]))
    try:
        prompt_file = world.root / "review.md"
        prompt_file.write_text(PROMPT)
        trigger_id, _ = add_trigger(world, agent, cli, prompt_file, None)
        latencies: list[float | None] = []
        for i in range(changes):
            mark = marker(i)
            changed = world.put(f"board: v{i + 1}\nstate: {mark}")
            hit = world.model.wait_for(lambda e, m=mark: e.main and m in e.raw, 120)
            latencies.append(round(hit.t - changed, 3) if hit else None)
            settled_runs(world, trigger_id, i + 1, 120)
        runs = trigger_runs(world, trigger_id)
        return {
            "scenario": "triggerbench",
            "cli": cli,
            "label": agent.label,
            "changes": changes,
            "latencies": latencies,
            "runs": len(runs),
            "succeeded": sum(r.get("state") == "succeeded" for r in runs),
        }
    finally:
        world.stop()


def burst(cli: str = "claude-code", changes: int = 10) -> dict[str, Any]:
    """``--mode latest``: ``changes`` changes within one second; counted: the runs that
    reached the model and which change each carried (the last must be the newest)."""
    world, agent, _ = start_triggered_world(cli, Script([{"say": "Reviewed."}]))
    try:
        prompt_file = world.root / "review.md"
        prompt_file.write_text(PROMPT)
        trigger_id, _ = add_trigger(world, agent, cli, prompt_file, None, "--mode", "latest")
        marks = [marker(i) for i in range(changes)]
        import httpx

        assert world.lab is not None
        with httpx.Client(base_url=world.lab.base_url, timeout=10, trust_env=False) as http:
            started = time.monotonic()
            for i, mark in enumerate(marks):
                text = f"board: v{i + 1}\nstate: {mark}"
                http.put("/lab/resources", json={"uri": URI, "text": text}).raise_for_status()
                time.sleep(max(0.0, started + (i + 1) * (0.9 / changes) - time.monotonic()))
            spread = time.monotonic() - started
        world.wait_content(marks[-1])
        time.sleep(2.0)  # let the daemon store and queue every revision
        runs = settled_runs(world, trigger_id, 1, 180)
        while any(r.get("state") in ("pending", "running", "failed") for r in runs):
            time.sleep(0.5)
            runs = trigger_runs(world, trigger_id)
        mains = world.model.main_requests()
        # the newest change a request holds (its diff also shows the one before)
        carried = [max((i for i, m in enumerate(marks) if m in e.raw), default=None) for e in mains]
        return {
            "scenario": "burst",
            "cli": cli,
            "label": agent.label,
            "changes": changes,
            "spreadSeconds": round(spread, 2),
            "runStates": [r.get("state") for r in runs],
            "agentRuns": len(mains),
            "changeEachRunCarried": carried,
            "lastIsNewest": bool(carried) and carried[-1] == changes - 1,
        }
    finally:
        world.stop()


def hang(cli: str = "claude-code", timeout_s: int = 15) -> dict[str, Any]:
    """The model never answers the first run's request: the trigger's timeout must end the
    agent (its process group) and the retry must reach the model again with the change."""
    first: dict[str, Any] = {}
    release = __import__("threading").Event()

    def hold(entry: Any) -> None:
        if not first:
            first["t"] = entry.t
            release.wait(timeout_s * 4)  # answers only when the bench ends

    world = World()
    world.model.script = Script([{"say": "Reviewed."}], before_main=hold)
    world.start(daemon=False)
    try:
        agent = make_agent(world, cli, Transport())
        agent.configure()
        world.env.update(agent_env(world, agent))
        world.env.update(FAST_RETRY)
        world.start_daemon()
        world.subscribe()
        prompt_file = world.root / "review.md"
        prompt_file.write_text(PROMPT)
        trigger_id, _ = add_trigger(
            world, agent, cli, prompt_file, None, "--timeout", str(timeout_s)
        )
        mark = marker(0)
        world.put(f"board: v1\nstate: {mark}")
        hits = []
        deadline = time.monotonic() + timeout_s * 4 + 60
        while len(hits) < 2 and time.monotonic() < deadline:
            hits = [e for e in world.model.main_requests() if mark in e.raw]
            time.sleep(0.2)
        runs = settled_runs(world, trigger_id, 1, 60)
        shown = world.ctl("trigger", "run", str(runs[0]["id"]), "--json") if runs else None
        attempts = (
            json.loads(shown.stdout).get("attempts", []) if shown and shown.returncode == 0 else []
        )
        return {
            "scenario": "hang",
            "cli": cli,
            "label": agent.label,
            "timeoutS": timeout_s,
            "requestsWithChange": len(hits),
            "retryAfterS": round(hits[1].t - hits[0].t, 2) if len(hits) > 1 else None,
            "run": {k: runs[0].get(k) for k in ("state", "attempts", "lastExit", "lastSignal")}
            if runs
            else None,
            "attempts": [
                {k: a.get(k) for k in ("attempt", "exitCode", "signal", "timedOut", "durationMs")}
                for a in attempts
            ],
        }
    finally:
        release.set()
        world.stop()


def kill9(cli: str = "claude-code") -> dict[str, Any]:
    """``kill -9`` of the daemon while a run's agent waits for the model: after a restart the
    change must be run again (a second request carrying it), none lost."""
    first: dict[str, Any] = {}
    release = __import__("threading").Event()

    def hold(entry: Any) -> None:
        if not first:
            first["t"] = entry.t
            release.wait(120)

    world = World()
    world.model.script = Script([{"say": "Reviewed."}], before_main=hold)
    world.start(daemon=False)
    try:
        agent = make_agent(world, cli, Transport())
        agent.configure()
        world.env.update(agent_env(world, agent))
        world.env.update(FAST_RETRY)
        world.start_daemon()
        world.subscribe()
        prompt_file = world.root / "review.md"
        prompt_file.write_text(PROMPT)
        trigger_id, _ = add_trigger(world, agent, cli, prompt_file, None)
        mark = marker(0)
        world.put(f"board: v1\nstate: {mark}")
        got = world.model.wait_for(lambda e: e.main and mark in e.raw, 120)
        daemon = world.daemon
        assert daemon is not None and daemon.proc is not None
        killed_at = time.time()
        os.kill(daemon.proc.pid, signal.SIGKILL)  # mid-run: the agent waits for the model
        daemon.proc.wait(30)
        world.children.stop(daemon)  # already gone: only forgotten
        world.start_daemon()
        again = world.model.wait_for(lambda e: e.main and mark in e.raw and e.t > killed_at, 180)
        release.set()
        runs = settled_runs(world, trigger_id, 1, 120)
        return {
            "scenario": "kill9",
            "cli": cli,
            "label": agent.label,
            "firstRequest": got is not None,
            "runAgainAfterRestart": again is not None,
            "againAfterS": round(again.t - killed_at, 2) if again else None,
            "runs": [{k: r.get(k) for k in ("state", "attempts")} for r in runs],
        }
    finally:
        release.set()
        world.stop()


SCENARIOS.update({"triggerbench": triggerbench, "burst": burst, "hang": hang, "kill9": kill9})


# ---- the report: its own block of results/agents.md ----------------------------------------
def _block() -> tuple[str, str]:
    from bench.agents_lab.report import BLOCKS

    return BLOCKS[1]


TRIGGER_TARGET_S = 2.0
CLIS = ("claude-code", "codex", "gemini")


def collect(changes: int) -> dict[str, Any]:
    from bench.agents_lab.report import attempt

    errors: list[str] = []
    out: dict[str, Any] = {"errors": errors}
    out["wake"] = {
        "claude-code monitor": attempt(
            errors, "wake claude monitor", lambda: wake("claude-code", "monitor")
        ),
        "claude-code rewake": attempt(
            errors, "wake claude rewake", lambda: wake("claude-code", "rewake")
        ),
        "gemini": attempt(errors, "wake gemini", lambda: wake("gemini")),
        "codex": attempt(errors, "wake codex", lambda: wake("codex")),
        "opencode": attempt(errors, "wake opencode", lambda: wake("opencode")),
    }
    out["session"] = {
        cli: attempt(errors, f"agentrun {cli}", lambda c=cli: agentrun(c, session=True))
        for cli in CLIS
    }
    out["latency"] = {
        cli: attempt(errors, f"triggerbench {cli}", lambda c=cli: triggerbench(c, changes))
        for cli in CLIS
    }
    out["burst"] = attempt(errors, "burst", lambda: burst())
    out["hang"] = attempt(errors, "hang", lambda: hang())
    out["kill9"] = attempt(errors, "kill9", lambda: kill9())
    return out


def _s(value: float | None) -> str:
    return f"{value:.2f} s" if isinstance(value, int | float) else "–"


def render(data: dict[str, Any], meta: str) -> str:
    from bench.harness import markdown_table, percentile

    lines = ["## Agents started or woken by a change", "", meta, ""]
    lines += [
        "### Wake a session that is open but idle",
        "",
        "Each CLI interactive in a private tmux server (OpenCode: `opencode serve`), the "
        "recipe of docs/agents.md; change → the first model request nobody typed.",
        "",
    ]
    ways = {
        "claude-code monitor": (
            "Claude Code 2.1.328",
            "plugin monitor `mcpsubctl tail --summary` (`when: always`); no prompt ever typed",
        ),
        "claude-code rewake": (
            "Claude Code 2.1.328",
            "plugin `Stop` hook, `asyncRewake`, `mcpsubctl wait` exits 2",
        ),
        "gemini": (
            "Gemini CLI 0.61.0",
            "`modelSteering` + `backgroundCompletionBehavior: inject`, a background `mcpsubctl wait`",
        ),
        "codex": (
            "Codex 0.169.0",
            "`agent-run --queue`: `codex queue --thread … --resume` into the open TUI session",
        ),
        "opencode": (
            "OpenCode 1.18.33",
            "`agent-run --agent opencode`: `POST /session/ID/prompt_async`",
        ),
    }
    rows = []
    for key, (label, way) in ways.items():
        facts = data["wake"].get(key, {})
        woken = "error" if "error" in facts else ("yes" if facts.get("woken") else "no")
        rows.append([label, way, woken, _s(facts.get("latency"))])
    lines += markdown_table(
        ["CLI", "path", "idle session woken", "change → model request"], rows, "llrr"
    )
    lines += [
        "",
        "### Start an agent on a change (`mcpsubctl trigger add --agent`)",
        "",
        "A trigger per CLI, as docs/agents.md shows it; each change is made once the previous "
        "run has finished (a quiet trigger), so each figure includes the daemon's run start, "
        "`agent-run` and the CLI's own start-up. Target p99 ≤ 2 s.",
        "",
    ]
    rows = []
    for cli in CLIS:
        facts = data["latency"].get(cli, {})
        session = data["session"].get(cli, {})
        if "error" in facts:
            rows.append([cli, "error", "–", "–", "–", "–"])
            continue
        lat = [v for v in facts["latencies"] if v is not None]
        p99 = percentile(lat, 99) if lat else None
        rows.append(
            [
                facts.get("label", cli),
                f"{len(lat)} / {facts['changes']}",
                _s(percentile(lat, 50) if lat else None),
                _s(p99),
                "met" if p99 is not None and p99 <= TRIGGER_TARGET_S else "missed",
                "yes"
                if session.get("earlierTurnSeen") and session.get("newTextInFirstRequest")
                else "no",
            ]
        )
    lines += markdown_table(
        ["CLI", "changes seen", "p50", "p99", "≤ 2 s", "--session: earlier turn + new text"],
        rows,
        "lrrrrr",
    )
    b, h, k = data["burst"], data["hang"], data["kill9"]
    lines += ["", "With Claude Code:", ""]
    if "error" not in b:
        lines.append(
            f"* **Burst, `--mode latest`**: {b['changes']} changes in {b['spreadSeconds']} s → "
            f"{b['agentRuns']} agent runs (states: {', '.join(sorted(set(b['runStates'])))}), "
            f"carrying changes {b['changeEachRunCarried']} (0-based); the last the newest: "
            f"{'yes' if b['lastIsNewest'] else 'no'}."
        )
    if "error" not in h:
        first = h["attempts"][0] if h["attempts"] else {}
        lines.append(
            f"* **A run that hangs** (the model never answers): attempt 1 ended at its "
            f"{h['timeoutS']} s timeout (timedOut {first.get('timedOut')}, exit "
            f"{first.get('exitCode')}, {first.get('durationMs')} ms); the retry reached the "
            f"model {h['retryAfterS']} s after the first request; the run: "
            f"{(h['run'] or {}).get('state')} after {(h['run'] or {}).get('attempts')} attempts."
        )
    if "error" not in k:
        lines.append(
            f"* **`kill -9` of the daemon mid-run**: the change reached the model again "
            f"{k['againAfterS']} s after the kill (daemon restarted at once): "
            f"{'yes' if k['runAgainAfterRestart'] else 'no'}; the run: "
            + ", ".join(f"{r['state']} after {r['attempts']} attempts" for r in k["runs"])
            + "."
        )
    if data["errors"]:
        lines += ["", "Errors: " + "; ".join(data["errors"])]
    return "\n".join(lines) + "\n"


def main(
    changes: int,
    out_dir: Path,
    note: str = "",
    dump: Path | None = None,
    load: Path | None = None,
) -> int:
    """Run everything (or, ``load``, re-render a run saved with ``dump``) into ``out_dir``."""
    import datetime
    import platform

    from bench.agents_lab.report import node_version
    from bench.harness import REPO_ROOT, load_average

    if load is not None:
        saved = json.loads(load.read_text())
        write_block(out_dir, saved["data"], saved["meta"])
        return 0
    started = datetime.datetime.now(datetime.UTC)
    load_before = load_average()
    data = collect(changes)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=REPO_ROOT, check=False).stdout.strip()  # fmt: skip
    meta = (
        f"Generated by `make agents-lab` (`python -m bench.agents_lab triggers`, "
        f"bench/agents_lab/triggered.py) on {started:%Y-%m-%d %H:%M} UTC (`{commit}`), "
        f"{changes} changes per CLI; Python {platform.python_version()}, node "
        f"{node_version()}; load average {load_before} → {load_average()} (a shared 2-core "
        f"machine). {note}".strip()
    )
    if dump is not None:
        dump.write_text(json.dumps({"meta": meta, "data": data}, indent=1, default=str))
    write_block(out_dir, data, meta)
    return 0


def write_block(out_dir: Path, data: dict[str, Any], meta: str) -> None:
    BLOCK_START, BLOCK_END = _block()
    path = out_dir / "agents.md"
    old = path.read_text(encoding="utf-8") if path.exists() else ""
    body = f"{BLOCK_START}\n{render(data, meta).strip()}\n{BLOCK_END}"
    if BLOCK_START in old and BLOCK_END in old:
        new = old[: old.index(BLOCK_START)] + body + old[old.index(BLOCK_END) + len(BLOCK_END) :]
    else:
        new = old.rstrip("\n") + "\n\n" + body + "\n"
    path.write_text(new, encoding="utf-8")
    print(f"agents-lab: wrote {path}")
