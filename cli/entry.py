"""Console-script entry points that answer ``--version`` before importing anything heavy.

Scripts call ``mcpsubctl --version`` to check an installation; building the whole argparse
tree for that costs more than the interpreter start (results/probe.md).
"""

from __future__ import annotations

import sys


def mcpsubctl() -> int:
    if sys.argv[1:] == ["--version"]:
        from service._version import __version__

        sys.stdout.write(f"mcpsubctl v{__version__}\n")
        return 0
    if sys.argv[1:2] == ["hook"]:  # a prompt hook runs before every prompt: no parser, no httpx
        from cli.agent_hook import main as hook

        return hook(sys.argv[2:])
    _import_argparse_in_english()
    from cli.ctl import main
    from service.safetext import safe_stderr

    with safe_stderr():  # server text quoted in a diagnostic cannot drive the terminal
        return main()


def _import_argparse_in_english() -> None:
    """Import argparse with its few words of its own ("usage:", "options", …) untranslated.

    argparse passes them through ``gettext``, whose first lookup imports ``locale`` and which
    searches the disk for a catalogue again on every string, on every ``mcpsubctl`` call
    (``results/cli.md`` has the cost).
    CPython ships no translation of them, and everything else mcpsubctl
    prints is English, so the identity is what a user sees anyway. argparse keeps the two
    functions it imported; the real ``gettext`` stays importable for anyone else."""
    if "argparse" in sys.modules or "gettext" in sys.modules:
        return
    english = type(sys)("gettext")
    english.gettext = lambda message: message  # type: ignore[attr-defined]
    english.ngettext = lambda one, many, n: one if n == 1 else many  # type: ignore[attr-defined]
    sys.modules["gettext"] = english
    try:
        import argparse  # noqa: F401  (bound here to the untranslated functions)
    finally:
        del sys.modules["gettext"]
