"""``mcpsubctl skills list|install|uninstall``: put mcpsub's agent skills where an agent reads them.

The decisions (which files, which conflicts, what uninstall may remove) are in
:mod:`cli.skills`; this module reads the disk, writes it, and reports. Every file is checked
before the first one is written, so a refused install writes nothing; writes are atomic
(a temporary file renamed over the target), and the manifest is written last, so an
interrupted install is finished by running it again.

Exit codes: 0 done (also: nothing to do), 1 refused or failed with nothing written
(``SKILL_MODIFIED``, ``SKILLS_DIR_UNWRITABLE``, ``SKILLS_DIR_LINKED``, ``SKILLS_MISSING``),
2 usage.
"""

from __future__ import annotations

import argparse
import os
import sys

from cli.exitcodes import ctl_exit_code as exit_code
from cli.skills import AGENTS

TYPE_CHECKING = False  # typing costs more than the rest of a call: not imported at run time
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    from cli.skills import Agent, Existing, Manifest, Skill, Step

EXIT_OK = 0
NEXT_STEP = {
    "claude-code": "claude mcp add --scope user mcpsub -- mcpsubctl mcp",
    "codex": "codex mcp add mcpsub -- mcpsubctl mcp   # or accept Codex's offer to add it",
    "gemini": "gemini mcp add --scope user mcpsub mcpsubctl mcp",
}
"""The MCP server the skills call, for an agent that does not have it yet (docs/agents.md)."""


class SkillsError(Exception):
    def __init__(self, code: str, message: str, hint: str, details: list[str] | None = None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint
        self.details = details or []


# ---- where things are ---------------------------------------------------------------------------
def bundle_dirs() -> list[Path]:
    """Where the skills may be: ``MCPSUB_SKILLS_DIR`` (packaging, tests), this checkout, or
    ``<prefix>/share/mcpsub/skills`` (the wheel's shared data)."""
    from pathlib import Path

    override = os.environ.get("MCPSUB_SKILLS_DIR")
    if override:
        return [Path(override)]
    return [
        Path(__file__).resolve().parents[1] / "skills",
        Path(sys.prefix) / "share" / "mcpsub" / "skills",
    ]


def load_bundle() -> tuple[Path, list[Skill]]:
    """The shipped skills, from the first place that has any."""
    from cli.skills import SKILL_FILE_MAX_BYTES, SkillFormatError, make_skill

    for base in bundle_dirs():
        if not base.is_dir():
            continue
        skills = []
        for folder in sorted(p for p in base.iterdir() if (p / "SKILL.md").is_file()):
            files: dict[str, bytes] = {}
            for path in sorted(folder.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    if path.stat().st_size > SKILL_FILE_MAX_BYTES:
                        raise _missing(f"{path} is larger than {SKILL_FILE_MAX_BYTES} bytes")
                    files[path.relative_to(folder).as_posix()] = path.read_bytes()
            try:
                skills.append(make_skill(folder.name, files))
            except (SkillFormatError, UnicodeDecodeError) as exc:
                raise _missing(f"{folder}: {exc}") from None
        if skills:
            return base, skills
    places = ", ".join(str(p) for p in bundle_dirs())
    raise _missing(f"no skills found in {places}")


def product_paths(base: Path, skills: list[Skill]) -> set[str]:
    """Every skill file this product ships or once shipped (the bundle's ``retired.txt``):
    the only files install or uninstall ever removes, whatever a manifest names."""
    from cli.skills import RETIRED_LIST, parse_retired

    try:
        retired = parse_retired((base / RETIRED_LIST).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError):
        retired = set()
    return {path for skill in skills for path in skill.files} | retired


def _missing(message: str) -> SkillsError:
    return SkillsError(
        "SKILLS_MISSING", message, "reinstall mcpsub, or run it from a source checkout"
    )


def target_dir(agent: Agent, project: str | None, user: bool) -> tuple[Path, Path]:
    """(the directory the skills directory is relative to, the skills directory)."""
    from pathlib import Path

    if user:
        base = Path.home()
        if not base.is_dir():
            raise SkillsError(
                "USAGE_ERROR",
                f"the home directory {base} does not exist",
                "set HOME, or install into a project with --project DIR",
            )
    else:
        base = Path(project or ".")
        if not base.is_dir():
            raise SkillsError(
                "USAGE_ERROR",
                f"--project {project}: no such directory",
                "pass the root of an existing project (default: the current directory)",
            )
    base = base.absolute()
    skills_dir = base / agent.directory
    if not user:
        _refuse_links(base, agent.directory)
    return base, skills_dir


def _refuse_links(base: Path, directory: str) -> None:
    """A link at ``.claude`` or ``.claude/skills`` of a project (which may come from anyone's
    repository) could lead the install out of it, into the person's home or another project:
    refused, with or without ``--force``, before anything is read or written there."""
    path = base
    for part in directory.split("/"):
        path = path / part
        if path.is_symlink():
            raise SkillsError(
                "SKILLS_DIR_LINKED",
                f"{_shown(path)} is a symbolic link (to {_shown(os.readlink(path))}); "
                "nothing written",
                "skills go only into the project's own folder: replace the link with a "
                "folder, or install with --user",
            )


def probe(skills_dir: Path, relative: str) -> Existing:
    """What is at ``skills_dir/relative``: a plain file's content, nothing, or a blocker."""
    from cli.skills import SKILL_FILE_MAX_BYTES, Existing

    parts = relative.split("/")
    for depth in range(1, len(parts) + 1):
        path = skills_dir.joinpath(*parts[:depth])
        last = depth == len(parts)
        if path.is_symlink():
            return Existing(blocker="/".join(parts[:depth]))
        if not path.exists():
            return Existing()
        if last and path.is_dir():
            return Existing(blocker=relative, blocker_is_dir=True)
        if not (path.is_file() if last else path.is_dir()):
            return Existing(blocker="/".join(parts[:depth]))
    with open(skills_dir.joinpath(*parts), "rb") as handle:
        content = handle.read(SKILL_FILE_MAX_BYTES + 1)
    return Existing(content=content)


def read_manifest(skills_dir: Path, agent: str) -> Manifest | None:
    """The manifest of the last install here; None when missing, not ours, or unreadable."""
    import json

    from cli.skills import MANIFEST_MAX_BYTES, MANIFEST_NAME, parse_manifest

    path = skills_dir / MANIFEST_NAME
    try:
        if path.is_symlink() or not path.is_file():
            return None
        with open(path, "rb") as handle:
            raw = handle.read(MANIFEST_MAX_BYTES + 1)
        if len(raw) > MANIFEST_MAX_BYTES:
            return None
        return parse_manifest(json.loads(raw), agent)
    except (OSError, ValueError, RecursionError):
        return None


def digest(data: bytes) -> str:
    import hashlib

    return hashlib.sha256(data).hexdigest()


# ---- writing --------------------------------------------------------------------------------
def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder (mode 0644 less
    the umask), so a reader never sees half a skill."""
    tmp = path.with_name(f".{path.name}.mcpsub-{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def make_dirs(skills_dir: Path, folders: list[str], manifest: Manifest) -> None:
    """Create the skills directory (it and its parent at most: ``.claude/skills``) and the skill
    folders, recording in ``manifest`` what did not exist before."""
    import errno

    created = []
    for path in (skills_dir.parent, skills_dir, *(skills_dir / f for f in folders)):
        if path.is_dir():
            continue
        if path.exists() or path.is_symlink():
            raise NotADirectoryError(errno.ENOTDIR, "a file is where a folder must be", str(path))
        path.mkdir()
        created.append(path)
    if skills_dir.parent in created:
        manifest.created_levels = 2
    elif skills_dir in created:
        manifest.created_levels = max(manifest.created_levels, 1)
    manifest.dirs += [f for f in folders if skills_dir / f in created]


def check_writable(skills_dir: Path, folders: list[str]) -> None:
    """Fail before the first write when a folder that will be written cannot be (a read-only
    project, someone else's directory), so a refused install leaves nothing behind."""
    for path in (skills_dir, *(skills_dir / f for f in folders)):
        nearest = path
        while not nearest.exists() and nearest != nearest.parent:
            nearest = nearest.parent
        if nearest.is_dir() and not os.access(nearest, os.W_OK | os.X_OK):
            raise _unwritable(nearest, PermissionError(13, "permission denied"))


def _unwritable(path: Path, exc: OSError) -> SkillsError:
    reason = exc.strerror or type(exc).__name__
    return SkillsError(
        "SKILLS_DIR_UNWRITABLE",
        f"cannot write {path}: {reason}",
        "fix the permissions, or choose another place (--project DIR or --user)",
    )


# ---- output ---------------------------------------------------------------------------------
def _shown(value: object) -> str:
    from service.safetext import terminal_safe

    return terminal_safe(str(value))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _emit(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _dumps(value: Any) -> str:
    import json

    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _fail(args: argparse.Namespace, error: SkillsError) -> int:
    where = f"mcpsubctl skills {args.skills_action}"
    sys.stderr.write(f"{where}: {error.message}\n")
    for line in error.details:
        sys.stderr.write(f"  {line}\n")
    sys.stderr.write(f"hint: {error.hint}\n")
    if args.json:
        _emit(
            _dumps(
                {
                    "errorCode": error.code,
                    "message": error.message,
                    "recommendedNextAction": error.hint,
                    "details": error.details,
                }
            )
        )
    else:
        from cli.human import machine_lines_wanted

        if machine_lines_wanted(False, getattr(args, "lines", False)):
            _emit(f"error-code {error.code}\nrecommended-next-action {error.hint}")
    return exit_code(error.code)


# ---- commands -------------------------------------------------------------------------------
def cmd_list(args: argparse.Namespace) -> int:
    try:
        source, skills = load_bundle()
    except SkillsError as exc:
        return _fail(args, exc)
    if args.json:
        _emit(
            _dumps(
                {
                    "source": str(source),
                    "agents": sorted(AGENTS),
                    "skills": [
                        {"name": s.name, "description": s.description, "files": sorted(s.files)}
                        for s in skills
                    ],
                }
            )
        )
        return EXIT_OK
    width = max(len(s.name) for s in skills)
    for skill in skills:
        _emit(f"{skill.name.ljust(width)}  {_shown(skill.description)}")
    _emit(f"(from {_shown(source)}; install: mcpsubctl skills install {'|'.join(AGENTS)})")
    return EXIT_OK


CONFLICT_WORDS = {
    "changed": "changed since mcpsubctl installed it",
    "foreign": "not written by mcpsubctl",
    "not-a-file": "something else is in the way (a link, a folder or a file)",
}


KEPT_WORDS = {
    "changed": " (changed since mcpsubctl installed it; --force removes it)",
    "not-a-file": " (not a plain file any more; left alone)",
}


def cmd_install(args: argparse.Namespace) -> int:
    from cli.skills import Manifest, install_plan

    agent = AGENTS[args.agent]
    try:
        _source, skills = load_bundle()
        base, skills_dir = target_dir(agent, args.project, args.user)
    except SkillsError as exc:
        return _fail(args, exc)
    wanted = {p: data for s in skills for p, data in s.files.items() if agent.wants(p)}
    recorded = read_manifest(skills_dir, agent.name) or Manifest(agent.name)
    recorded.only(product_paths(_source, skills))
    existing = {p: probe(skills_dir, p) for p in {*wanted, *recorded.files}}
    steps = install_plan(wanted, existing, recorded.files, digest, force=args.force)
    conflicts = [s for s in steps if s.action == "conflict"]
    if conflicts:
        return _fail(
            args,
            SkillsError(
                "SKILL_MODIFIED",
                f"{_count(len(conflicts), 'file')} in {_shown(skills_dir)} would be overwritten; "
                "nothing written",
                "keep your version, or pass --force to replace it with mcpsub's "
                "(your changes are lost)",
                [
                    f"{_shown(skills_dir / s.path)}: {CONFLICT_WORDS[s.reason or 'changed']}"
                    for s in conflicts
                ],
            ),
        )
    if not args.dry_run:
        try:
            _apply_install(skills_dir, steps, wanted, existing, recorded)
        except SkillsError as exc:
            return _fail(args, exc)
    _report(args, agent, base, skills_dir, steps, [s.name for s in skills])
    return EXIT_OK


def _apply_install(
    skills_dir: Path,
    steps: list[Step],
    wanted: dict[str, bytes],
    existing: dict[str, Existing],
    manifest: Manifest,
) -> None:
    from cli.skills import MANIFEST_NAME
    from service._version import __version__

    folders = sorted(
        {"/".join(p.split("/")[:i]) for p in wanted for i in range(1, p.count("/") + 1)},
        key=lambda f: (f.count("/"), f),
    )
    blockers = sorted(
        {b for s in steps if s.action == "replaced" and (b := existing[s.path].blocker)}
    )
    current = skills_dir
    try:
        check_writable(skills_dir, folders)
        for blocker in blockers:  # --force: a link or a file where a skill's file or folder goes
            current = skills_dir / blocker
            current.unlink()
        current = skills_dir
        make_dirs(skills_dir, folders, manifest)
        for step in steps:
            current = skills_dir / step.path
            if step.action in ("created", "updated", "replaced"):
                write_atomic(current, wanted[step.path])
            if step.action == "removed":
                current.unlink()
                manifest.files.pop(step.path, None)
            elif step.path in wanted:
                manifest.files[step.path] = digest(wanted[step.path])
        stale = [d for d in manifest.dirs if d not in folders]  # of skills no longer shipped
        manifest.dirs = [
            d for d in manifest.dirs if d in folders or d in _rmdirs(skills_dir, stale)
        ]
        current = skills_dir / MANIFEST_NAME
        write_atomic(current, (_dumps(manifest.to_json(__version__)) + "\n").encode())
    except OSError as exc:
        raise _unwritable(current, exc) from None


def _rmdirs(skills_dir: Path, folders: list[str]) -> list[str]:
    """Remove the empty ones of ``folders``, deepest first; returns those still there."""
    left = []
    for folder in sorted(folders, key=lambda f: (-f.count("/"), f)):
        path = skills_dir / folder
        if path.is_symlink() or not path.is_dir():
            continue
        try:
            path.rmdir()
        except OSError:  # not empty: something else lives there now
            left.append(folder)
    return left


def _report(
    args: argparse.Namespace,
    agent: Agent,
    base: Path,
    skills_dir: Path,
    steps: list[Step],
    names: list[str],
) -> None:
    scope = "user" if args.user else "project"
    if args.json:
        _emit(
            _dumps(
                {
                    "agent": agent.name,
                    "scope": scope,
                    "directory": str(skills_dir),
                    "dryRun": bool(getattr(args, "dry_run", False)),
                    "skills": names,
                    "files": [
                        {"path": str(skills_dir / s.path), "action": s.action} for s in steps
                    ],
                }
            )
        )
        return
    for step in steps:
        note = ""
        if step.action == "kept":
            note = KEPT_WORDS[step.reason or "changed"]
        _emit(f"{step.action} {_shown(skills_dir / step.path)}{note}")
    if args.skills_action == "install":
        verb = "would install" if args.dry_run else "installed"
        _emit(f"{verb} {_count(len(names), 'skill')} for {agent.name} in {_shown(skills_dir)}")
        if args.dry_run:
            _emit("(dry run: nothing written)")
        else:
            _emit(f"the skills use the mcpsub MCP server; if {agent.name} lacks it:")
            _emit(f"  {NEXT_STEP[agent.name]}")


def cmd_uninstall(args: argparse.Namespace) -> int:
    from cli.skills import MANIFEST_NAME, uninstall_plan

    agent = AGENTS[args.agent]
    try:
        source, skills = load_bundle()
        base, skills_dir = target_dir(agent, args.project, args.user)
    except SkillsError as exc:
        return _fail(args, exc)
    manifest = read_manifest(skills_dir, agent.name)
    if manifest is not None:
        manifest.only(product_paths(source, skills))
    if manifest is None:
        if args.json:
            _emit(_dumps({"agent": agent.name, "directory": str(skills_dir), "files": []}))
        else:
            _emit(f"nothing installed by mcpsubctl for {agent.name} in {_shown(skills_dir)}")
        return EXIT_OK
    existing = {p: probe(skills_dir, p) for p in manifest.files}
    steps = uninstall_plan(existing, manifest.files, digest, force=args.force)
    current = skills_dir
    try:
        for step in steps:
            current = skills_dir / step.path
            if step.action == "removed":
                current.unlink()
            if step.action != "kept":
                manifest.files.pop(step.path, None)
        current = skills_dir / MANIFEST_NAME
        if manifest.files:
            from service._version import __version__

            write_atomic(current, (_dumps(manifest.to_json(__version__)) + "\n").encode())
        else:
            current.unlink(missing_ok=True)
        _remove_empty_dirs(skills_dir, manifest)
    except OSError as exc:
        return _fail(args, _unwritable(current, exc))
    names = sorted({s.path.split("/", 1)[0] for s in steps if s.action == "removed"})
    _report(args, agent, base, skills_dir, steps, names)
    if not args.json:
        kept = sum(1 for s in steps if s.action == "kept")
        _emit(
            f"removed {_count(len(names), 'skill')} for {agent.name} from {_shown(skills_dir)}"
            + (f"; kept {_count(kept, 'file')} (changed)" if kept else "")
        )
    return EXIT_OK


def _remove_empty_dirs(skills_dir: Path, manifest: Manifest) -> None:
    """Remove the folders mcpsubctl created when nothing else is in them, and the skills
    directory itself (and its parent) when it created those and nothing of its is left."""
    _rmdirs(skills_dir, manifest.dirs)
    if not manifest.files:
        for path in [skills_dir, skills_dir.parent][: manifest.created_levels]:
            if path.is_symlink() or not path.is_dir():
                break
            try:
                path.rmdir()
            except OSError:
                break


# ---- argparse wiring ------------------------------------------------------------------------
def cmd_skills(args: argparse.Namespace) -> int:
    handler = {"list": cmd_list, "install": cmd_install, "uninstall": cmd_uninstall}
    return handler[args.skills_action](args)


def add_skills_commands(
    sub: Any, commands: dict[str, Callable[[argparse.Namespace], int]] | None = None
) -> None:
    """Add ``skills`` to the ``mcpsubctl`` subparsers and its handler to ``commands``."""
    if commands is not None:
        commands["skills"] = cmd_skills
    from cli.parsing import sub_parser

    skills = sub_parser(
        sub,
        "skills",
        help="list mcpsub's agent skills, install them for Claude Code, Codex or Gemini CLI",
        description=(
            "The agent skills mcpsub ships (pr-review-subscribe, watch-resource): SKILL.md "
            "folders that teach a model to wait through mcpsub instead of polling. install "
            "copies them where the agent reads skills and records what it wrote; it never "
            "overwrites a file you changed unless --force; uninstall removes only its own files."
        ),
    )
    actions = skills.add_subparsers(
        dest="skills_action", required=True, parser_class=sub._parser_class, metavar="ACTION"
    )
    listing = sub_parser(actions, "list", help="the skills this mcpsub ships")
    listing.add_argument("--json", action="store_true", help="one JSON object on stdout")
    for name, text in (
        (
            "install",
            "copy the skills into AGENT's skills directory (.claude/skills, .agents/skills "
            "or .gemini/skills of the project, or of your home with --user)",
        ),
        ("uninstall", "remove the skill files install wrote (files you changed are kept)"),
    ):
        action = sub_parser(actions, name, help=text)
        action.add_argument("agent", choices=tuple(AGENTS), metavar="AGENT", help=", ".join(AGENTS))
        where = action.add_mutually_exclusive_group()
        where.add_argument(
            "--project",
            metavar="DIR",
            default=None,
            help="the project's root directory (default: the current directory)",
        )
        where.add_argument(
            "--user", action="store_true", help="your home directory: every project sees them"
        )
        action.add_argument(
            "--force",
            action="store_true",
            help="replace (install) or remove (uninstall) files changed since mcpsubctl wrote them",
        )
        if name == "install":
            action.add_argument(
                "--dry-run", action="store_true", help="say what would be done; write nothing"
            )
        action.add_argument("--json", action="store_true", help="one JSON object on stdout")
