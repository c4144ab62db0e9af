"""The parsers as people meet them: help on every flag, global flags anywhere, enum errors,
and the completion scripts and man pages generated from the same parsers."""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cli.completion import render
from cli.ctl import build_parser
from cli.manpage import pages
from cli.parsertree import command_tree, walk
from service.daemon.main import build_parser as daemon_parser
from tests.support.cli import REPO_ROOT, run_cli

TREE = command_tree(build_parser())
COMMANDS = [node for node in walk(TREE) if node.path]


def test_every_command_and_flag_has_help() -> None:
    for node in COMMANDS:
        assert node.help, f"{' '.join(node.path)} has no help line"
        for option in node.options:
            assert option.help, f"{' '.join(node.path)} {option.flags} has no help"
        for positional in node.positionals:
            assert positional.help, f"{' '.join(node.path)} {positional.name} has no help"
    for action in daemon_parser()._actions:
        assert action.help, action


def test_ndjson_is_mentioned_only_where_follow_exists() -> None:
    for node in COMMANDS:
        flags = {flag for option in node.options for flag in option.flags}
        for option in node.options:
            if "NDJSON" in option.help:
                assert "--follow" in flags, (node.path, option.help)


@pytest.mark.parametrize("path", [("probe",), ("call",), ("wait",)])
def test_timeout_help_states_its_default(path: tuple[str, ...]) -> None:
    node = next(n for n in COMMANDS if n.path == path)
    timeout = next(o for o in node.options if "--timeout-ms" in o.flags)
    assert "default" in timeout.help and "000" in timeout.help


def test_global_flags_work_before_and_after_the_command(tmp_path: Path) -> None:
    socket = tmp_path / "elsewhere.sock"
    env = {"MCPSUB_STATE_DIR": str(tmp_path / "state")}
    before = run_cli("mcpsubctl", "--api", f"unix://{socket}", "--json", "status", env=env)
    after = run_cli("mcpsubctl", "status", "--api", f"unix://{socket}", "--json", env=env)
    for result in (before, after):
        assert result.code == 10, result
        assert result.json["errorCode"] == "DAEMON_UNAVAILABLE"
        assert str(socket) in result.json["message"]
    assert before.stdout == after.stdout


def test_a_global_flag_a_command_cannot_use_is_a_usage_error() -> None:
    result = run_cli("mcpsubctl", "--api", "unix:///x.sock", "login", "http://127.0.0.1:9/mcp")
    assert result.code == 2
    assert "--api does not apply to `login`" in result.stderr


def test_invalid_event_type_lists_the_valid_ones() -> None:
    result = run_cli("mcpsubctl", "events", "--type", "resource.updated,bogus")
    assert result.code == 2
    assert "invalid event type bogus" in result.stderr
    assert "resource.updated, daemon.storage, webhook.disabled, delivery.dead" in result.stderr
    assert "error-code USAGE_ERROR" in result.stdout


def test_invalid_choice_lists_the_valid_ones() -> None:
    result = run_cli("mcpsubctl", "deliveries", "list", "--state", "bogus")
    assert result.code == 2
    assert "choose from" in result.stderr and "'pending'" in result.stderr


def test_login_without_url_is_a_usage_error() -> None:
    result = run_cli("mcpsubctl", "login")
    assert result.code == 2
    assert result.stdout == "login-status failed\nerror-code SERVER_URL_UNKNOWN\n"


@pytest.mark.parametrize("program", ["mcpsubctl", "mcpsubd", "mcp-lab-server"])
def test_version(program: str) -> None:
    result = run_cli(program, "--version")
    assert result.code == 0
    assert result.stdout.startswith(f"{program} v")


# ---- completion -------------------------------------------------------------------------------
@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_names_every_command_and_flag(shell: str) -> None:
    result = run_cli("mcpsubctl", "completion", shell)
    assert result.code == 0
    assert result.stdout == render(shell, build_parser())
    for node in COMMANDS:
        assert node.path[-1] in result.stdout
        for option in node.options:
            long = next(f for f in option.flags if f.startswith("--"))
            assert (long if shell != "fish" else f"-l {long[2:]}") in result.stdout


def _complete(script: str, *words: str) -> list[str]:
    """Run the generated bash function for ``mcpsubctl WORDS…`` and return its candidates."""
    line = " ".join(f"'{w}'" for w in ("mcpsubctl", *words))
    program = (
        f"{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words)}; _mcpsubctl; "
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    proc = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return proc.stdout.split()


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash not installed")
def test_bash_completion_completes_commands_flags_and_values() -> None:
    script = render("bash", build_parser())
    assert _complete(script, "webh") == ["webhook"]
    assert _complete(script, "webhook", "rot") == ["rotate-secret"]
    assert _complete(script, "--api", "x", "sta") == ["status"]
    assert _complete(script, "events", "--type", "resource") == ["resource.updated"]
    assert _complete(script, "deliveries", "list", "--state", "de") == ["delivered", "dead"]
    assert "--follow" in _complete(script, "events", "--f")


# ---- man pages --------------------------------------------------------------------------------
def test_committed_man_pages_are_generated_from_the_parsers() -> None:
    generated = pages()
    committed = {p.name: p.read_text() for p in (REPO_ROOT / "man").glob("*.1")}
    assert committed == generated, "man pages are stale: run `make man` and commit man/"


def test_man_page_lists_every_command_and_flag() -> None:
    page = pages()["mcpsubctl.1"]
    for node in COMMANDS:
        title = " ".join(("mcpsubctl", *node.path)).replace("-", "\\-")
        assert f'.SS "{title}"' in page
        for option in node.options:
            long = next(f for f in option.flags if f.startswith("--"))
            assert long.replace("-", "\\-") in page
    daemon = pages()["mcpsubd.1"]
    for action in daemon_parser()._actions:
        for flag in action.option_strings:
            assert flag.replace("-", "\\-") in daemon


def test_man_pages_render_without_warnings_in_a_c_locale(tmp_path: Path) -> None:
    """``man mcpsubctl`` under LC_ALL=C warned "can't find special character 'u2026'" (issue
    27 §2): every page renders on the ASCII device with groff's warnings all on, silently."""
    groff = shutil.which("groff")
    assert groff is not None, "groff renders man pages; install it (apt-get install groff)"
    for name, text in pages().items():
        assert text.isascii(), f"{name} has non-ASCII characters"
        page = tmp_path / name
        page.write_text(text)
        done = subprocess.run(
            [groff, "-man", "-Tascii", "-ww", "-z", str(page)],
            capture_output=True,
            text=True,
            env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"},
            check=False,
        )
        assert done.returncode == 0 and done.stderr == "", f"{name}: {done.stderr}"


def test_the_wheel_ships_the_man_pages() -> None:
    text = (REPO_ROOT / "pyproject.toml").read_text()
    assert '"man" = "share/man/man1"' in text


def test_help_formatter_states_meaningful_defaults() -> None:
    events = next(n for n in COMMANDS if n.path == ("events",))
    limit = next(o for o in events.options if "--limit" in o.flags)
    assert "(default: 100)" in limit.help
    follow = next(o for o in events.options if "--follow" in o.flags)
    assert "default: False" not in follow.help
    assert isinstance(build_parser(), argparse.ArgumentParser)


@pytest.mark.parametrize("argv", [[], ["webhook"], ["deliveries"], ["service"], ["--json"]])
def test_a_missing_command_lists_the_commands(argv: list[str]) -> None:
    """Not only "the following arguments are required"."""
    result = run_cli("mcpsubctl", *argv)
    assert result.code == 2
    assert "is required:" in result.stderr and "--help" in result.stderr
    top = argv[:1] if argv and not argv[0].startswith("-") else []
    node = next(n for n in walk(TREE) if n.path == tuple(top)) if top else TREE
    for child in node.children:
        assert f"\n  {child.path[-1]} " in result.stderr, child.path
    if argv == ["--json"]:
        assert json.loads(result.stdout)["errorCode"] == "USAGE_ERROR"
    else:  # a pipe: the one-line machine form, not the listing
        assert result.stdout.splitlines()[0] == "error-code USAGE_ERROR"
        assert len(result.stdout.splitlines()) == 2


@pytest.mark.parametrize(
    ("argv", "where"),
    [
        (["subscribe", "--url", "http://127.0.0.1:1/mcp"], "mcpsubctl subscribe"),
        (["events", "--type", "bogus"], "mcpsubctl events"),
        (["deliveries", "list", "--state", "x"], "mcpsubctl deliveries list"),
        (["nosuch"], "mcpsubctl"),
    ],
)
def test_a_usage_error_ends_with_a_hint(argv: list[str], where: str) -> None:
    """A bad or missing flag: argparse's one line, then where the flags are (no traceback)."""
    result = run_cli("mcpsubctl", *argv)
    assert result.code == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith(f"{where}: ") and len(lines) == 2, result.stderr
    assert lines[1] == f"hint: see `{where} --help`"
    assert result.stdout.splitlines()[0] == "error-code USAGE_ERROR"


def test_one_command_parser_is_the_whole_parsers_part() -> None:
    """`mcpsubctl read …` builds only its group's parser (start-up); it must parse alike."""
    from cli.commands import GROUPS
    from cli.ctl import OWN_COMMANDS

    whole = {n.path: n for n in walk(TREE)}
    names = [name for _m, _f, group in GROUPS for name in group] + list(OWN_COMMANDS)
    assert sorted(names) == sorted(p[0] for p in whole if len(p) == 1)
    for name in names:
        part = {n.path: n for n in walk(command_tree(build_parser(name)))}
        for path, node in part.items():
            if path and path[0] == name:
                assert node.options == whole[path].options, path
                assert node.positionals == whole[path].positionals, path
                assert node.parser.format_help() == whole[path].parser.format_help(), path
        assert (name,) in part


def test_command_word_looks_past_global_flags() -> None:
    from cli.ctl import command_word

    assert command_word(["--api", "unix:///x", "--json", "read", "--uri", "u"]) == "read"
    assert command_word(["--api=unix:///x", "-q", "events"]) == "events"
    assert command_word(["--help"]) is None
    assert command_word([]) is None


def test_lab_help_names_the_control_knob() -> None:
    """README needs MCP_TEST_CONTROL; the lab's own --help says it."""
    result = run_cli("mcp-lab-server", "--help")
    assert result.code == 0 and "MCP_TEST_CONTROL=1" in result.stdout
    assert "docs/labserver.md" in result.stdout


def test_events_takes_after_like_every_other_cursor_and_still_since() -> None:
    """``events --after ID`` as ``wait``, ``tail``, ``deliveries list`` and ``?after=``;
    ``--since ID``, its first name, keeps working for the scripts that use it."""
    parser = build_parser()
    assert parser.parse_args(["events", "--after", "7"]).since == 7
    assert parser.parse_args(["events", "--since", "7"]).since == 7


# ---- make ------------------------------------------------------------------------------------
def test_a_bare_make_lists_the_targets() -> None:
    """A bare ``make`` prints every target, with its line of help, and builds nothing (not
    ``setup``, silently)."""
    make = shutil.which("make")
    assert make is not None
    done = subprocess.run(
        [make, "--no-print-directory"], cwd=REPO_ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    targets = re.findall(r"^  make (\S+)\s+(.*)$", done.stdout, re.MULTILINE)
    names = [name for name, _ in targets]
    for name in ("help", "setup", "run", "test", "lint", "man", "bench", "clean"):
        assert name in names, done.stdout
    assert all(text for _, text in targets), done.stdout
    assert done.stdout.splitlines()[0].startswith("  make help"), done.stdout
