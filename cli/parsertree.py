"""A flat view of an argparse parser tree, for the completion and man-page generators.

Both generators read the same parser ``mcpsubctl`` parses with, so a new command or flag
shows up in completions and man pages without anyone editing a script by hand.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Option:
    flags: tuple[str, ...]
    help: str
    takes_value: bool
    choices: tuple[str, ...] = ()
    metavar: str | None = None
    repeatable: bool = False
    """May be given more than once (``append``/``count``: ``--uri A --uri B``)."""


@dataclass(frozen=True)
class Positional:
    name: str
    help: str
    choices: tuple[str, ...] = ()
    optional: bool = False


@dataclass
class Command:
    """One parser in the tree: ``path`` is () for the program, ("webhook", "add") deeper."""

    path: tuple[str, ...]
    parser: argparse.ArgumentParser
    help: str = ""
    options: list[Option] = field(default_factory=list)
    positionals: list[Positional] = field(default_factory=list)
    children: list[Command] = field(default_factory=list)


def _help(action: argparse.Action, formatter: argparse.HelpFormatter) -> str:
    if action.help in (None, argparse.SUPPRESS):
        return ""
    expand = getattr(formatter, "_expand_help", None)
    text = expand(action) if expand is not None else str(action.help)
    return " ".join(str(text).split())


def command_tree(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = (), help_text: str = ""
) -> Command:
    node = Command(path, parser, help_text or (parser.description or ""))
    formatter = parser._get_formatter()
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: str(a.help or "") for a in action._choices_actions}
            for name, child in action.choices.items():
                node.children.append(command_tree(child, (*path, name), helps.get(name, "")))
            continue
        # A custom ``type`` (comma lists) can still name its values for completions.
        listed = action.choices or getattr(action, "completion_choices", None) or ()
        choices = tuple(str(c) for c in listed)
        if action.option_strings:
            node.options.append(
                Option(
                    tuple(action.option_strings),
                    _help(action, formatter),
                    action.nargs != 0,
                    choices,
                    str(action.metavar or action.dest.upper()) if action.nargs != 0 else None,
                    isinstance(action, (argparse._AppendAction, argparse._CountAction)),
                )
            )
        else:
            node.positionals.append(
                Positional(
                    str(action.metavar or action.dest),
                    _help(action, formatter),
                    choices,
                    action.nargs in ("?", "*"),
                )
            )
    return node


def walk(node: Command) -> Iterator[Command]:
    yield node
    for child in node.children:
        yield from walk(child)
