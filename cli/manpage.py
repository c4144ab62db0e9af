"""Man pages for the four programs, generated from the parsers they parse with.

``python -m cli.manpage man`` (``make man``) writes ``man/<program>.1``; the wheel installs
them to ``share/man/man1`` (pyproject ``shared-data``), and a test fails when a committed page
differs from what the parsers produce now. ``mcp-resource-subscriber`` has no argparse
parser (it scans argv the way the original does), so its page is built from its ``--help``
text, the same text the program prints.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cli.parsertree import Command, Option, command_tree, walk

SOURCE = "mcpsub"
MANUAL = "User Commands"


GLYPHS = {"\u2026": "...", "\u2014": "\\(em", "\u2013": "\\(en", "\u2192": "\\(->"}
"""Non-ASCII characters our help texts use, as roff glyphs that every output device has:
``man`` in a C locale renders for ASCII, where ``\\[u2026]`` is a "can't find special
character" warning."""


def esc(text: str) -> str:
    """Roff-safe text: backslashes, hyphens, and a leading dot or quote neutralised; the
    non-ASCII characters of :data:`GLYPHS` spelled so an ASCII device has them, any other as
    ``\\[uXXXX]`` (groff's own fallback where it has one)."""
    text = text.replace("\\", "\\e").replace("-", "\\-")
    if not text.isascii():
        text = "".join(c if c.isascii() else GLYPHS.get(c, f"\\[u{ord(c):04X}]") for c in text)
    if text.startswith((".", "'")):
        text = "\\&" + text
    return text


def _option(option: Option) -> list[str]:
    flags = ", ".join(f"\\fB{esc(flag)}\\fR" for flag in option.flags)
    if option.takes_value:
        value = "{" + ",".join(option.choices) + "}" if option.choices else option.metavar or ""
        # \\: lets a long list of choices break after a comma (else "cannot adjust line")
        shown = esc(value).replace(",", ",\\:")
        flags += f" \\fI{shown}\\fR"
    return [".TP", flags, esc(option.help or "")]


def _usage(parser: argparse.ArgumentParser) -> str:
    text = parser.format_usage().strip()
    return text[len("usage: ") :] if text.startswith("usage: ") else text


def _literal(text: str) -> list[str]:
    return [".nf", *(esc(line) for line in text.rstrip().splitlines()), ".fi"]


def render(name: str, parser: argparse.ArgumentParser, summary: str | None = None) -> str:
    tree = command_tree(parser)
    lines = [
        f'.TH {name.upper()} 1 "" "{SOURCE}" "{MANUAL}"',
        ".SH NAME",
        f"{esc(name)} \\- {esc(summary or parser.description or '')}",
        ".SH SYNOPSIS",
        *_literal(_usage(parser)),
        ".SH DESCRIPTION",
        esc(parser.description or ""),
    ]
    for positional in tree.positionals:
        lines += [".TP", f"\\fI{esc(positional.name)}\\fR", esc(positional.help)]
    if tree.options:
        lines.append(".SH OPTIONS")
        for option in tree.options:
            lines += _option(option)
    commands = [node for node in walk(tree) if node.path]
    if commands:
        lines.append(".SH COMMANDS")
        for node in commands:
            lines += _command(name, node)
    if parser.epilog:
        lines += [".SH NOTES", *_literal(parser.epilog)]
    return "\n".join(lines) + "\n"


def _command(name: str, node: Command) -> list[str]:
    lines = [f'.SS "{esc(" ".join((name, *node.path)))}"', esc(node.help)]
    description = " ".join((node.parser.description or "").split())
    if description and description != node.help:  # it says more than the one-line help
        lines += [".PP", esc(description)]
    if not node.children:
        lines += [".PP", *_literal(_usage(node.parser))]
    for positional in node.positionals:
        lines += [".TP", f"\\fI{esc(positional.name)}\\fR", esc(positional.help)]
    for option in node.options:
        if option.flags != ("-h", "--help"):
            lines += _option(option)
    return lines


def render_text_page(name: str, summary: str, help_text: str) -> str:
    return (
        "\n".join(
            [
                f'.TH {name.upper()} 1 "" "{SOURCE}" "{MANUAL}"',
                ".SH NAME",
                f"{esc(name)} \\- {esc(summary)}",
                ".SH DESCRIPTION",
                *_literal(help_text),
            ]
        )
        + "\n"
    )


def pages() -> dict[str, str]:
    """File name → page, for every program we install (the same on every machine)."""
    import os

    saved = dict(os.environ)
    # Help texts show env-derived defaults and argparse wraps usage to the terminal width.
    for name in [n for n in os.environ if n.startswith(("MCP_PROBE_", "MCPSUB_", "MCP_TEST_"))]:
        del os.environ[name]
    os.environ["COLUMNS"] = "80"
    try:
        return _pages()
    finally:
        os.environ.clear()
        os.environ.update(saved)


def _pages() -> dict[str, str]:
    from cli.ctl import build_parser as ctl_parser
    from cli.subscriber import HELP, PROGRAM
    from labserver.__main__ import build_parser as lab_parser
    from labserver.settings import settings_from_env
    from service.daemon.main import build_parser as daemon_parser

    return {
        "mcpsubctl.1": render("mcpsubctl", ctl_parser(), "mcpsub control"),
        "mcpsubd.1": render("mcpsubd", daemon_parser(), "mcpsub daemon"),
        "mcp-lab-server.1": render(
            "mcp-lab-server", lab_parser(settings_from_env({})), "reference MCP test server"
        ),
        PROGRAM + ".1": render_text_page(
            PROGRAM, "wait for the next update of an MCP resource", HELP
        ),
    }


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    out = Path(args[0] if args else "man")
    out.mkdir(parents=True, exist_ok=True)
    for filename, text in pages().items():
        (out / filename).write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
