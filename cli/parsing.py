"""argparse pieces every ``mcpsubctl`` command shares: help with defaults, ``--quiet``.

Kept apart from :mod:`cli.ctl` so that the command modules (daemon, webhook, service) can use
them without importing the parser module that imports them.
"""

from __future__ import annotations

import argparse
import os
import sys

TYPE_CHECKING = False  # typing costs more than socket+json: not imported at run time
if TYPE_CHECKING:
    from typing import Any


def _columns() -> int:
    """``shutil.get_terminal_size().columns`` without importing shutil (and bz2, lzma): argparse
    makes a formatter for every ``add_argument``, so the import would cost every command."""
    try:
        return int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        pass
    try:
        return os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        return 80


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the epilog's layout and appends "(default: X)" where a default means something."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 24,
        width: int | None = None,
    ) -> None:
        if width is None:
            width = _columns() - 2  # what argparse's own default computes
        super().__init__(prog, indent_increment, max_help_position, width)

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if (
            text
            and "default" not in text
            and default not in (None, False, [], argparse.SUPPRESS)
            and action.option_strings
        ):
            text += " (default: %(default)s)"
        return text


def add_quiet(p: argparse.ArgumentParser) -> None:
    """``--quiet`` and ``--lines``: how a command talks to a terminal."""
    p.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no live status line on a terminal",
    )
    p.add_argument(
        "--lines",
        action="store_true",
        help="print the error-code lines on stdout even on a terminal",
    )


def sub_parser(sub: Any, name: str, **kwargs: Any) -> argparse.ArgumentParser:
    """``sub.add_parser`` with our help formatter and the help line as the description."""
    kwargs.setdefault("formatter_class", HelpFormatter)
    if "help" in kwargs:
        kwargs.setdefault("description", kwargs["help"])
    parser: argparse.ArgumentParser = sub.add_parser(name, **kwargs)
    return parser
