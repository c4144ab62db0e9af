"""Ships mcpsub's four packages under one import name, ``mcpsub``, in the wheel.

The repository's layout is fixed: ``service``, ``cli``, ``labserver`` and ``migrations`` at
the top, importing each other by those names. Installed as they are, four generic names
would be claimed in ``site-packages`` and could shadow, or be shadowed by, another
distribution's package of the same name. So the wheel (and only the wheel: the repository,
its tests and an editable install keep the layout) holds ``mcpsub/service``, ``mcpsub/cli``,
``mcpsub/labserver`` and ``mcpsub/migrations``, and the absolute imports between them are
rewritten to ``mcpsub.…`` as the wheel is built. ``mcpsub_start.py`` becomes
``mcpsub/__init__.py``: the console scripts' ``mcpsub:mcpsubctl`` and the others.

What is rewritten is exactly what names a module, read from the tokens, never by a text
search: the module of an ``import``/``from`` statement, and a string literal whose whole
value is the dotted name of one of our modules (``"cli.entry"``, ``"service.console"``; what
``importlib``, ``-m`` and ``importlib.resources`` are given). A name that is not one of our
modules (``"service"`` as a sub-command, ``"cli.md"``) is left alone. The wheel's own test
(tests/deploy/test_wheel.py) checks that no import of the old names is left, and runs the
installed programs.
"""

from __future__ import annotations

import ast
import io
import shutil
import tempfile
import tokenize
from pathlib import Path
from typing import Any

try:
    from hatchling.builders.hooks.plugin.interface import BuildHookInterface
except ImportError:  # tests/deploy/test_wheel.py checks the rewrite, without hatchling
    BuildHookInterface = object  # type: ignore[assignment,misc]

PACKAGES = ("service", "cli", "labserver", "migrations")
NAME = "mcpsub"
START = "mcpsub_start.py"
# The one line of mcpsub_start.py that says where the packages are.
START_ROOT = 'ROOT = ""\n'
SKIP_PARTS = {"__pycache__"}
SKIP_SUFFIXES = {".pyc", ".pyo", ".db", ".sqlite", ".sqlite3"}


def is_our_module(dotted: str, root: Path) -> bool:
    """``dotted`` names a module or package of ours in the source tree at ``root``."""
    parts = dotted.split(".")
    if parts[0] not in PACKAGES or not all(part.isidentifier() for part in parts):
        return False
    path = root.joinpath(*parts)
    return (path / "__init__.py").is_file() or path.with_suffix(".py").is_file()


def rewrite(source: str, root: Path) -> str:
    """``source`` with every reference to one of our modules moved under :data:`NAME`."""
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    edits: dict[tuple[int, int], tuple[int, int, str]] = {}
    previous = ""  # the last significant token, "" at a statement's start
    expect_module = False  # the next name starts a module path
    plain_import = False  # inside ``import a, b`` (not ``from a import b, c``)
    for token in tokens:
        kind, text = token.type, token.string
        if kind in (tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT):
            previous, expect_module, plain_import = "", False, False
            continue
        if kind in (tokenize.NL, tokenize.COMMENT):
            continue
        at_start = previous in ("", ";", ":")
        if kind == tokenize.NAME and text == "from" and at_start:
            expect_module = True
        elif kind == tokenize.NAME and text == "import" and at_start:
            expect_module = plain_import = True
        elif kind == tokenize.NAME and expect_module:
            if text in PACKAGES:
                edits[token.start] = (*token.end, f"{NAME}.{text}")
            expect_module = False  # only the first name of a dotted path
        elif kind == tokenize.OP and text == "," and plain_import:
            expect_module = True
        elif kind == tokenize.STRING and text[:1] in "\"'":
            value = ast.literal_eval(text)
            if isinstance(value, str) and "." in value and is_our_module(value, root):
                quote = text[: 3 if text[:3] in ('"""', "'''") else 1]
                edits[token.start] = (*token.end, f"{quote}{NAME}.{value}{quote}")
        if kind == tokenize.OP and text == ";":
            plain_import = False
        previous = text
    lines = source.splitlines(keepends=True)
    for (row, col), (end_row, end_col, replacement) in sorted(edits.items(), reverse=True):
        assert end_row == row, "a module name or module string spans one line"
        line = lines[row - 1]
        lines[row - 1] = line[:col] + replacement + line[end_col:]
    return "".join(lines)


def _skipped(relative: Path) -> bool:
    """Build leftovers and local databases, which .gitignore keeps out of the clone."""
    return bool(SKIP_PARTS & set(relative.parts)) or relative.suffix in SKIP_SUFFIXES


def start_module(source: str) -> str:
    if source.count(START_ROOT) != 1:
        raise RuntimeError(f"{START}: expected one line {START_ROOT.strip()!r}")
    return source.replace(START_ROOT, f'ROOT = "{NAME}."\n')


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if self.target_name != "wheel":
            return
        root = Path(self.root)
        include: dict[str, str] = build_data["force_include"]
        if version == "editable":
            # The packages stay where they are (the .pth adds the clone); only the start
            # module is installed, as it is, under the one name.
            include[str(root / START)] = f"{NAME}/__init__.py"
            return
        self._out = Path(tempfile.mkdtemp(prefix="mcpsub-wheel-"))
        start = self._out / START
        start.write_text(start_module((root / START).read_text(encoding="utf-8")))
        include[str(start)] = f"{NAME}/__init__.py"
        for package in PACKAGES:
            for path in sorted((root / package).rglob("*")):
                relative = path.relative_to(root)
                if path.is_dir() or _skipped(relative):
                    continue
                target = self._out / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                if path.suffix == ".py":
                    text = path.read_text(encoding="utf-8")
                    target.write_text(rewrite(text, root), encoding="utf-8")
                else:
                    shutil.copyfile(path, target)
                include[str(target)] = f"{NAME}/{relative.as_posix()}"
        # With no package of the wheel's own selection, hatchling selects nothing from the
        # shared-data folders either: name their files one by one (the folders are ours).
        shared: dict[str, str] = build_data["shared_data"]
        for source, target_dir in self.build_config.shared_data.items():
            folder = Path(source)
            if not folder.is_dir():
                continue
            for path in sorted(folder.rglob("*")):
                relative = path.relative_to(folder)
                if path.is_dir() or path == Path(__file__).resolve() or _skipped(relative):
                    continue
                shared[str(path)] = f"{target_dir}/{relative.as_posix()}"

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        out = getattr(self, "_out", None)
        if out is not None:
            shutil.rmtree(out, ignore_errors=True)
