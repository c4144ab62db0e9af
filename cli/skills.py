"""The agent skills mcpsub ships, where each agent reads them, and what an install changes (pure).

A skill is a folder in the open Agent Skills format: ``SKILL.md`` (YAML front matter with
``name`` and ``description``, then instructions for the model) and, for Codex only,
``agents/openai.yaml`` declaring the mcpsub MCP server it needs. The folders live in
``skills/`` of the source tree and ``<prefix>/share/mcpsub/skills`` of an installation.

Installing must never destroy a person's work, so every decision is made here, from what is on
disk and what the last install recorded (a manifest of the files it wrote and their SHA-256),
before anything is written: a file is written when it is missing, identical, or still exactly
what mcpsubctl wrote; otherwise it is a conflict that only ``--force`` overrides. Uninstall
removes only files whose content is still what was recorded.

The manifest sits in a project anyone may have written, so it is trusted for digests only:
nothing is removed unless its path is one the product ships (this bundle) or once shipped
(the bundle's ``retired.txt``), whatever the manifest names (:meth:`Manifest.only`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

TYPE_CHECKING = False  # typing costs more than the rest of a call: not imported at run time
if TYPE_CHECKING:
    from typing import Any

MANIFEST_NAME = ".mcpsub-skills.json"
"""In the agent's skills directory; a dot file, so no agent takes it for a skill."""
MANIFEST_MAX_BYTES = 1 << 20
"""A larger manifest is not ours (ours is a few hundred bytes): it is ignored, not parsed."""
MANIFEST_MAX_FILES = 1000
SKILL_FILE_MAX_BYTES = 256 * 1024
"""Bundled files are a few kB; a larger one is a broken installation, not a skill."""
RETIRED_LIST = "retired.txt"
"""In the bundle directory: the skill files earlier versions shipped and this one does not,
one relative path a line (``#`` comments), so an upgrade removes them from an older install."""
CODEX_ONLY = "agents/"
"""Files under this folder of a skill are Codex's (``agents/openai.yaml``); others skip them."""


@dataclass(frozen=True)
class Agent:
    name: str
    directory: str
    """The skills directory, relative to the project (``--project``) or the home directory."""
    extras: bool = False
    """Whether the agent reads ``agents/openai.yaml`` (Codex's MCP server dependency)."""

    def wants(self, relative: str) -> bool:
        """Whether this agent gets the skill file ``relative`` (``name/SKILL.md``, …)."""
        inside = relative.split("/", 1)[1] if "/" in relative else relative
        return self.extras or not inside.startswith(CODEX_ONLY)


AGENTS: dict[str, Agent] = {
    # Claude Code: .claude/skills/ in a project, ~/.claude/skills/ for the user.
    "claude-code": Agent("claude-code", ".claude/skills"),
    # Codex: .agents/skills/ (from the working directory up to the repository root) and
    # ~/.agents/skills/; it reads agents/openai.yaml for the MCP server a skill depends on.
    "codex": Agent("codex", ".agents/skills", extras=True),
    # Gemini CLI 0.61.0 (Storage.getProjectSkillsDir/getUserSkillsDir): .gemini/skills/ and
    # ~/.gemini/skills/ (it also reads .agents/skills/, which is Codex's here); project skills
    # only in a folder it trusts.
    "gemini": Agent("gemini", ".gemini/skills"),
}


# ---- the bundle -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Skill:
    name: str
    description: str
    files: dict[str, bytes]
    """Relative path inside the skills directory (``name/SKILL.md``) → content."""


class SkillFormatError(ValueError):
    """A bundled SKILL.md without the front matter every agent requires."""


def front_matter(text: str) -> dict[str, str]:
    """The ``key: value`` lines between the opening and closing ``---`` of a SKILL.md.

    Our own files use one-line scalars only, so this small reader suffices (no YAML parser at
    run time); tests check the same files with a real YAML parser."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise SkillFormatError("SKILL.md must start with a '---' line (YAML front matter)")
    fields: dict[str, str] = {}
    for line in lines[1:]:
        if line.strip() == "---":
            break
        key, sep, value = line.partition(":")
        if sep and key and not key[0].isspace():
            fields[key.strip()] = value.strip()
    else:
        raise SkillFormatError("SKILL.md front matter has no closing '---' line")
    for key in ("name", "description"):
        if not fields.get(key):
            raise SkillFormatError(f"SKILL.md front matter has no {key}")
    return fields


def valid_name(name: str) -> bool:
    """The Agent Skills rule: 1-64 of a-z, 0-9 and '-', no leading, trailing or double '-'."""
    return (
        0 < len(name) <= 64
        and all(c.isascii() and (c.islower() or c.isdigit() or c == "-") for c in name)
        and not name.startswith("-")
        and not name.endswith("-")
        and "--" not in name
    )


def make_skill(folder: str, files: dict[str, bytes]) -> Skill:
    """A skill from its folder name and files (relative to the folder); checks the format."""
    if "SKILL.md" not in files:
        raise SkillFormatError(f"{folder}/ has no SKILL.md")
    fields = front_matter(files["SKILL.md"].decode("utf-8"))
    if fields["name"] != folder or not valid_name(folder):
        raise SkillFormatError(f"{folder}/SKILL.md: name must be the folder's name, a-z 0-9 -")
    return Skill(
        folder, fields["description"], {f"{folder}/{rel}": data for rel, data in files.items()}
    )


# ---- the manifest -----------------------------------------------------------------------------
@dataclass
class Manifest:
    """What the last install wrote into one skills directory."""

    agent: str
    files: dict[str, str] = field(default_factory=dict)
    """Relative path → SHA-256 (hex) of the content written."""
    dirs: list[str] = field(default_factory=list)
    """Folders inside the skills directory that mcpsubctl created (removed when empty)."""
    created_levels: int = 0
    """How many levels of the skills directory itself it created: 0, 1 (``skills``) or 2 (its
    parent too, ``.claude``); uninstall removes those when they end up empty."""

    def only(self, product: set[str]) -> None:
        """Forget every recorded file that is not one of ``product`` (the paths the product
        ships or once shipped), and every folder that holds none of them: an edited manifest
        can name a person's own skill with its digest, and that must never be removed."""
        self.files = {p: d for p, d in self.files.items() if p in product}
        folders = {"/".join(p.split("/")[:i]) for p in product for i in range(1, p.count("/") + 1)}
        self.dirs = [d for d in self.dirs if d in folders]

    def to_json(self, version: str) -> dict[str, Any]:
        return {
            "installedBy": "mcpsubctl",
            "version": version,
            "agent": self.agent,
            "files": dict(sorted(self.files.items())),
            "dirs": sorted(set(self.dirs)),
            "createdLevels": self.created_levels,
        }


def safe_relative(path: object) -> bool:
    """A path a manifest may name: relative, forward slashes, no '.', '..' or empty parts, and
    inside a skill folder. A manifest is a file in a project anyone may have written."""
    if not isinstance(path, str) or not path or len(path) > 512 or "\\" in path:
        return False
    parts = path.split("/")
    return valid_name(parts[0]) and all(p not in ("", ".", "..") and "\0" not in p for p in parts)


def parse_manifest(data: Any, agent: str) -> Manifest | None:
    """The manifest in ``data`` (parsed JSON), or None when it is not one of ours for ``agent``.

    Entries that fail :func:`safe_relative` or do not look like a digest are dropped, so a
    crafted manifest cannot point uninstall outside the skill folders."""
    if not isinstance(data, dict) or data.get("installedBy") != "mcpsubctl":
        return None
    if data.get("agent") != agent:
        return None
    files = data.get("files")
    dirs = data.get("dirs")
    levels = data.get("createdLevels")
    manifest = Manifest(agent)
    if isinstance(files, dict):
        for path, digest in list(files.items())[:MANIFEST_MAX_FILES]:
            if safe_relative(path) and _is_digest(digest):
                manifest.files[path] = digest
    if isinstance(dirs, list):
        manifest.dirs = [d for d in dirs[:MANIFEST_MAX_FILES] if safe_relative(d)]
    if isinstance(levels, int) and not isinstance(levels, bool) and 0 <= levels <= 2:
        manifest.created_levels = levels
    return manifest


def parse_retired(text: str) -> set[str]:
    """``retired.txt``'s paths (each one :func:`safe_relative` may name)."""
    lines = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return {line for line in lines if line and safe_relative(line)}


def _is_digest(value: object) -> bool:
    return (
        isinstance(value, str) and len(value) == 64 and all(c in "0123456789abcdef" for c in value)
    )


# ---- planning ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    path: str
    """Relative to the skills directory."""
    action: str
    """install: created | updated | unchanged | replaced | conflict | removed (a file no longer
    shipped); uninstall: removed | kept | gone."""
    reason: str | None = None
    """For a conflict: ``changed`` (mcpsubctl wrote it, the person edited it since) or
    ``foreign`` (mcpsubctl did not write it) or ``not-a-file``."""


@dataclass(frozen=True)
class Existing:
    """What is on disk where a file goes."""

    content: bytes | None = None
    """The regular file's content; None when there is none."""
    blocker: str | None = None
    """Something else in the way (relative path): a symlink, a file where a folder goes, or a
    directory where the file goes. Symlinks and files may be replaced with ``--force``."""
    blocker_is_dir: bool = False
    """The blocker is a real directory: never removed, not even with ``--force``."""


def install_plan(
    wanted: dict[str, bytes],
    existing: dict[str, Existing],
    recorded: dict[str, str],
    digest: Any,
    *,
    force: bool,
) -> list[Step]:
    """What installing ``wanted`` does, file by file (``existing`` has every path of
    ``wanted`` and of ``recorded``; ``digest(bytes) -> hex``).

    A recorded file no longer shipped is removed when untouched, kept (and left recorded) when
    the person changed it."""
    steps: list[Step] = []
    for path, content in sorted(wanted.items()):
        here = existing[path]
        if here.blocker is not None:
            forceable = force and not here.blocker_is_dir
            steps.append(
                Step(path, "replaced") if forceable else Step(path, "conflict", "not-a-file")
            )
        elif here.content is None:
            steps.append(Step(path, "created"))
        elif here.content == content:
            steps.append(Step(path, "unchanged"))
        elif path in recorded and digest(here.content) == recorded[path]:
            steps.append(Step(path, "updated"))
        elif force:
            steps.append(Step(path, "replaced"))
        else:
            reason = "changed" if path in recorded else "foreign"
            steps.append(Step(path, "conflict", reason))
    for path, expected in sorted(recorded.items()):
        here = existing[path]
        if path not in wanted and _untouched(here, expected, digest):
            steps.append(Step(path, "removed"))
    return steps


def uninstall_plan(
    existing: dict[str, Existing], recorded: dict[str, str], digest: Any, *, force: bool
) -> list[Step]:
    """What uninstalling does with each recorded file: removed, kept (changed since, or not a
    plain file any more: only the file is ever removed, never what stands in its place), or
    gone (already removed)."""
    steps: list[Step] = []
    for path, expected in sorted(recorded.items()):
        here = existing[path]
        if here.blocker is not None:
            steps.append(Step(path, "kept", "not-a-file"))
        elif here.content is None:
            steps.append(Step(path, "gone"))
        elif force or _untouched(here, expected, digest):
            steps.append(Step(path, "removed"))
        else:
            steps.append(Step(path, "kept", "changed"))
    return steps


def _untouched(here: Existing, expected: str, digest: Any) -> bool:
    return here.blocker is None and here.content is not None and digest(here.content) == expected
