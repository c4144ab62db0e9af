"""The console scripts' entry points, in a module whose name no other distribution uses.

mcpsub's packages have generic names (``service``, ``cli``, ``labserver``, ``migrations``):
the repository keeps that layout, and the wheel installs them as they are. Installed into an
environment shared with another distribution that has a package of the same name, one
would shadow or overwrite the other. The recommended installs are isolated (``uv tool
install mcpsub``, ``pipx install mcpsub``; docs/operations.md), and this module is the
guard for the others: each program starts here, imports its real entry point, and when one
of the four packages is not mcpsub's (no ``DISTRIBUTION = "mcpsub"`` in its ``__init__``)
it says so in one line and exits 70 instead of failing with a traceback, or worse, running
another project's code. The check costs a dictionary lookup per package already imported.
"""

from __future__ import annotations

import sys

PACKAGES = ("cli", "service", "labserver", "migrations")
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
    return _start("mcpsubctl", "cli.entry", "mcpsubctl")


def mcp_resource_subscriber() -> int:
    return _start("mcp-resource-subscriber", "cli.subscriber", "main")


def mcpsubd() -> int:
    return _start("mcpsubd", "service.daemon.main", "main")


def mcp_lab_server() -> int:
    return _start("mcp-lab-server", "labserver.__main__", "main")
