"""The native zsh completion (``mcpsubctl completion zsh``): generated from the parser.

Structural tests run everywhere: every command has its function and is dispatched, every
flag appears with its help, every fixed value set is listed. Where zsh is installed the
script must parse (``zsh -n``) and complete for real: an interactive zsh on a pseudo-terminal
(``zpty``) loads it after ``compinit``, completion runs at the end of each line below (a
widget that completes and then prints an end marker), and the candidates ``compadd`` was
given are compared.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from cli.completion import _zsh_function, _zsh_text, render
from cli.ctl import build_parser
from cli.parsertree import command_tree, walk
from tests.support import skips

TREE = command_tree(build_parser())
SCRIPT = render("zsh", build_parser())
ZSH = shutil.which("zsh")

CAPTURE = r"""
zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PROMPT=''; RPROMPT=''"
zpty -w z "autoload -U compinit; compinit -u -D"
zpty -w z "source ${(q)1}"
zpty -w z "compadd () { local -a __h; builtin compadd -A __h \"\$@\"; print -rl -- '<<' \$__h '>>' > /dev/tty; builtin compadd \"\$@\" }"
zpty -w z "zle -C _capture_complete complete-word _main_complete"
zpty -w z "_capture() { zle _capture_complete; print -r -- 'END''MARK' > /dev/tty; BUFFER='' }"
zpty -w z "zle -N _capture; bindkey '^X' _capture"
zpty -w z "echo READY''MARK"
zpty -r z line '*READYMARK*'
shift
for words in "$@"; do
  # One widget completes, then prints the end marker: no keys typed ahead of the
  # completion (zsh may cut a completion short when input is pending).
  zpty -w -n z "$words"$'\C-x'
  zpty -r z out '*ENDMARK*'
  print -r -- "==CASE"
  print -r -- "$out"
done
zpty -d z
"""


def test_it_is_a_native_zsh_completion() -> None:
    assert SCRIPT.startswith("#compdef mcpsubctl\n")
    assert "bashcompinit" not in SCRIPT and "COMPREPLY" not in SCRIPT
    assert "_arguments" in SCRIPT and "compdef _mcpsubctl mcpsubctl" in SCRIPT


def test_every_command_has_a_function_and_is_dispatched() -> None:
    for node in walk(TREE):
        assert f"\n{_zsh_function(node)}() {{\n" in SCRIPT, node.path
        if node.path:
            name = node.path[-1]
            assert f"                {name}) {_zsh_function(node)} && ret=0 ;;" in SCRIPT
            assert f"'{name}:" in SCRIPT, f"{name} is not described"


def test_every_flag_appears_with_its_help_and_its_values() -> None:
    checked = 0
    for node in walk(TREE):
        body = SCRIPT.split(f"\n{_zsh_function(node)}() {{\n", 1)[1].split("\n}\n", 1)[0]
        for option in node.options:
            for flag in option.flags:
                value = ("=" if flag.startswith("--") else "+") if option.takes_value else ""
                help_text = _zsh_text(option.help).replace("'", "'\\''")
                assert f"{flag}{value}[{help_text}]" in body, (node.path, flag)
                checked += 1
            if option.choices:
                assert "(" + " ".join(option.choices) + ")" in body, (node.path, option.flags)
        for positional in node.positionals:
            if positional.choices:
                assert "(" + " ".join(positional.choices) + ")" in body
    assert checked > 100


def test_repeatable_flags_may_recur() -> None:
    probe = SCRIPT.split("\n_mcpsubctl_probe() {\n", 1)[1].split("\n}\n", 1)[0]
    assert "'*--uri=[" in probe
    assert "'(-q --quiet)-q[" in SCRIPT.split("\n_mcpsubctl() {\n", 1)[1]


def _complete(tmp_path: Path, *lines: str) -> list[set[str]]:
    assert ZSH is not None
    script = tmp_path / "_mcpsubctl"
    script.write_text(SCRIPT)
    capture = tmp_path / "capture.zsh"
    capture.write_text(CAPTURE)
    proc = subprocess.run(
        [ZSH, "-f", str(capture), str(script), *lines],
        capture_output=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "TERM": "dumb", "HOME": str(tmp_path)},
    )
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", proc.stdout.decode(errors="replace"))
    text = text.replace("\r", "")
    cases = text.split("==CASE\n")[1:]
    assert len(cases) == len(lines), text
    found = []
    for case in cases:
        words: set[str] = set()
        for group in re.findall(r"<<\n(.*?)>>", case, re.S):
            words.update(group.split())
        found.append(words)
    return found


@pytest.mark.skipif(ZSH is None, reason=skips.because("zsh", "zsh is not installed"))
def test_zsh_parses_the_script(tmp_path: Path) -> None:
    assert ZSH is not None
    path = tmp_path / "_mcpsubctl"
    path.write_text(SCRIPT)
    proc = subprocess.run([ZSH, "-n", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.skipif(ZSH is None, reason=skips.because("zsh", "zsh is not installed"))
def test_zsh_completes_commands_flags_and_values(tmp_path: Path) -> None:
    webh, rot, types, states, follow, status, shells, add = _complete(
        tmp_path,
        "mcpsubctl webh",
        "mcpsubctl webhook rot",
        "mcpsubctl events --type resource",
        "mcpsubctl deliveries list --state de",
        "mcpsubctl events --f",
        "mcpsubctl --api x sta",
        "mcpsubctl completion ",
        "mcpsubctl webhook add http://x --mo",
    )
    assert webh == {"webhook"}
    assert rot == {"rotate-secret"}
    assert types == {"resource.updated"}
    assert states == {"delivered", "dead"}
    assert "--follow" in follow
    assert status == {"status"}
    assert shells == {"bash", "zsh", "fish"}
    assert "--mode" in add
