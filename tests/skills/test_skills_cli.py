"""``mcpsubctl skills list|install|uninstall`` as people run it: the real CLI in a subprocess,
writing into temporary projects and a temporary HOME."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.cli import BIN, REPO_ROOT, CliResult, cli_env

SKILL_NAMES = ["pr-review-subscribe", "watch-resource"]
WHERE = {"claude-code": ".claude/skills", "codex": ".agents/skills", "gemini": ".gemini/skills"}
MANIFEST = ".mcpsub-skills.json"


def skills(*args: str, cwd: Path, home: Path, env: dict[str, str] | None = None) -> CliResult:
    """``mcpsubctl skills ARGS`` in ``cwd`` with ``HOME=home`` (stdout is a pipe: the machine
    lines of a failure are printed)."""
    proc = subprocess.run(
        [str(BIN / "mcpsubctl"), "skills", *args],
        env=cli_env({"HOME": str(home), **(env or {})}),
        cwd=str(cwd),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    result = CliResult(proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in result.stderr + result.stdout, result
    return result


@pytest.fixture
def home(tmp_path: Path) -> Path:
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def project(tmp_path: Path) -> Path:
    path = tmp_path / "project"
    path.mkdir()
    return path


def tree(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def shipped(name: str, relative: str = "SKILL.md") -> bytes:
    return (REPO_ROOT / "skills" / name / relative).read_bytes()


# ---- list ----------------------------------------------------------------------------------------
def test_list_names_each_skill_and_what_it_is_for(project: Path, home: Path) -> None:
    result = skills("list", cwd=project, home=home)
    assert result.code == 0, result
    lines = result.stdout.splitlines()
    assert [line.split()[0] for line in lines[:2]] == SKILL_NAMES
    assert "Use when" in lines[0]
    assert "mcpsubctl skills install claude-code|codex|gemini" in lines[-1]

    as_json = skills("list", "--json", cwd=project, home=home).json
    assert [s["name"] for s in as_json["skills"]] == SKILL_NAMES
    assert as_json["agents"] == sorted(WHERE)
    review = as_json["skills"][0]
    assert review["files"] == [
        "pr-review-subscribe/SKILL.md",
        "pr-review-subscribe/agents/openai.yaml",
    ]
    assert "poll" in review["description"]


def test_an_installed_wheel_ships_the_skills(tmp_path: Path, home: Path) -> None:
    """Built and installed as users get it (offline, from uv's cache): the skills come from
    ``<prefix>/share/mcpsub/skills``, not from a checkout."""
    uv = shutil.which("uv") or str(REPO_ROOT / ".tools" / "bin" / "uv")
    offline = {**os.environ, "UV_OFFLINE": "1", "UV_PYTHON_DOWNLOADS": "never"}
    run = {"env": offline, "check": True, "capture_output": True, "timeout": 300}
    subprocess.run([uv, "build", "--wheel", "-o", str(tmp_path / "dist"), str(REPO_ROOT)], **run)
    venv = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "-p", str(BIN / "python"), str(venv)], **run)
    wheel = next((tmp_path / "dist").glob("mcpsub-*.whl"))
    install = [uv, "pip", "install", "-q", "--no-deps", "-p", str(venv / "bin" / "python")]
    subprocess.run([*install, str(wheel)], **run)
    env = {**cli_env({"HOME": str(home)}), "PYTHONPATH": ""}
    listed = subprocess.run(
        [str(venv / "bin" / "mcpsubctl"), "skills", "list", "--json"],
        env=env,
        cwd=str(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0, listed.stderr
    answer = json.loads(listed.stdout)
    assert answer["source"] == str(venv / "share" / "mcpsub" / "skills")
    assert [s["name"] for s in answer["skills"]] == SKILL_NAMES


# ---- install -------------------------------------------------------------------------------------
@pytest.mark.parametrize("agent", sorted(WHERE))
def test_install_into_a_project_puts_the_skills_where_the_agent_reads(
    agent: str, project: Path, home: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    result = skills("install", agent, "--project", str(project), cwd=elsewhere, home=home)
    assert result.code == 0, result
    target = project / WHERE[agent]
    expected = [f"{name}/SKILL.md" for name in SKILL_NAMES]
    if agent == "codex":  # Codex alone reads agents/openai.yaml (the MCP server dependency)
        expected += [f"{name}/agents/openai.yaml" for name in SKILL_NAMES]
    assert tree(target) == sorted([MANIFEST, *expected])
    for name in SKILL_NAMES:
        assert (target / name / "SKILL.md").read_bytes() == shipped(name)
    for relative in expected:
        assert f"created {target / relative}\n" in result.stdout
    assert f"installed 2 skills for {agent} in {target}" in result.stdout
    assert "mcpsubctl mcp" in result.stdout, "it says how to add the MCP server the skills use"
    assert tree(home) == [] and tree(elsewhere) == []
    manifest = json.loads((target / MANIFEST).read_text())
    assert manifest["agent"] == agent and sorted(manifest["files"]) == sorted(expected)


@pytest.mark.parametrize("agent", sorted(WHERE))
def test_install_for_the_user_writes_under_home(agent: str, project: Path, home: Path) -> None:
    result = skills("install", agent, "--user", "--json", cwd=project, home=home)
    assert result.code == 0, result
    answer = result.json
    target = home / WHERE[agent]
    assert answer["scope"] == "user" and answer["directory"] == str(target)
    assert answer["skills"] == SKILL_NAMES
    assert {f["action"] for f in answer["files"]} == {"created"}
    assert (target / "watch-resource" / "SKILL.md").is_file()
    assert tree(project) == []


def test_install_defaults_to_the_current_directory(project: Path, home: Path) -> None:
    result = skills("install", "claude-code", cwd=project, home=home)
    assert result.code == 0, result
    assert (project / ".claude/skills/pr-review-subscribe/SKILL.md").is_file()


def test_install_twice_changes_nothing(project: Path, home: Path) -> None:
    args = ("install", "codex", "--project", str(project))
    assert skills(*args, cwd=project, home=home).code == 0
    target = project / WHERE["codex"]
    before = {p: (target / p).stat().st_mtime_ns for p in tree(target)}
    again = skills(*args, cwd=project, home=home)
    assert again.code == 0, again
    assert "created" not in again.stdout and "updated" not in again.stdout
    assert again.stdout.count("unchanged ") == 4
    after = {p: (target / p).stat().st_mtime_ns for p in tree(target) if p != MANIFEST}
    assert after == {p: t for p, t in before.items() if p != MANIFEST}, "nothing rewritten"


def test_dry_run_writes_nothing(project: Path, home: Path) -> None:
    result = skills("install", "gemini", "--dry-run", cwd=project, home=home)
    assert result.code == 0, result
    assert "created " in result.stdout and "(dry run: nothing written)" in result.stdout
    assert tree(project) == [] and not (project / ".gemini").exists()


def test_a_changed_skill_is_never_overwritten_without_force(project: Path, home: Path) -> None:
    assert skills("install", "claude-code", cwd=project, home=home).code == 0
    target = project / WHERE["claude-code"]
    mine = b"---\nname: watch-resource\ndescription: my own version\n---\nMine.\n"
    (target / "watch-resource" / "SKILL.md").write_bytes(mine)
    (target / "pr-review-subscribe" / "SKILL.md").unlink()

    refused = skills("install", "claude-code", cwd=project, home=home)
    assert refused.code == 1, refused
    assert refused.stdout.splitlines()[0] == "error-code SKILL_MODIFIED"
    assert refused.stdout.splitlines()[1].startswith("recommended-next-action keep your version")
    stderr = refused.stderr
    assert (
        f"{target / 'watch-resource' / 'SKILL.md'}: changed since mcpsubctl installed it" in stderr
    )
    assert "hint: " in stderr and "--force" in stderr
    assert (target / "watch-resource" / "SKILL.md").read_bytes() == mine
    assert not (target / "pr-review-subscribe" / "SKILL.md").exists(), "nothing written"

    as_json = skills("install", "claude-code", "--json", cwd=project, home=home)
    assert as_json.code == 1 and as_json.json["errorCode"] == "SKILL_MODIFIED"

    forced = skills("install", "claude-code", "--force", cwd=project, home=home)
    assert forced.code == 0, forced
    assert f"replaced {target / 'watch-resource' / 'SKILL.md'}" in forced.stdout
    assert f"created {target / 'pr-review-subscribe' / 'SKILL.md'}" in forced.stdout
    assert (target / "watch-resource" / "SKILL.md").read_bytes() == shipped("watch-resource")
    assert "unchanged " in skills("install", "claude-code", cwd=project, home=home).stdout


def test_a_skill_the_person_wrote_first_is_not_overwritten(project: Path, home: Path) -> None:
    folder = project / ".agents/skills/watch-resource"
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text("---\nname: watch-resource\ndescription: theirs\n---\n")
    refused = skills("install", "codex", cwd=project, home=home)
    assert refused.code == 1
    assert "not written by mcpsubctl" in refused.stderr
    assert tree(project) == [".agents/skills/watch-resource/SKILL.md"]


def test_a_linked_skill_folder_is_replaced_only_with_force(
    project: Path, home: Path, tmp_path: Path
) -> None:
    """A symlink where a skill goes points at someone's own folder: never written through;
    --force replaces the link, not what it points to."""
    theirs = tmp_path / "dotfiles" / "watch-resource"
    theirs.mkdir(parents=True)
    (theirs / "SKILL.md").write_text("theirs")
    target = project / WHERE["gemini"]
    target.mkdir(parents=True)
    (target / "watch-resource").symlink_to(theirs)

    refused = skills("install", "gemini", cwd=project, home=home)
    assert refused.code == 1 and "something else is in the way" in refused.stderr
    forced = skills("install", "gemini", "--force", cwd=project, home=home)
    assert forced.code == 0, forced
    assert not (target / "watch-resource").is_symlink()
    assert (target / "watch-resource" / "SKILL.md").read_bytes() == shipped("watch-resource")
    assert (theirs / "SKILL.md").read_text() == "theirs"


def test_a_new_version_updates_its_files_and_drops_what_it_no_longer_ships(
    project: Path, home: Path, tmp_path: Path
) -> None:
    old = tmp_path / "old-skills"
    shutil.copytree(REPO_ROOT / "skills", old)
    (old / "watch-resource" / "SKILL.md").write_bytes(shipped("watch-resource") + b"\nOld.\n")
    (old / "retired").mkdir()
    (old / "retired" / "SKILL.md").write_text("---\nname: retired\ndescription: gone\n---\nx\n")
    env = {"MCPSUB_SKILLS_DIR": str(old)}
    assert skills("install", "claude-code", cwd=project, home=home, env=env).code == 0
    target = project / WHERE["claude-code"]
    assert (target / "retired" / "SKILL.md").is_file()

    # The new version lists what it no longer ships (a retired file is the product's own).
    new = tmp_path / "new-skills"
    shutil.copytree(REPO_ROOT / "skills", new)
    with (new / "retired.txt").open("a") as retired:
        retired.write("retired/SKILL.md\n")
    env = {"MCPSUB_SKILLS_DIR": str(new)}
    upgraded = skills("install", "claude-code", cwd=project, home=home, env=env)
    assert upgraded.code == 0, upgraded
    assert f"updated {target / 'watch-resource' / 'SKILL.md'}" in upgraded.stdout
    assert f"removed {target / 'retired' / 'SKILL.md'}" in upgraded.stdout
    assert not (target / "retired").exists()
    assert (target / "watch-resource" / "SKILL.md").read_bytes() == shipped("watch-resource")


# ---- uninstall -----------------------------------------------------------------------------------
def test_uninstall_removes_only_what_install_wrote(project: Path, home: Path) -> None:
    (project / ".agents/skills/my-own").mkdir(parents=True)
    (project / ".agents/skills/my-own/SKILL.md").write_text("mine")
    assert skills("install", "codex", cwd=project, home=home).code == 0
    target = project / WHERE["codex"]
    (target / "watch-resource" / "notes.md").write_text("my notes")
    edited = shipped("pr-review-subscribe") + b"\nMy addition.\n"
    (target / "pr-review-subscribe" / "SKILL.md").write_bytes(edited)

    result = skills("uninstall", "codex", cwd=project, home=home)
    assert result.code == 0, result
    assert f"removed {target / 'watch-resource' / 'SKILL.md'}" in result.stdout
    assert f"kept {target / 'pr-review-subscribe' / 'SKILL.md'} (changed since" in result.stdout
    assert tree(project) == sorted(
        [
            f"{WHERE['codex']}/{MANIFEST}",  # still names the kept file, for --force
            f"{WHERE['codex']}/my-own/SKILL.md",
            f"{WHERE['codex']}/pr-review-subscribe/SKILL.md",
            f"{WHERE['codex']}/watch-resource/notes.md",
        ]
    )
    assert not (target / "watch-resource" / "agents").exists(), "its empty folder went too"

    forced = skills("uninstall", "codex", "--force", cwd=project, home=home)
    assert forced.code == 0, forced
    assert tree(project) == [
        f"{WHERE['codex']}/my-own/SKILL.md",
        f"{WHERE['codex']}/watch-resource/notes.md",
    ]


def test_uninstall_leaves_no_trace_of_an_install(project: Path, home: Path) -> None:
    for agent in WHERE:
        assert skills("install", agent, "--user", cwd=project, home=home).code == 0
        result = skills("uninstall", agent, "--user", "--json", cwd=project, home=home)
        assert result.code == 0, result
        assert {f["action"] for f in result.json["files"]} == {"removed"}
    assert list(home.iterdir()) == [], "the folders it created are gone, .claude included"


def test_uninstall_with_nothing_installed_says_so(project: Path, home: Path) -> None:
    result = skills("uninstall", "gemini", cwd=project, home=home)
    assert result.code == 0
    assert result.stdout.startswith("nothing installed by mcpsubctl for gemini in ")


def test_a_crafted_manifest_cannot_make_uninstall_remove_other_files(
    project: Path, home: Path
) -> None:
    """The manifest sits in the project: whoever wrote the project may have written it."""
    import hashlib

    victim = project / "src.py"
    victim.write_text("precious")
    digest = hashlib.sha256(b"precious").hexdigest()
    target = project / WHERE["claude-code"]
    target.mkdir(parents=True)
    (target / MANIFEST).write_text(
        json.dumps(
            {
                "installedBy": "mcpsubctl",
                "agent": "claude-code",
                "files": {"../../src.py": digest, "watch-resource/../../../src.py": digest},
                "dirs": ["..", "../.."],
                "createdLevels": 2,
            }
        )
    )
    result = skills("uninstall", "claude-code", "--force", cwd=project, home=home)
    assert result.code == 0, result
    assert victim.read_text() == "precious"


def test_an_edited_manifest_never_removes_a_persons_own_skill(project: Path, home: Path) -> None:
    """Before, uninstall removed any file its manifest named with a matching digest, and
    install any such file it "no longer ships": a manifest edited (or committed to a
    repository) to name the person's own skill deleted it."""
    import hashlib

    assert skills("install", "claude-code", cwd=project, home=home).code == 0
    target = project / WHERE["claude-code"]
    mine = target / "my-own" / "SKILL.md"
    mine.parent.mkdir()
    mine.write_text("---\nname: my-own\ndescription: mine\n---\nMy work.\n")
    manifest = json.loads((target / MANIFEST).read_text())
    manifest["files"]["my-own/SKILL.md"] = hashlib.sha256(mine.read_bytes()).hexdigest()
    manifest["dirs"].append("my-own")
    (target / MANIFEST).write_text(json.dumps(manifest))

    again = skills("install", "claude-code", cwd=project, home=home)
    assert again.code == 0, again
    assert "my-own" not in again.stdout and mine.is_file()
    for force in ([], ["--force"]):
        result = skills("uninstall", "claude-code", *force, cwd=project, home=home)
        assert result.code == 0, result
        assert "my-own" not in result.stdout
        assert mine.read_text().endswith("My work.\n")
    assert tree(project) == [f"{WHERE['claude-code']}/my-own/SKILL.md"]


@pytest.mark.parametrize("linked", [".claude", ".claude/skills"])
def test_a_link_on_the_way_out_of_the_project_is_refused(
    linked: str, project: Path, home: Path, tmp_path: Path
) -> None:
    """A cloned project's ``.claude`` (or ``.claude/skills``) may be a link to anywhere:
    before, install wrote through it (and printed the in-project path)."""
    other = tmp_path / "other"  # another project, with skills installed
    other.mkdir()
    assert skills("install", "claude-code", cwd=other, home=home).code == 0
    installed = tree(other)
    manifest = other / WHERE["claude-code"] / MANIFEST
    inode = manifest.stat().st_ino  # an install writes its manifest anew (a rename)
    outside = other / linked
    (project / linked).parent.mkdir(parents=True, exist_ok=True)
    (project / linked).symlink_to(outside)
    for action in (["install", "claude-code"], ["install", "claude-code", "--force"]):
        refused = skills(*action, "--project", str(project), cwd=tmp_path, home=home)
        assert refused.code == 1, refused
        assert "SKILLS_DIR_LINKED" in refused.stdout
        assert f"{project / linked} is a symbolic link (to {outside})" in refused.stderr
    # What is out there is never read as an install to remove, either.
    refused = skills("uninstall", "claude-code", "--project", str(project), cwd=tmp_path, home=home)
    assert refused.code == 1 and "SKILLS_DIR_LINKED" in refused.stdout
    assert tree(other) == installed and manifest.stat().st_ino == inode


def test_an_oversized_manifest_is_not_read_and_nothing_is_overwritten(
    project: Path, home: Path
) -> None:
    target = project / WHERE["claude-code"]
    (target / "watch-resource").mkdir(parents=True)
    (target / "watch-resource" / "SKILL.md").write_text("mine")
    (target / MANIFEST).write_bytes(b" " * (1 << 20) + b"{}")
    result = skills("install", "claude-code", cwd=project, home=home)
    assert result.code == 1, result
    assert "SKILL_MODIFIED" in result.stdout
    assert (target / "watch-resource" / "SKILL.md").read_text() == "mine"


# ---- bad input -----------------------------------------------------------------------------------
def test_an_unknown_agent_lists_the_known_ones(project: Path, home: Path) -> None:
    result = skills("install", "cursor", cwd=project, home=home)
    assert result.code == 2
    assert result.stdout.splitlines()[0] == "error-code USAGE_ERROR"
    assert "invalid choice: 'cursor' (choose from 'claude-code', 'codex', 'gemini')" in (
        result.stderr
    )
    assert tree(project) == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--project", "/nonexistent/mcpsub-test"], "no such directory"),
        (["--project", ".", "--user"], "not allowed with argument"),
        ([], "the following arguments are required: AGENT"),
    ],
)
def test_bad_places_are_usage_errors(args: list[str], says: str, project: Path, home: Path) -> None:
    result = skills(
        *(["install"] if not args else ["install", "codex"]), *args, cwd=project, home=home
    )
    assert result.code == 2, result
    assert says in result.stderr and "hint: " in result.stderr
    assert result.stdout.splitlines()[0] == "error-code USAGE_ERROR"


def test_an_unwritable_place_fails_before_writing(project: Path, home: Path) -> None:
    (project / ".claude").write_text("a file where the folder goes")
    result = skills("install", "claude-code", "--json", cwd=project, home=home)
    assert result.code == 1, result
    assert result.json["errorCode"] == "SKILLS_DIR_UNWRITABLE"
    assert str(project / ".claude") in result.json["message"]
    assert "--project DIR or --user" in result.json["recommendedNextAction"]
    assert tree(project) == [".claude"]
    if os.geteuid() != 0:  # root writes anywhere: the mode check only holds for others
        locked = project / "locked"
        locked.mkdir(mode=0o555)
        denied = skills("install", "gemini", "--project", str(locked), cwd=project, home=home)
        assert denied.code == 1 and "SKILLS_DIR_UNWRITABLE" in denied.stdout
        assert "permission denied" in denied.stderr.lower()


def test_missing_skills_are_reported_not_a_traceback(
    project: Path, home: Path, tmp_path: Path
) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = skills("list", cwd=project, home=home, env={"MCPSUB_SKILLS_DIR": str(empty)})
    assert result.code == 1
    assert result.stdout.splitlines()[0] == "error-code SKILLS_MISSING"
    assert "reinstall mcpsub" in result.stderr
