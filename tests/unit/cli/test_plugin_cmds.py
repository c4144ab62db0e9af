"""``mcpsubctl plugin install claude-code``: the plugin's files, in the field names the pinned
Claude Code validates (monitors: name, command, description, when; hooks: asyncRewake), and
where it refuses to write."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.cli import run_cli


def test_monitor_plugin_runs_tail_summary_at_session_start(tmp_path: Path) -> None:
    done = run_cli("mcpsubctl", "plugin", "install", "claude-code", "--dir", str(tmp_path / "p"),
                   "--uri", "test://review/*", "--json")  # fmt: skip
    assert done.code == 0, done
    assert done.json["way"] == "monitor"
    root = tmp_path / "p"
    market = json.loads((root / ".claude-plugin" / "marketplace.json").read_text())
    assert market["plugins"] == [
        {"name": "mcpsub", "source": "./mcpsub", "description": market["plugins"][0]["description"]}
    ]
    assert json.loads((root / "mcpsub" / ".claude-plugin" / "plugin.json").read_text())["name"]
    monitors = json.loads((root / "mcpsub" / "monitors" / "monitors.json").read_text())
    assert monitors == [
        {
            "name": "resource-changes",
            "command": "mcpsubctl tail --summary --uri 'test://review/*'",
            "description": monitors[0]["description"],
            "when": "always",
        }
    ]
    assert not (root / "mcpsub" / "hooks").exists()


def test_rewake_replaces_the_monitor_and_takes_exact_uris_only(tmp_path: Path) -> None:
    root = tmp_path / "p"
    assert run_cli("mcpsubctl", "plugin", "install", "claude-code", "--dir", str(root)).code == 0
    refused = run_cli("mcpsubctl", "plugin", "install", "claude-code", "--dir", str(root),
                      "--rewake", "--uri", "test://review/*")  # fmt: skip
    assert refused.code == 2 and "exact URIs" in refused.stderr, refused
    done = run_cli("mcpsubctl", "plugin", "install", "claude-code", "--dir", str(root),
                   "--rewake", "--uri", "test://review/status")  # fmt: skip
    assert done.code == 0, done
    assert not (root / "mcpsub" / "monitors" / "monitors.json").exists()
    hooks = json.loads((root / "mcpsub" / "hooks" / "hooks.json").read_text())["hooks"]
    (hook,) = hooks["Stop"][0]["hooks"]
    assert hook["type"] == "command" and hook["asyncRewake"] is True
    assert hook["command"].startswith("mcpsubctl wait --uri test://review/status ")
    assert hook["command"].endswith(">&2 && exit 2")


def test_a_link_in_the_way_is_refused_and_nothing_is_written_through_it(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "p"
    root.mkdir()
    (root / "mcpsub").symlink_to(elsewhere)
    done = run_cli("mcpsubctl", "plugin", "install", "claude-code", "--dir", str(root))
    assert done.code == 2 and "symbolic link" in done.stderr, done
    assert "Traceback" not in done.stderr
    assert list(elsewhere.iterdir()) == []
