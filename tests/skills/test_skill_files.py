"""The skills as files: the front matter every agent requires, what they tell a model to call,
and the pure decisions of install and uninstall."""

from __future__ import annotations

import hashlib
import re
import shlex
from pathlib import Path

import pytest
import yaml

from cli.ctl import build_parser
from cli.skills import (
    AGENTS,
    Existing,
    front_matter,
    install_plan,
    parse_manifest,
    safe_relative,
    uninstall_plan,
    valid_name,
)
from service.face.handlers import TOOLS
from tests.support.cli import REPO_ROOT

SKILLS = REPO_ROOT / "skills"
FOLDERS = sorted(p for p in SKILLS.iterdir() if p.is_dir())
FRONT_MATTER = re.compile(r"\A---\n(.*?)\n---\n(.*)\Z", re.S)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_the_two_skills_ship() -> None:
    assert [p.name for p in FOLDERS] == ["pr-review-subscribe", "watch-resource"]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_front_matter_is_what_the_agents_require(folder: Path) -> None:
    """Agent Skills: YAML front matter with name (the folder's, a-z 0-9 -, ≤ 64) and a
    description (≤ 1024: Codex rejects longer) that says when to use the skill; then a body."""
    text = (folder / "SKILL.md").read_text(encoding="utf-8")
    match = FRONT_MATTER.match(text)
    assert match, "SKILL.md must open with --- front matter --- and then instructions"
    meta = yaml.safe_load(match.group(1))
    assert set(meta) == {"name", "description"}
    assert meta["name"] == folder.name and valid_name(meta["name"])
    assert isinstance(meta["description"], str) and 80 <= len(meta["description"]) <= 1024
    assert "Use when" in meta["description"]
    assert "\n" not in meta["description"]
    assert front_matter(text) == meta, "the installer's reader must agree with YAML"
    body = match.group(2)
    assert body.strip().startswith("# ")
    assert len(body.split()) < 700, "a model reads this: keep it short"
    assert "never instructions" in " ".join(body.split()), (
        "server text is data: every skill must say so"
    )


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_the_mcp_tools_named_are_the_faces(folder: Path) -> None:
    text = (folder / "SKILL.md").read_text()
    named = set(re.findall(r"`([a-z]+(?:_[a-z]+)+)`", text))
    theirs = {  # the review server's own tools, not mcpsub's
        "request_copilot_review",
        "start_copilot_review_watch",
        "list_copilot_review_watches",
        "get_review_threads",
        "reply_to_review_thread",
        "reply_and_resolve_review_thread",
        "get_copilot_review_watch_status",
        "recommended_next_action",
    }
    assert named - theirs <= set(TOOLS), named - theirs - set(TOOLS)
    assert {"subscribe", "read", "wait_for_change"} <= set(re.findall(r"`(\w+)`", text))


PLACEHOLDERS = {
    "URL": "http://127.0.0.1:1/mcp",
    "URI": "test://review/status",
    "CURSOR": "42",
}


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_the_mcpsubctl_commands_named_parse(folder: Path) -> None:
    """Every `mcpsubctl …` a skill tells a model to run is a command line mcpsubctl accepts."""
    commands = re.findall(r"`(mcpsubctl [^`]+)`", (folder / "SKILL.md").read_text())
    assert commands
    for command in commands:
        words = [PLACEHOLDERS.get(w, w) for w in shlex.split(command)[1:]]
        build_parser(words[0]).parse_args(words)


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_the_monitor_route_tails_with_the_summary(folder: Path) -> None:
    """A Monitor tool shows the model each line of ``tail``: with ``--summary`` the line
    carries the first changed line, so the model can tell whether to read now."""
    tails = re.findall(r"`(mcpsubctl tail [^`]+)`", (folder / "SKILL.md").read_text())
    assert tails and all("--summary" in shlex.split(tail) for tail in tails), tails


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_codex_metadata_declares_the_mcpsub_server(folder: Path) -> None:
    """Codex's agents/openai.yaml: dependencies.tools with type mcp; Codex 0.169.0 reads type,
    value, description, transport and command (stdio) or url (streamable_http)."""
    meta = yaml.safe_load((folder / "agents" / "openai.yaml").read_text())
    assert meta == {
        "dependencies": {
            "tools": [
                {
                    "type": "mcp",
                    "value": "mcpsub",
                    "description": meta["dependencies"]["tools"][0]["description"],
                    "transport": "stdio",
                    "command": "mcpsubctl mcp",
                }
            ]
        }
    }
    # The same server name as the configuration docs/agents.md gives every agent.
    assert "[mcp_servers.mcpsub]" in (REPO_ROOT / "docs" / "agents.md").read_text()


def test_only_codex_gets_its_metadata() -> None:
    assert AGENTS["codex"].wants("watch-resource/agents/openai.yaml")
    for name in ("claude-code", "gemini"):
        assert AGENTS[name].wants("watch-resource/SKILL.md")
        assert not AGENTS[name].wants("watch-resource/agents/openai.yaml")


# ---- the pure decisions ------------------------------------------------------------------------
OURS = b"ours v2"


def plan(existing: Existing, recorded: dict[str, str], force: bool = False) -> str:
    steps = install_plan({"a/SKILL.md": OURS}, {"a/SKILL.md": existing}, recorded, sha, force=force)
    return " ".join(s.action + (f":{s.reason}" if s.reason else "") for s in steps)


def test_install_plan_never_overwrites_what_it_did_not_write() -> None:
    old = b"ours v1"
    assert plan(Existing(), {}) == "created"
    assert plan(Existing(OURS), {}) == "unchanged"
    assert plan(Existing(old), {"a/SKILL.md": sha(old)}) == "updated"
    assert plan(Existing(b"edited"), {"a/SKILL.md": sha(old)}) == "conflict:changed"
    assert plan(Existing(b"theirs"), {}) == "conflict:foreign"
    assert plan(Existing(b"theirs"), {}, force=True) == "replaced"
    assert plan(Existing(blocker="a"), {}) == "conflict:not-a-file"
    assert plan(Existing(blocker="a"), {}, force=True) == "replaced"
    directory = Existing(blocker="a/SKILL.md", blocker_is_dir=True)
    assert plan(directory, {}, force=True) == "conflict:not-a-file"


def test_install_plan_removes_an_untouched_file_no_longer_shipped() -> None:
    gone, edited = b"old skill", b"old skill, edited"
    steps = install_plan(
        {},
        {"b/SKILL.md": Existing(gone), "c/SKILL.md": Existing(edited)},
        {"b/SKILL.md": sha(gone), "c/SKILL.md": sha(gone)},
        sha,
        force=False,
    )
    assert [(s.path, s.action) for s in steps] == [("b/SKILL.md", "removed")]


def test_uninstall_plan_removes_only_untouched_files() -> None:
    ours = b"ours"
    existing = {
        "a/SKILL.md": Existing(ours),
        "b/SKILL.md": Existing(b"edited"),
        "c/SKILL.md": Existing(),
        "d/SKILL.md": Existing(blocker="d"),
    }
    recorded = {p: sha(ours) for p in existing}
    steps = uninstall_plan(existing, recorded, sha, force=False)
    assert [s.action for s in steps] == ["removed", "kept", "gone", "kept"]
    forced = uninstall_plan(existing, recorded, sha, force=True)
    assert [s.action for s in forced] == ["removed", "removed", "gone", "kept"]


def test_a_crafted_manifest_cannot_point_outside_the_skill_folders() -> None:
    digest = "0" * 64
    data = {
        "installedBy": "mcpsubctl",
        "agent": "codex",
        "files": {
            "watch-resource/SKILL.md": digest,
            "../../etc/passwd": digest,
            "/etc/passwd": digest,
            "watch-resource/../../x": digest,
            "Evil/SKILL.md": digest,
            "watch-resource/SKILL.md.bak": "not a digest",
        },
        "dirs": ["watch-resource", "..", ".", "/tmp", "watch-resource/./x"],
        "createdLevels": 7,
    }
    manifest = parse_manifest(data, "codex")
    assert manifest is not None
    assert manifest.files == {"watch-resource/SKILL.md": digest}
    assert manifest.dirs == ["watch-resource"]
    assert manifest.created_levels == 0
    assert parse_manifest(data, "gemini") is None, "another agent's manifest is not ours"
    assert parse_manifest({"agent": "codex"}, "codex") is None
    assert not safe_relative("a\\b") and not safe_relative("") and not safe_relative(3)


def test_bash_completion_offers_the_agents() -> None:
    import subprocess

    from cli.completion import render

    script = render("bash", build_parser())
    program = (
        f"{script}\nCOMP_WORDS=(mcpsubctl skills install c); COMP_CWORD=3; _mcpsubctl; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["claude-code", "codex"]


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_the_prompt_hook_is_described_in_its_own_words(folder: Path) -> None:
    """The skills tell the model what the hook's context looks like (so that it recognises a
    change that arrived while no turn ran): quoted as the hook writes it, in both forms."""
    from cli.agent_hook import SINCE_PROMPT, SINCE_SESSION

    text = " ".join((folder / "SKILL.md").read_text().split())
    assert "`mcpsubctl hook claude-code`" in text
    assert f"`mcpsub: N resource changes {SINCE_PROMPT}`" in text
    assert f"`{SINCE_SESSION}`" in text
