"""Argument scanning with the TypeScript CLI's rules (seed-behaviour §1.2).

The original does not parse positionally: flags are found anywhere in argv, the first
occurrence of a value option wins, and ``--name value`` and ``--name=value`` both work.
Scripts in the wild depend on those quirks (e.g. repeating ``--url`` and expecting the first),
so this module reproduces them instead of using argparse, whose rules differ.
"""

from __future__ import annotations

import math


class UsageError(ValueError):
    """A malformed command line. The message is shown to the user as is."""


def has_flag(argv: list[str], *names: str) -> bool:
    return any(arg in names for arg in argv)


def option(argv: list[str], name: str) -> str | None:
    """The value of ``--name`` (first occurrence), or None; raises on a missing value."""
    flag = f"--{name}"
    for index, arg in enumerate(argv):
        if arg == flag:
            value = argv[index + 1] if index + 1 < len(argv) else None
            if value is None or value.startswith("--"):
                raise UsageError(f"Missing value for {flag}")
            return value
        if arg.startswith(flag + "="):
            return arg[len(flag) + 1 :]
    return None


def peek(argv: list[str], name: str) -> str | None:
    """Like :func:`option` but never raises: used to report the URL/URI of a bad command."""
    try:
        return option(argv, name)
    except UsageError:
        return None


def parse_timeout_ms(raw: str) -> float:
    """A finite number > 0; decimals and exponents are accepted, as ``Number()`` does."""
    text = raw.strip()
    try:
        # float() also takes "1_000", which JavaScript's Number() (the original) rejects.
        value = float(text) if text and "_" not in text else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise UsageError(f"Invalid --timeout-ms: {raw}")
    return value


def warn_token_flag(prefer: str = "MCP_PROBE_AUTH_TOKEN or --login") -> None:
    """``--auth-token`` puts a secret into ``ps`` output and shell history: say so, once."""
    import sys

    sys.stderr.write(
        "warning: --auth-token value is visible in process lists and shell history; "
        f"prefer {prefer}\n"
    )
