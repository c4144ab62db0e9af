"""The console scripts' entry points: ``mcpsub:mcpsubctl`` and the others.

The repository keeps mcpsub's packages at its top under generic names (``service``,
``cli``, ``labserver``, ``migrations``). The wheel ships them under one import name,
``mcpsub`` (``mcpsub/service``, …; deploy/hatch_build.py rewrites their imports as it builds),
and installs this module as ``mcpsub/__init__.py`` with :data:`ROOT` set to ``"mcpsub."``.
An editable install (``make setup``) installs this module as it is, and the packages are
imported from the clone under their own names: there, and only there, another
distribution's package of the same name could shadow one of ours. So each program starts
here, imports its real entry point, and when one of the four packages is not mcpsub's (no
``DISTRIBUTION = "mcpsub"`` in its ``__init__``) it says so in one line and exits 70 instead
of failing with a traceback, or worse, running another project's code. The check costs a
dictionary lookup per package already imported.
"""

from __future__ import annotations

import sys

# Where the packages are: "" in the clone; the wheel's build sets "mcpsub." on this line.
ROOT = ""
PACKAGES = tuple(ROOT + name for name in ("cli", "service", "labserver", "migrations"))
EXIT_INTERNAL = 70
INSTALL_HINT = (
    "install mcpsub in an environment of its own: `uv tool install mcpsub` or "
    "`pipx install mcpsub` (docs/operations.md, 'Install')"
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def _import(name: str) -> object:
    """``importlib.import_module`` without importing ``importlib`` (and ``warnings`` with it):
    every program starts here, and the prompt hook's start-up budget counts modules."""
    __import__(name)
    return sys.modules[name]


def foreign_packages(*, import_missing: bool) -> list[str]:
    """The packages of :data:`PACKAGES` that are not mcpsub's, as ``name (path)``."""
    found = []
    for name in PACKAGES:
        module = sys.modules.get(name)
        if module is None and import_missing:
            try:
                module = _import(name)
            except ImportError:
                found.append(f"{name} (missing)")
                continue
        if module is not None and getattr(module, "DISTRIBUTION", None) != "mcpsub":
            where = getattr(module, "__file__", None) or list(getattr(module, "__path__", []))
            found.append(f"{name} ({where})")
    return found


def _clash(program: str, names: list[str]) -> int:
    sys.stderr.write(
        f"{program}: another installed distribution provides the Python package "
        f"{', '.join(names)}, which mcpsub needs under the same name\n"
        f"hint: {INSTALL_HINT}\n"
    )
    return EXIT_INTERNAL


def _start(program: str, module: str, function: str) -> int:
    try:
        entry: Callable[[], int | None] = getattr(_import(module), function)
    except ImportError:
        names = foreign_packages(import_missing=True)
        if names:
            return _clash(program, names)
        raise
    names = foreign_packages(import_missing=False)
    if names:
        return _clash(program, names)
    return entry() or 0


def mcpsubctl() -> int:
    return _start("mcpsubctl", ROOT + "cli.entry", "mcpsubctl")


def mcp_resource_subscriber() -> int:
    return _start("mcp-resource-subscriber", ROOT + "cli.subscriber", "main")


def mcpsubd() -> int:
    return _start("mcpsubd", ROOT + "service.daemon.main", "main")


def mcp_lab_server() -> int:
    return _start("mcp-lab-server", ROOT + "labserver.__main__", "main")
