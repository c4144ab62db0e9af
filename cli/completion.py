"""Shell completion scripts for ``mcpsubctl`` (bash, zsh, fish), generated from its parser.

``mcpsubctl completion bash`` prints the script; nothing here is written by hand per
command: :func:`render` walks the argparse tree (:mod:`cli.parsertree`), so a new command or
flag completes as soon as it is parsed. zsh loads the bash function through ``bashcompinit``.
"""

from __future__ import annotations

import argparse
import shlex

from cli.parsertree import Command, command_tree, walk

PROG = "mcpsubctl"


def _words(node: Command) -> list[str]:
    words = [child.path[-1] for child in node.children]
    for positional in node.positionals:
        words += list(positional.choices)
    for option in node.options:
        words += [f for f in option.flags if f.startswith("--")] or list(option.flags)
    return words


def bash(tree: Command) -> str:
    transitions = []
    for node in walk(tree):
        for child in node.children:
            transitions.append(f'"{" ".join(node.path)}:{child.path[-1]}"')
    values = []
    for node in walk(tree):
        for option in node.options:
            if option.choices:
                for flag in option.flags:
                    pattern = f'"{" ".join(node.path)}:{flag}"'
                    words = shlex.quote(" ".join(option.choices))
                    values.append(
                        f'        {pattern}) COMPREPLY=($(compgen -W {words} -- "$cur")); return;;'
                    )
    cases = []
    for node in walk(tree):
        words = shlex.quote(" ".join(_words(node)))
        cases.append(f'        "{" ".join(node.path)}") words={words};;')
    lines = [
        f"# bash completion for {PROG}; generated from its argument parser by",
        f"# `{PROG} completion bash`. Load it with: source <({PROG} completion bash)",
        f"_{PROG}() {{",
        '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
        '    local path="" word words i',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        word="${COMP_WORDS[i]}"',
        '        case "$path:$word" in',
        "            " + "|".join(transitions) + ') path="${path:+$path }$word";;',
        "        esac",
        "    done",
        '    case "$path:$prev" in',
        *values,
        "    esac",
        '    case "$path" in',
        *cases,
        '        *) words="";;',
        "    esac",
        '    COMPREPLY=($(compgen -W "$words" -- "$cur"))',
        "}",
        f"complete -F _{PROG} {PROG}",
        "",
    ]
    return "\n".join(lines)


def zsh(tree: Command) -> str:
    return "\n".join(
        [
            f"#compdef {PROG}",
            f"# zsh completion for {PROG}: the generated bash function, through bashcompinit.",
            f"# Load it with: source <({PROG} completion zsh)",
            "autoload -U +X bashcompinit && bashcompinit",
            bash(tree),
        ]
    )


def _fish_quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish(tree: Command) -> str:
    lines = [
        f"# fish completion for {PROG}; generated from its argument parser by",
        f"# `{PROG} completion fish`. Install: {PROG} completion fish > "
        f"~/.config/fish/completions/{PROG}.fish",
        f"complete -c {PROG} -f",
    ]
    for node in walk(tree):
        if node.path:
            seen = "; and ".join(f"__fish_seen_subcommand_from {p}" for p in node.path)
        else:
            seen = ""
        if node.children:
            names = " ".join(child.path[-1] for child in node.children)
            condition = f"{seen + '; and ' if seen else ''}not __fish_seen_subcommand_from {names}"
            for child in node.children:
                lines.append(
                    f"complete -c {PROG} -n {_fish_quote(condition)} -a {child.path[-1]} "
                    f"-d {_fish_quote(child.help[:80])}"
                )
        for positional in node.positionals:
            if positional.choices and seen:
                lines.append(
                    f"complete -c {PROG} -n {_fish_quote(seen)} "
                    f"-a {_fish_quote(' '.join(positional.choices))}"
                )
        for option in node.options:
            parts = [f"complete -c {PROG}"]
            if seen:
                parts.append(f"-n {_fish_quote(seen)}")
            for flag in option.flags:
                parts.append(f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}")
            if option.choices:
                parts.append(f"-x -a {_fish_quote(' '.join(option.choices))}")
            elif option.takes_value:
                parts.append("-r")
            if option.help:
                parts.append(f"-d {_fish_quote(option.help[:80])}")
            lines.append(" ".join(parts))
    return "\n".join(lines) + "\n"


RENDERERS = {"bash": bash, "zsh": zsh, "fish": fish}


def render(shell: str, parser: argparse.ArgumentParser) -> str:
    return RENDERERS[shell](command_tree(parser))
