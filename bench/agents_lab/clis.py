"""How the lab drives each pinned agent CLI headless: its config files, argv and environment.

Each :class:`Agent` writes the config a user would write (the same shapes docs/agents.md
shows), pointed at the world's scripted model, and runs the CLI one-shot in the world's
workspace. :meth:`Agent.run` refuses to start a CLI outside a loopback-only network
namespace.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from bench.agents_lab import netns
from bench.agents_lab.world import NODE_BIN, SERVER_NAME, World

RUN_TIMEOUT_S = 120.0
MODEL = "scripted-model"
API_KEY = "sk-lab-scripted-model-key"


@dataclass
class Transport:
    """How the agent reaches mcpsub: ``stdio`` (``mcpsubctl mcp``) or ``http`` (``/mcp``)."""

    kind: str = "stdio"
    url: str = ""
    token: str = ""
    channel: bool = False
    server: str = SERVER_NAME
    """The name the CLI's config gives the MCP server."""

    def stdio_args(self) -> list[str]:
        return ["mcp", "--channel"] if self.channel else ["mcp"]


@dataclass
class Ran:
    argv: list[str]
    code: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False


@dataclass
class Agent:
    world: World
    transport: Transport = field(default_factory=Transport)
    hooks: bool = False
    allowed: list[str] = field(default_factory=list)
    """More tools the CLI may run without asking (Claude Code's ``--allowedTools`` rules)."""
    name: ClassVar[str] = ""
    binary: ClassVar[str] = ""
    label: ClassVar[str] = ""

    # ---- to override ----------------------------------------------------------------------
    def configure(self) -> dict[str, str]:
        """Write the config files; return the files written (path → text) for the report."""
        raise NotImplementedError

    def argv(self, prompt: str, *, resume: bool = False, interactive: bool = False) -> list[str]:
        raise NotImplementedError

    def extra_env(self) -> dict[str, str]:
        return {}

    # ---- shared ---------------------------------------------------------------------------
    @property
    def home(self) -> Path:
        return self.world.home

    def write(self, path: Path, text: str) -> tuple[str, str]:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        return str(path.relative_to(self.world.root)), text

    def hook_command(self) -> str:
        return f"mcpsubctl hook {self.name}"

    def start(self, prompt: str, *, resume: bool = False) -> subprocess.Popen[str]:
        """Start the CLI one-shot in its own process group (see :meth:`finish`)."""
        netns.require_private()
        return subprocess.Popen(
            self.argv(prompt, resume=resume),
            cwd=self.world.work,
            env={**self.world.env, **self.extra_env()},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def finish(
        self, proc: subprocess.Popen[str], started: float, timeout: float, *, stop: bool = False
    ) -> Ran:
        """Wait for the CLI (or, ``stop``, end it now); past ``timeout`` its process group is
        killed."""
        if stop and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, err = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, err = proc.communicate()
            timed_out = True
        return Ran(
            [str(a) for a in proc.args],
            proc.returncode,
            out,
            err,
            time.monotonic() - started,
            timed_out,
        )  # type: ignore[union-attr]

    def run(self, prompt: str, *, resume: bool = False, timeout: float = RUN_TIMEOUT_S) -> Ran:
        started = time.monotonic()
        return self.finish(self.start(prompt, resume=resume), started, timeout)

    def run_interactive(
        self, done: Callable[[], bool], *, timeout: float = RUN_TIMEOUT_S
    ) -> tuple[bool, str]:
        """Start the CLI interactively in a private tmux server (a real terminal) and keep it
        until ``done()`` holds or ``timeout`` passes; returns (done, the last screen)."""
        netns.require_private()
        argv = self.argv("", interactive=True)
        env = {**self.world.env, **self.extra_env()}
        sock, workdir = str(self.world.root / "tmux.sock"), str(self.world.work)
        tmux = ["tmux", "-S", sock]
        command = shlex.join(["env", "-i", *(f"{k}={v}" for k, v in env.items()), *argv])
        subprocess.run(
            [
                *tmux,
                "new-session",
                "-d",
                "-s",
                "lab",
                "-x",
                "160",
                "-y",
                "45",
                "-c",
                workdir,
                command,
            ],
            check=True,
            timeout=30,
        )
        shown = subprocess.run(
            [*tmux, "display-message", "-p", "-t", "lab", "#{pane_pid}"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.strip()
        deadline = time.monotonic() + timeout
        ok = False
        try:
            while time.monotonic() < deadline and not (ok := done()):
                time.sleep(0.2)
            screen = subprocess.run(
                [*tmux, "capture-pane", "-p", "-t", "lab"], capture_output=True, text=True
            ).stdout
        finally:
            subprocess.run([*tmux, "kill-server"], capture_output=True, check=False)
            if shown.isdigit():
                end_session(int(shown))
        return ok, "\n".join(line.rstrip() for line in screen.splitlines() if line.strip())


def end_session(sid: int, grace_s: float = 3.0) -> None:
    """Kill what is left of the terminal session ``sid`` (the tmux pane's process leads it).

    tmux's kill-server only hangs up the pane: a CLI that ignores SIGHUP, the copy of itself
    it re-executed, and the MCP servers and background commands it started outlive it, in
    the pane's session; a test must leave none of them running."""

    def members() -> list[int]:
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[3]) == sid and fields[0] != "Z":  # the session id, not a zombie
                found.append(int(entry))
        return found

    for signum in (signal.SIGTERM, signal.SIGKILL):
        pids = members()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)
        stop = time.monotonic() + grace_s
        while pids and time.monotonic() < stop:
            time.sleep(0.05)
            pids = members()
        if not pids:
            return


class Claude(Agent):
    name = "claude-code"
    binary = "claude"
    label = "Claude Code 2.1.328"

    def server_entry(self) -> dict[str, Any]:
        t = self.transport
        if t.kind == "http":
            entry: dict[str, Any] = {"type": "http", "url": t.url}
            if t.token:
                entry["headers"] = {"Authorization": f"Bearer {t.token}"}
            return entry
        return {"command": "mcpsubctl", "args": t.stdio_args()}

    def configure(self) -> dict[str, str]:
        files: dict[str, str] = {}
        servers = {"mcpServers": {self.transport.server: self.server_entry()}}
        files.update([self.write(self.world.work / ".mcp.json", json.dumps(servers))])
        settings: dict[str, Any] = {"enableAllProjectMcpServers": True}
        if self.hooks:
            hook = [{"hooks": [{"type": "command", "command": self.hook_command(), "timeout": 5}]}]
            settings["hooks"] = {"SessionStart": hook, "UserPromptSubmit": hook}
        settings_path = self.world.work / ".claude" / "settings.json"
        files.update([self.write(settings_path, json.dumps(settings, indent=2))])
        # what a person's first interactive start records (onboarding done, this API key
        # approved, this folder trusted), so an interactive run starts at the prompt
        state = {
            "hasCompletedOnboarding": True,
            "theme": "dark",
            "customApiKeyResponses": {"approved": [API_KEY[-20:]], "rejected": []},
            "projects": {str(self.world.work): {"hasTrustDialogAccepted": True}},
        }
        self.write(self.home / ".claude.json", json.dumps(state))
        return files

    def extra_env(self) -> dict[str, str]:
        return {"ANTHROPIC_BASE_URL": self.world.model.url, "ANTHROPIC_API_KEY": API_KEY}

    def argv(self, prompt: str, *, resume: bool = False, interactive: bool = False) -> list[str]:
        argv = [str(NODE_BIN / "claude"), *([] if interactive else ["-p", prompt])]
        argv += ["--model", MODEL]
        argv += [
            "--mcp-config",
            str(self.world.work / ".mcp.json"),
            "--allowedTools",
            f"mcp__{self.transport.server}",
            *self.allowed,
        ]
        if self.transport.channel:
            flag = getattr(self, "channel_flag", "development")
            if flag == "channels":
                argv += ["--channels", f"server:{SERVER_NAME}"]
            else:
                argv += ["--dangerously-load-development-channels", f"server:{SERVER_NAME}"]
            argv += ["--debug"]
        if resume:
            argv += ["--continue"]
        return argv


class Codex(Agent):
    name = "codex"
    binary = "codex"
    label = "Codex 0.169.0"

    def configure(self) -> dict[str, str]:
        t = self.transport
        lines = [
            f'model = "{MODEL}"',
            'model_provider = "lab"',
            'approval_policy = "never"',
            'sandbox_mode = "workspace-write"',
            "check_for_update_on_startup = false",
            "",
            "[analytics]",
            "enabled = false",
            "",
            "[model_providers.lab]",
            'name = "lab"',
            f'base_url = "{self.world.model.url}/v1"',
            'wire_api = "responses"',
            "supports_websockets = false",
            'env_key = "LAB_MODEL_KEY"',
            "",
            f"[mcp_servers.{t.server}]",
        ]
        if t.kind == "http":
            lines.append(f'url = "{t.url}"')
            if t.token:
                lines.append('bearer_token_env_var = "MCPSUB_LAB_TOKEN"')
        else:
            lines += ['command = "mcpsubctl"', f"args = {json.dumps(t.stdio_args())}"]
        lines += ["tool_timeout_sec = 60", ""]
        files = dict([self.write(self.home / ".codex" / "config.toml", "\n".join(lines))])
        if self.hooks:
            hook = [{"hooks": [{"type": "command", "command": self.hook_command(), "timeout": 5}]}]
            hooks = {"hooks": {"SessionStart": hook, "UserPromptSubmit": hook}}
            files.update(
                [self.write(self.home / ".codex" / "hooks.json", json.dumps(hooks, indent=2))]
            )
        return files

    def extra_env(self) -> dict[str, str]:
        return {"LAB_MODEL_KEY": "sk-lab-scripted", "MCPSUB_LAB_TOKEN": self.transport.token}

    def argv(self, prompt: str, *, resume: bool = False, interactive: bool = False) -> list[str]:
        argv = [str(NODE_BIN / "codex"), "exec"]
        if resume:
            argv += ["resume", "--last"]
        argv += ["--skip-git-repo-check"]
        if self.hooks:
            argv += ["--dangerously-bypass-hook-trust"]
        return [*argv, prompt]


class Gemini(Agent):
    name = "gemini"
    binary = "gemini"
    label = "Gemini CLI 0.61.0"

    def server_entry(self) -> dict[str, Any]:
        t = self.transport
        if t.kind == "http":
            return {
                "httpUrl": t.url,
                "headers": {"Authorization": f"Bearer {t.token}"},
                "timeout": 600000,
            }
        return {"command": "mcpsubctl", "args": t.stdio_args(), "timeout": 600000}

    def configure(self) -> dict[str, str]:
        settings: dict[str, Any] = {
            "security": {"auth": {"selectedType": "gemini-api-key"}},
            "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "mcpServers": {self.transport.server: self.server_entry()},
        }
        if self.hooks:
            hook = [
                {"hooks": [{"type": "command", "command": self.hook_command(), "timeout": 5000}]}
            ]
            settings["hooks"] = {"SessionStart": hook, "BeforeAgent": hook}
        return dict(
            [self.write(self.home / ".gemini" / "settings.json", json.dumps(settings, indent=2))]
        )

    def extra_env(self) -> dict[str, str]:
        return {"GOOGLE_GEMINI_BASE_URL": self.world.model.url, "GEMINI_API_KEY": "lab-scripted"}

    def argv(self, prompt: str, *, resume: bool = False) -> list[str]:
        argv = [
            str(NODE_BIN / "gemini"),
            "-p",
            prompt,
            "--approval-mode",
            "yolo",
            "--skip-trust",
            "-m",
            MODEL,
        ]
        if resume:
            argv += ["--resume", "latest"]
        return argv


class OpenCode(Agent):
    """OpenCode with its bundled Anthropic provider pointed at the scripted model (no
    provider package to fetch); it has no prompt hooks."""

    name = "opencode"
    binary = "opencode"
    label = "OpenCode 1.18.33"

    def configure(self) -> dict[str, str]:
        t = self.transport
        entry: dict[str, Any]
        if t.kind == "http":
            entry = {"type": "remote", "url": t.url}
            if t.token:
                entry["headers"] = {"Authorization": f"Bearer {t.token}"}
        else:
            entry = {"type": "local", "command": ["mcpsubctl", *t.stdio_args()]}
        config = {
            "$schema": "https://opencode.ai/config.json",
            "mcp": {t.server: entry},
            "provider": {
                "anthropic": {
                    "options": {"baseURL": f"{self.world.model.url}/v1", "apiKey": API_KEY}
                }
            },
            "model": "anthropic/claude-sonnet-4-5",
            "autoupdate": False,
            "share": "disabled",
        }
        return dict([self.write(self.world.work / "opencode.json", json.dumps(config, indent=2))])

    def argv(self, prompt: str, *, resume: bool = False, interactive: bool = False) -> list[str]:
        argv = [str(NODE_BIN / "opencode"), "run"]
        if resume:
            argv.append("--continue")
        return [*argv, prompt]


AGENTS: dict[str, type[Agent]] = {a.name: a for a in (Claude, Codex, Gemini, OpenCode)}
