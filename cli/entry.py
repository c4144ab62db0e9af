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
    from cli.ctl import main
    from service.safetext import safe_stderr

    with safe_stderr():  # server text quoted in a diagnostic cannot drive the terminal
        return main()
