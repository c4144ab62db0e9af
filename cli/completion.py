"""Shell completion scripts for ``mcpsubctl`` (bash, zsh, fish), generated from its parser.

``mcpsubctl completion bash`` prints the script; nothing here is written by hand per
command: :func:`render` walks the argparse tree (:mod:`cli.parsertree`), so a new command or
flag completes as soon as it is parsed. zsh gets a native ``_arguments`` script (one
function per command, each flag with its help, fixed value sets listed), fish its
``complete`` lines.
"""

from __future__ import annotations

import argparse
import shlex

from cli.parsertree import Command, Option, command_tree, walk

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


def _zsh_quote(text: str) -> str:
    """One single-quoted zsh word."""
    return "'" + text.replace("'", "'\\''") + "'"


def _zsh_text(text: str, limit: int = 200) -> str:
    """Help text inside an ``_arguments`` spec's ``[…]``: brackets and colons escaped."""
    text = " ".join(text.split())[:limit]
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]").replace(":", "\\:")


def _zsh_function(node: Command) -> str:
    return "_" + "_".join([PROG, *node.path]).replace("-", "_")


def _zsh_action(choices: tuple[str, ...]) -> str:
    return "(" + " ".join(c.replace(" ", "\\ ") for c in choices) + ")" if choices else " "


def _zsh_option_specs(option: Option) -> list[str]:
    """``_arguments`` specs for one option: one per spelling, each excluding the others
    (a repeatable option excludes nothing and may recur)."""
    flags = option.flags
    exclude = "" if option.repeatable or len(flags) < 2 else "(" + " ".join(flags) + ")"
    star = "*" if option.repeatable else ""
    specs = []
    for flag in flags:
        spec = f"{exclude}{star}{flag}"
        if option.takes_value:
            spec += "=" if flag.startswith("--") else "+"
        spec += f"[{_zsh_text(option.help)}]"
        if option.takes_value:
            message = _zsh_text(option.metavar or "value", 40).lower()
            spec += f":{message}:{_zsh_action(option.choices)}"
        specs.append(spec)
    return specs


def zsh(tree: Command) -> str:
    """A native zsh completion: ``#compdef`` + ``_arguments``, one function per command.

    Works both ways zsh loads completions: as a file named ``_mcpsubctl`` in ``$fpath``
    (autoloaded; the last lines then run the function) or sourced (``source <(mcpsubctl
    completion zsh)`` after ``compinit``; the last lines then register it with ``compdef``).
    """
    lines = [
        f"#compdef {PROG}",
        f"# zsh completion for {PROG}; generated from its argument parser by",
        f"# `{PROG} completion zsh`. Load it with: source <({PROG} completion zsh)",
        f"# (after compinit), or save it as _{PROG} in a directory on $fpath.",
        "",
    ]
    for node in walk(tree):
        specs = ["-S"] if not node.children else ["-C"]
        for option in node.options:
            specs += _zsh_option_specs(option)
        if node.children:
            specs += ["1: :->command", "*:: :->argument"]
        else:
            for index, positional in enumerate(node.positionals, start=1):
                colon = "::" if positional.optional else ":"
                message = _zsh_text(positional.help or positional.name, 60)
                specs.append(f"{index}{colon}{message}:{_zsh_action(positional.choices)}")
        body = [f"{_zsh_function(node)}() {{"]
        if node.children:
            body += [
                "    local context state state_descr line ret=1",
                "    typeset -A opt_args",
            ]
        body.append(
            "    _arguments "
            + " \\\n        ".join(_zsh_quote(s) for s in specs)
            + (" && ret=0" if node.children else "")
        )
        if node.children:
            described = [
                _zsh_quote(f"{child.path[-1]}:{' '.join(child.help.split())}")
                for child in node.children
            ]
            name = " ".join([PROG, *node.path])
            body += [
                "    case $state in",
                "        command)",
                "            local -a commands",
                "            commands=(",
                *[f"                {d}" for d in described],
                "            )",
                f"            _describe -t commands {_zsh_quote(name + ' command')} commands"
                " && ret=0",
                "            ;;",
                "        argument)",
                "            case $words[1] in",
                *[
                    f"                {child.path[-1]}) {_zsh_function(child)} && ret=0 ;;"
                    for child in node.children
                ],
                "            esac",
                "            ;;",
                "    esac",
                "    return ret",
            ]
        body.append("}")
        lines += [*body, ""]
    lines += [
        "if [[ $zsh_eval_context[-1] == loadautofunc ]]; then",
        f'    {_zsh_function(tree)} "$@"',
        "else",
        f"    compdef {_zsh_function(tree)} {PROG}",
        "fi",
        "",
    ]
    return "\n".join(lines)


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
