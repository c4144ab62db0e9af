"""One table of error codes (service/errorcodes.py): every code raised anywhere in ``service/``
or ``cli/`` has its row, every error class agrees with it, and docs/cli.md's exit-code tables
say what it says."""

from __future__ import annotations

import importlib
import pkgutil
import re
from pathlib import Path

import pytest

import service.api.routes
from cli.exitcodes import CTL_EXIT_CODES, ctl_exit_code
from service import errorcodes
from service.app.errors import AgentError, ApiError
from service.errorcodes import CODES
from service.mcp.errors import McpError

ROOT = Path(__file__).resolve().parents[2]
CODE = r'"([A-Z][A-Z0-9]*(?:_[A-Z0-9]+)+)"'
RAISED = [
    re.compile(r"\berror_code\s*(?::[^=\n]*)?=\s*" + CODE),  # a class's code, a result's
    re.compile(r"\bcode\s*=\s*" + CODE),
    re.compile(r'"errorCode"\s*:\s*' + CODE),  # a JSON body written by hand
    re.compile(r"\berrorCode\s*=\s*" + CODE),
    re.compile(r"\bget\(\s*\"errorCode\",\s*" + CODE),
    # AgentError("X", …), tool_error, error_body, the guard's _reject(send, 400, "X")
    re.compile(
        r"\b\w*(?:Error|error|Failure|failure|reject|fail)\(\s*(?:[\w.]+,\s*(?:\d{3},\s*)?)?" + CODE
    ),
    re.compile(r"\breturn\s+" + CODE),  # the classifiers
    re.compile(r"\b\d{3}:\s*\(\s*" + CODE),  # the API's status → code table
    re.compile(r"\b([A-Z][A-Z0-9_]+)\s*(?::\s*Final)?\s*=\s*\"\1\""),  # NOT_MCPSUBD = "NOT_MCPSUBD"
]


def raised_codes() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for top in ("service", "cli"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path.name == "errorcodes.py":
                continue
            text = path.read_text(encoding="utf-8")
            for pattern in RAISED:
                for match in pattern.finditer(text):
                    found.setdefault(match.group(1), set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_code_raised_anywhere_has_its_row() -> None:
    raised = raised_codes()
    # The scan itself sees the codes of each way of raising one.
    for code in ("TOO_MANY_WAITERS", "AGENT_ORIGIN_NOT_ALLOWED", "DUPLICATE_HEADER", "NOT_FOUND"):
        assert code in raised, code
    missing = {code: sorted(paths) for code, paths in raised.items() if code not in CODES}
    assert missing == {}, "add a row to service/errorcodes.py for each of these"


def test_the_scan_finds_a_code_with_no_row(tmp_path: Path) -> None:
    text = (
        'raise AgentError(\n    "NO_SUCH_CODE_YET", "m")\nclass X:\n    error_code = "OTHER_NEW"\n'
    )
    found = {m.group(1) for p in RAISED for m in p.finditer(text)}
    assert found == {"NO_SUCH_CODE_YET", "OTHER_NEW"}


def all_subclasses(cls: type) -> list[type]:
    out = []
    for sub in cls.__subclasses__():
        out += [sub, *all_subclasses(sub)]
    return out


def test_every_error_class_reads_its_row() -> None:
    for info in pkgutil.iter_modules(service.api.routes.__path__):
        importlib.import_module(f"service.api.routes.{info.name}")
    importlib.import_module("service.auth.errors")
    importlib.import_module("service.daemon.fdbudget")
    api = all_subclasses(ApiError)
    assert len(api) >= 20
    for cls in api:
        row = CODES[cls.error_code]
        assert (cls.status, cls.default_hint) == (row.status, row.hint), cls
    for cls in all_subclasses(McpError):
        assert cls.error_code in CODES, cls


def test_agent_errors_take_status_and_hint_from_the_table() -> None:
    refused = AgentError("AGENT_ORIGIN_NOT_ALLOWED", "outside the policy")
    assert (refused.status, refused.error_code, refused.hint) == (
        403,
        "AGENT_ORIGIN_NOT_ALLOWED",
        None,
    )
    gone = AgentError("NOT_WATCHED", "removed meanwhile")
    assert gone.hint == CODES["NOT_WATCHED"].hint
    assert AgentError("INVALID_URL", "bad", "own hint").hint == "own hint"


@pytest.mark.parametrize(
    ("code", "exit_code"),
    [
        ("TOO_MANY_WAITERS", 10),
        ("REVISION_NOT_FOUND", 7),
        ("BODY_TOO_LARGE", 2),
        ("DIFF_TOO_LARGE", 2),
        ("RESOURCE_LIMIT", 10),
        ("CONSOLE_NEEDS_TCP", 2),
        ("CONSOLE_LISTENER_UNAVAILABLE", 2),
        ("NOT_MCPSUBD", 11),
        (None, 0),
        ("A_CODE_NOBODY_SENDS", 70),
    ],
)
def test_the_cli_reads_its_exit_codes_from_the_table(code: str | None, exit_code: int) -> None:
    assert ctl_exit_code(code) == exit_code
    if code in CODES:
        assert CTL_EXIT_CODES[code] == exit_code


def doc_tables() -> dict[str, int | None]:
    """Each code in docs/cli.md's ``| errorCode | … |`` tables → its ``mcpsubctl`` exit (the
    last cell; None where it says "–")."""
    found: dict[str, int | None] = {}
    in_table = False
    for line in (ROOT / "docs" / "cli.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("| errorCode |"):
            in_table = True
            continue
        if not line.startswith("|"):
            in_table = False
        if not in_table or line.startswith("|---"):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        last = cells[-1]
        named = re.sub(r"\([^()]*\)", "", cells[0])  # not what a remark in brackets names
        for code in re.findall(r"`([A-Z][A-Z0-9_]+)`", named):
            found[code] = int(last) if last.isdigit() else None
    return found


def test_docs_exit_code_tables_agree_with_the_table() -> None:
    documented = doc_tables()
    wrong = {
        code: (exit_code, CODES[code].exit if code in CODES else "no row")
        for code, exit_code in documented.items()
        if exit_code is not None and (code not in CODES or CODES[code].exit != exit_code)
    }
    assert wrong == {}
    answered = {code for code, row in CODES.items() if row.status is not None}
    assert sorted(answered - set(documented)) == [], "document these in docs/cli.md"


def test_http_status_defaults() -> None:
    assert errorcodes.http_status("REVISION_NOT_FOUND") == 404
    assert errorcodes.http_status("NO_SUCH_CODE") == 400
    assert errorcodes.http_status("RESOURCE_LIMIT", 503) == 503
