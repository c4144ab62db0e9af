"""docs/agents.md's snippets: every JSON, TOML and YAML block parses, and each block marked
``<!-- check: AGENT KIND -->`` has the shape that agent documents (MCP server entries run
``mcpsubctl mcp``; hook configs run ``mcpsubctl hook AGENT`` on events that agent lets add
context; hook output matches the agent's output schema). Its shell blocks run in
tests/demo/test_docs.py."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from typing import Any

import pytest
import yaml

from cli.agent_hook import AGENTS, CONTEXT_EVENTS
from tests.support.cli import REPO_ROOT
from tests.unit.cli.test_agent_hook import assert_documented_shape

DOC = (REPO_ROOT / "docs" / "agents.md").read_text()
FENCE = re.compile(r"(?:<!-- check: ([\w-]+) ([\w+-]+) -->\n)?^```(\w*)\n(.*?)^```", re.S | re.M)
PARSERS = {"json": json.loads, "toml": tomllib.loads, "yaml": yaml.safe_load}
CLIENTS = {"claude-code", "codex", "gemini", "goose", "opencode", "vscode", "cursor"}


def blocks() -> list[tuple[str | None, str | None, str, str]]:
    return [(m.group(1), m.group(2), m.group(3), m.group(4)) for m in FENCE.finditer(DOC)]


def checked() -> dict[tuple[str, str], Any]:
    found = {}
    for client, kind, lang, body in blocks():
        if client is not None and kind is not None:
            found[(client, kind)] = PARSERS[lang](body)
    return found


def test_every_config_block_parses() -> None:
    langs = [lang for *_, lang, _ in blocks()]
    assert {"json", "toml", "yaml"} <= set(langs)
    for *_, lang, body in blocks():
        if lang in PARSERS:
            PARSERS[lang](body)  # raises on a typo


def test_every_client_has_its_mcp_config() -> None:
    found = checked()
    assert {client for client, kind in found if "mcp" in kind} == CLIENTS
    for (client, kind), config in found.items():
        if "mcp" not in kind:
            continue
        servers = (
            config.get("mcpServers")
            or config.get("servers")
            or config.get("mcp_servers")
            or config.get("extensions")
            or config.get("mcp", {}).get("servers")
        )
        entry = servers["mcpsub"]
        command = entry.get("command") or entry.get("cmd")
        argv = command if isinstance(command, list) else [command, *entry.get("args", [])]
        assert argv == ["mcpsubctl", "mcp"], (client, entry)


def _hook_commands(config: dict[str, Any]) -> dict[str, list[str]]:
    """{event: [command, …]} of the documented layout: hooks.EVENT[].hooks[] (type command)."""
    out: dict[str, list[str]] = {}
    for event, groups in config["hooks"].items():
        for group in groups:
            for handler in group["hooks"]:
                assert handler["type"] == "command" and handler["timeout"] > 0
                out.setdefault(event, []).append(handler["command"])
    return out


@pytest.mark.parametrize("agent", AGENTS)
def test_hook_configs_call_the_hook_on_context_events(agent: str) -> None:
    configs = [c for (client, kind), c in checked().items() if client == agent and "hooks" in kind]
    assert configs, f"no hook config for {agent}"
    for config in configs:
        commands = _hook_commands(config)
        assert commands
        for event, lines in commands.items():
            assert event in CONTEXT_EVENTS[agent], (agent, event)
            assert all(shlex.split(line) == ["mcpsubctl", "hook", agent] for line in lines)


def test_the_documented_output_has_the_documented_shape() -> None:
    output = checked()[("claude-code", "output")]
    for agent in AGENTS:  # the one shape serves all three agents
        event = output["hookSpecificOutput"]["hookEventName"]
        if event in CONTEXT_EVENTS[agent]:
            assert_documented_shape(agent, event, output)
