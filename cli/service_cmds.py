"""``mcpsubctl service install|uninstall|status``: run ``mcpsubd`` under systemd or launchd.

The unit is rendered from the templates in ``deploy/`` with the paths of the *current*
installation (the ``mcpsubd`` next to ``sys.executable``):

* Linux: a systemd unit, ``/etc/systemd/system/mcpsubd.service`` (system, ``DynamicUser=``)
  or ``~/.config/systemd/user/mcpsubd.service`` with ``--user``;
* macOS: a launchd agent, ``~/Library/LaunchAgents/io.mcpsub.mcpsubd.plist``.

Nothing here runs ``systemctl`` or ``launchctl``: the commands print what to run next.
``--dry-run`` prints the unit and writes nothing. ``MCPSUB_SERVICE_DIR`` replaces the target
directory (tests, packaging). ``status`` says whether the unit file is installed (and up to
date) and whether the daemon answers on its socket.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SYSTEMD_UNIT = "mcpsubd.service"
LAUNCHD_LABEL = "io.mcpsub.mcpsubd"
PLACEHOLDER_BIN = "/usr/local/bin/mcpsubd"
PLACEHOLDER_HOME = "/Users/USERNAME"
TEMPLATES = {
    ("systemd", False): Path("systemd") / "mcpsubd.service",
    ("systemd", True): Path("systemd") / "mcpsubd.user.service",
    ("launchd", True): Path("launchd") / f"{LAUNCHD_LABEL}.plist",
}
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_DAEMON_UNAVAILABLE = 10
EXIT_SOCKET_NOT_TRUSTED = 12


class ServiceError(Exception):
    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


def deploy_dirs() -> list[Path]:
    """Where the templates may be: this checkout, or ``<prefix>/share/mcpsub/deploy``."""
    return [
        Path(__file__).resolve().parents[1] / "deploy",
        Path(sys.prefix) / "share" / "mcpsub" / "deploy",
    ]


def template_text(kind: str, user: bool) -> str:
    relative = TEMPLATES[(kind, user)]
    for base in deploy_dirs():
        path = base / relative
        if path.is_file():
            return path.read_text()
    raise ServiceError(
        f"cannot find the unit template {relative}",
        "reinstall mcpsub, or copy the file from deploy/ in the source tree",
    )


def mcpsubd_path() -> Path:
    """The ``mcpsubd`` of this installation (next to the interpreter running us)."""
    name = "mcpsubd.exe" if os.name == "nt" else "mcpsubd"
    return Path(sys.executable).parent / name


def _systemd_arg(value: str) -> str:
    """One ExecStart= word: specifiers (%) and variables ($) escaped, quoted when needed."""
    value = value.replace("%", "%%").replace("$", "$$")
    if any(ch.isspace() or ch in "\"'\\;" for ch in value):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return value


@dataclass(frozen=True)
class Target:
    kind: str  # "systemd" or "launchd"
    user: bool
    directory: Path
    filename: str

    @property
    def path(self) -> Path:
        return self.directory / self.filename

    @property
    def socket(self) -> Path:
        from service import statepaths

        if self.kind == "launchd":  # the agent names the default state dir: the rule's socket
            state = os.path.join(statepaths.state_base({}, "darwin"), statepaths.APP)
            return Path(statepaths.socket_path(state))
        if self.user:
            runtime = os.environ.get("XDG_RUNTIME_DIR") or f"/run/user/{os.getuid()}"
            return Path(runtime, *statepaths.UNIT_SOCKET)
        return Path("/run", *statepaths.UNIT_SOCKET)


def platform_kind(override: str | None = None) -> str:
    name = override or os.environ.get("MCPSUB_SERVICE_PLATFORM") or sys.platform
    if name == "darwin":
        return "launchd"
    if name.startswith("linux"):
        return "systemd"
    raise ServiceError(
        f"no service manager support for {name}",
        "run `mcpsubd` in the foreground under your own supervisor",
    )


def resolve_target(user: bool, platform: str | None = None) -> Target:
    kind = platform_kind(platform)
    override = os.environ.get("MCPSUB_SERVICE_DIR")
    if kind == "launchd":
        directory = Path.home() / "Library" / "LaunchAgents"
        return Target(
            kind, True, Path(override) if override else directory, LAUNCHD_LABEL + ".plist"
        )
    if user:
        config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        directory = Path(config) / "systemd" / "user"
    else:
        directory = Path("/etc/systemd/system")
    return Target(kind, user, Path(override) if override else directory, SYSTEMD_UNIT)


def render(target: Target, program: Path | None = None) -> str:
    """The unit for ``target``, naming ``program`` (default: this installation's mcpsubd)."""
    program = program or mcpsubd_path()
    text = template_text(target.kind, target.user)
    if target.kind == "systemd":
        lines = []
        for line in text.splitlines():
            if line.startswith("ExecStart=" + PLACEHOLDER_BIN):
                rest = line[len("ExecStart=" + PLACEHOLDER_BIN) :]
                line = "ExecStart=" + _systemd_arg(str(program)) + rest
            lines.append(line)
        return "\n".join(lines) + "\n"
    import plistlib

    home = str(Path.home())
    plist = plistlib.loads(text.encode())
    plist["ProgramArguments"] = [
        str(program) if arg == PLACEHOLDER_BIN else arg.replace(PLACEHOLDER_HOME, home)
        for arg in plist["ProgramArguments"]
    ]
    for key in ("StandardOutPath", "StandardErrorPath"):
        plist[key] = plist[key].replace(PLACEHOLDER_HOME, home)
    env = plist.setdefault("EnvironmentVariables", {})
    env["PATH"] = os.pathsep.join(dict.fromkeys([str(program.parent), *env["PATH"].split(":")]))
    header = text[: text.index("<plist")]  # keep the explanatory comment
    body = plistlib.dumps(plist, sort_keys=False).decode()
    return header + body[body.index("<plist") :]


def next_steps(target: Target, action: str) -> list[str]:
    import shlex

    if target.kind == "launchd":
        domain = f"gui/{os.getuid()}"
        if action == "install":
            return [
                f"launchctl bootstrap {domain} {shlex.quote(str(target.path))}",
                f"launchctl kickstart -k {domain}/{LAUNCHD_LABEL}   # restart after an upgrade",
            ]
        return [f"launchctl bootout {domain}/{LAUNCHD_LABEL}"]
    ctl = "systemctl --user" if target.user else "sudo systemctl"
    if action == "install":
        steps = [f"{ctl} daemon-reload && {ctl} enable --now mcpsubd"]
        if target.user:
            steps += [
                'loginctl enable-linger "$USER"   # keep it running while you are logged out',
                f"export MCPSUB_API=unix://{target.socket}   # where mcpsubctl finds it",
            ]
        else:
            steps.append(f"sudo mcpsubctl --api unix://{target.socket} status")
        return steps
    return [f"{ctl} disable --now mcpsubd", f"{ctl} daemon-reload"]


def write_unit(path: Path, text: str) -> str:
    """Write 0644 (atomically); returns "created", "updated" or "unchanged"."""
    import tempfile

    if path.exists() and path.read_text() == text:
        os.chmod(path, 0o644)
        return "unchanged"
    existed = path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return "updated" if existed else "created"


NOT_TRUSTED = "SOCKET_NOT_TRUSTED"


def probe_socket(path: Path, timeout: float = 2.0, *, explicit: bool = False) -> tuple[bool, str]:
    """Does a daemon answer ``GET /readyz`` on ``path``? (answers, detail). ``explicit``: a
    socket named by the person or the system unit's, which root's or its service user's
    process may serve (``service.localclient``'s rule)."""
    if not path.exists():
        return False, "no socket"
    from service import localclient

    denied = "permission denied (the system daemon's socket is root-only: use sudo)"
    try:
        status, _ = localclient.fetch(
            localclient.Endpoint(path, explicit=explicit),
            "/readyz",
            timeout_s=timeout,
            max_body=64 * 1024,
        )
    except localclient.Unreachable as exc:
        if isinstance(exc.error, localclient.NotTrusted):
            return False, f"{NOT_TRUSTED}: {exc.error.message}; hint: {exc.error.hint}"
        if isinstance(exc.error, PermissionError):
            return False, denied
        return False, f"not answering ({type(exc.error).__name__})"
    except PermissionError:
        return False, denied
    except (OSError, localclient.ProtocolError, localclient.TooLarge) as exc:
        return False, f"not answering ({type(exc).__name__})"
    if status == 200:
        return True, "ready"
    return False, f"answering but not ready (HTTP {status})"


# ---- what the unit's sandbox hides -----------------------------------------------------------
HIDDEN_BY = (
    # (setting, the values that hide, the directories hidden, what it does)
    ("ProtectHome", ("yes", "true", "tmpfs"), ("/home", "/root", "/run/user"),
     "ProtectHome= hides home directories"),
    ("PrivateTmp", ("yes", "true"), ("/tmp", "/var/tmp"),
     "PrivateTmp=yes gives the service its own empty /tmp and /var/tmp"),
)  # fmt: skip


def unit_settings(text: str) -> dict[str, str]:
    """``Key=Value`` lines of a unit (comments skipped; the last one wins, as in systemd)."""
    settings: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";", "[")) or "=" not in line:
            continue
        key, _, value = line.partition("=")
        settings[key.strip()] = value.strip().lower()
    return settings


def paths_the_unit_needs(program: Path) -> list[Path]:
    """``mcpsubd``, the interpreter its script starts, and where both really live."""
    paths = [program]
    try:
        first = program.read_bytes()[:256].split(b"\n", 1)[0]
    except OSError:
        first = b""
    if first.startswith(b"#!"):
        words = first[2:].decode(errors="replace").split()
        if words:
            paths.append(Path(words[0]))
    for path in list(paths):
        with contextlib.suppress(OSError, RuntimeError):
            paths.append(path.resolve())
    unique: list[Path] = []
    for path in paths:
        if path not in unique:
            unique.append(path)
    return unique


def hidden_path_warnings(unit_text: str, paths: list[Path], user: bool) -> list[str]:
    """One warning per path the unit's hardening hides from the service (pure)."""
    settings = unit_settings(unit_text)
    kind = "user unit" if user else "system unit"
    warnings = []
    for path in paths:
        for key, hiding, roots, what in HIDDEN_BY:
            if settings.get(key, "no") not in hiding:
                continue
            root = next((r for r in roots if path == Path(r) or Path(r) in path.parents), None)
            if root is not None:
                warnings.append(
                    f"{path} is under {root}, which the {kind} hides ({what}); install mcpsub "
                    "where the service can see it (e.g. /opt or /usr/local)"
                    + ("" if user or key != "ProtectHome" else ", or use --user")
                )
                break
    return warnings


# ---- commands ------------------------------------------------------------------------------
def _print(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _fail(exc: ServiceError, as_json: bool = False) -> int:
    sys.stderr.write(f"mcpsubctl service: {exc.message}\n")
    if exc.hint:
        sys.stderr.write(f"hint: {exc.hint}\n")
    if as_json:
        _print(json.dumps({"errorCode": "SERVICE_ERROR", "message": exc.message, "hint": exc.hint}))
    return EXIT_FAILED


def cmd_install(args: argparse.Namespace) -> int:
    try:
        target = resolve_target(args.user, args.platform)
        program = mcpsubd_path()
        text = render(target, program)
    except ServiceError as exc:
        return _fail(exc)
    if not program.exists():
        sys.stderr.write(f"warning: {program} does not exist (is mcpsub installed here?)\n")
    if target.kind == "systemd":
        for warning in hidden_path_warnings(text, paths_the_unit_needs(program), target.user):
            sys.stderr.write(f"warning: {warning}\n")
    if args.dry_run:
        _print(f"# {target.path} (dry run: nothing written)")
        sys.stdout.write(text)
        return EXIT_OK
    try:
        outcome = write_unit(target.path, text)
    except PermissionError:
        return _fail(
            ServiceError(
                f"cannot write {target.path}: permission denied",
                "run it with sudo, or install a per-user service with --user",
            )
        )
    except OSError as exc:
        return _fail(ServiceError(f"cannot write {target.path}: {exc}"))
    if target.kind == "launchd":
        logs = Path.home() / "Library" / "Logs" / "mcpsub"
        if os.environ.get("MCPSUB_SERVICE_DIR") is None:
            logs.mkdir(parents=True, exist_ok=True)
    _print(f"{outcome} {target.path} (runs {program})")
    _print("next:")
    for step in next_steps(target, "install"):
        _print(f"  {step}")
    return EXIT_OK


def cmd_uninstall(args: argparse.Namespace) -> int:
    try:
        target = resolve_target(args.user, args.platform)
    except ServiceError as exc:
        return _fail(exc)
    steps = next_steps(target, "uninstall")
    if not target.path.exists():
        _print(f"not installed: {target.path}")
        return EXIT_OK
    running, _detail = probe_socket(target.socket)
    if running and not args.force:
        return _fail(
            ServiceError(
                f"mcpsubd is running (it answers on {target.socket})",
                f"stop and disable it first: {steps[0]} (or pass --force)",
            )
        )
    if args.dry_run:
        _print(f"would remove {target.path} (dry run)")
        return EXIT_OK
    try:
        target.path.unlink()
    except PermissionError:
        return _fail(
            ServiceError(f"cannot remove {target.path}: permission denied", "run it with sudo")
        )
    _print(f"removed {target.path}")
    _print("next:")
    for step in steps:
        _print(f"  {step}")
    return EXIT_OK


def cmd_status(args: argparse.Namespace) -> int:
    try:
        target = resolve_target(args.user, args.platform)
    except ServiceError as exc:
        return _fail(exc, args.json)
    installed = target.path.exists()
    current: bool | None = None
    if installed:
        try:
            current = target.path.read_text() == render(target)
        except (ServiceError, OSError):
            current = None
    socket = Path(args.socket) if args.socket else target.socket
    answers, detail = probe_socket(socket, explicit=bool(args.socket) or not target.user)
    result: dict[str, Any] = {
        "manager": target.kind,
        "scope": "user" if target.user else "system",
        "unitFile": str(target.path),
        "installed": installed,
        "upToDate": current,
        "socket": str(socket),
        "answers": answers,
        "detail": detail,
    }
    if args.json:
        _print(json.dumps(result))
    else:
        state = "not installed"
        if installed:
            state = "installed (differs from this version)" if current is False else "installed"
        _print(f"unit-file {target.path} {state}")
        _print(f"daemon {'running' if answers else 'not running'} at {socket}: {detail}")
        if not installed:
            flag = " --user" if target.user and target.kind == "systemd" else ""
            _print(f"hint: mcpsubctl service install{flag}")
        elif not answers and target.kind == "systemd":
            ctl = "systemctl --user" if target.user else "systemctl"
            journal = "journalctl --user" if target.user else "journalctl"
            _print(f"hint: {ctl} status mcpsubd; {journal} -u mcpsubd -e")
    if detail.startswith(NOT_TRUSTED):
        return EXIT_SOCKET_NOT_TRUSTED
    return EXIT_OK if answers else EXIT_DAEMON_UNAVAILABLE


def add_service_commands(sub: Any, commands: dict[str, Any] | None = None) -> None:
    """Add ``service`` to the ``mcpsubctl`` subparsers and its handler to ``commands``."""
    if commands is not None:
        commands["service"] = cmd_service
    from cli.parsing import sub_parser

    service = sub_parser(
        sub,
        "service",
        help="install, remove or check mcpsubd as a systemd/launchd service",
        description=(
            "Render the unit for this installation's mcpsubd and install it "
            "(systemd on Linux, launchd on macOS). Prints the commands that enable it."
        ),
    )
    actions = service.add_subparsers(
        dest="service_action", required=True, parser_class=sub._parser_class, metavar="ACTION"
    )
    for name, text in (
        ("install", "write the unit file (0644) and print how to enable it"),
        ("uninstall", "remove the unit file (stop the service first)"),
        ("status", "is the unit installed, does the daemon answer on its socket"),
    ):
        action = sub_parser(actions, name, help=text)
        action.add_argument(
            "--user", action="store_true", help="per-user service (systemctl --user)"
        )
        action.add_argument("--platform", help=argparse.SUPPRESS)
        if name != "status":
            action.add_argument(
                "--dry-run", action="store_true", help="print what would be done; write nothing"
            )
        if name == "uninstall":
            action.add_argument(
                "--force", action="store_true", help="remove even while the daemon answers"
            )
        if name == "status":
            action.add_argument("--socket", help="check this API socket instead")
            action.add_argument("--json", action="store_true", help="one JSON object on stdout")


def cmd_service(args: argparse.Namespace) -> int:
    handler = {"install": cmd_install, "uninstall": cmd_uninstall, "status": cmd_status}
    return handler[args.service_action](args)


SERVICE_COMMANDS = {"service": cmd_service}
