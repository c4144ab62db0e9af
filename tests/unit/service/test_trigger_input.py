"""What a trigger's program is given (service/triggers/program_input.py, pure) and the
bounded tail of its output (service/triggers/process.py)."""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

from service.triggers.process import Tail
from service.triggers.program_input import (
    Change,
    env_entry_problem,
    program_argv,
    program_env,
    shell_safe,
)

HOSTILE = "test://x/a b$(touch pwned)`id`;rm -rf ~|*?[x]'\\\"\n\x1b[2J\u202e"
CHANGE = Change(
    run_id=7, uri=HOSTILE, revision=3, event_id=41, server="http://h/mcp?a=1&b", attempt=2
)


def test_shell_safe_leaves_nothing_a_shell_acts_on() -> None:
    safe = shell_safe(HOSTILE)
    assert safe.startswith("test://x/a%20b%24%28touch%20pwned%29%60id%60%3Brm")
    assert all(ch.isalnum() or ch in "._~:/@+=,%-" for ch in safe)
    assert shell_safe("test://a%20b") == "test://a%20b", "encoded stays encoded"
    assert shell_safe("r\u00e9sum\u00e9") == "r%C3%A9sum%C3%A9"


def test_an_eval_of_the_values_runs_nothing(tmp_path: Path) -> None:
    """Even ``eval "echo $MCPSUB_URI"`` (the worst a shell script does) only echoes."""
    env = program_env({"PATH": "/usr/bin:/bin"}, [], CHANGE)
    done = subprocess.run(
        ["sh", "-c", 'eval "echo $MCPSUB_URI $MCPSUB_SERVER"'],
        env=env, cwd=str(tmp_path), capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout.split() == [env["MCPSUB_URI"], env["MCPSUB_SERVER"]]
    assert not list(tmp_path.iterdir())


def test_the_environment_is_an_allowlist() -> None:
    daemon = {
        "PATH": "/bin", "HOME": "/home/a", "LANG": "C.UTF-8", "AWS_SECRET_ACCESS_KEY": "k",
        "MCPSUB_DATABASE_URL": "postgresql://u:pw@db/x", "PASS_ME": "yes",
    }  # fmt: skip
    env = program_env(daemon, ["PASS_ME", "SET_ME=v=1", "ABSENT"], CHANGE)
    assert env == {
        "PATH": "/bin", "HOME": "/home/a", "LANG": "C.UTF-8", "PASS_ME": "yes",
        "SET_ME": "v=1", "MCPSUB_URI": shell_safe(HOSTILE), "MCPSUB_REVISION": "3",
        "MCPSUB_EVENT_ID": "41", "MCPSUB_SERVER": "http://h/mcp%3Fa=1%26b",
        "MCPSUB_ATTEMPT": "2", "MCPSUB_RUN_ID": "7",
    }  # fmt: skip


def test_placeholders_are_whole_arguments_only() -> None:
    argv = program_argv("/bin/prog", ["{uri}", "--uri={uri}", "{revision}", "{nope}", ""], CHANGE)
    assert argv == ["/bin/prog", shell_safe(HOSTILE), "--uri={uri}", "3", "{nope}", ""]
    assert shlex.split(shlex.join(argv)) == argv


def test_env_entries() -> None:
    assert env_entry_problem("GEMINI_API_KEY") is None
    assert env_entry_problem("X=a=b c") is None
    assert "reserved" in (env_entry_problem("MCPSUB_URI") or "")
    assert "reserved" in (env_entry_problem("mcpsub_x=1") or "")
    assert env_entry_problem("1X") and env_entry_problem("A-B") and env_entry_problem("")
    assert "NUL" in (env_entry_problem("X=a\x00b") or "")


def test_a_tail_keeps_the_last_bytes_and_counts_all() -> None:
    tail = Tail(10)
    for _ in range(1000):
        tail.add(b"0123456789abcdef" * 1000)
    assert tail.total == 16_000_000 and tail.value() == b"6789abcdef"
    assert len(tail.buffer) <= 2 * 10 + 65536
    assert Tail(0).value() == b""
