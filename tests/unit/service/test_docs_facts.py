"""Facts the docs state about the code, checked against the code."""

from __future__ import annotations

import re
import socket
from pathlib import Path

from service.daemon.leases import default_replica_id

ROOT = Path(__file__).resolve().parents[3]


def test_replica_id_format_is_the_documented_one(tmp_path: Path) -> None:
    made = default_replica_id(tmp_path)
    assert re.fullmatch(re.escape(socket.gethostname()) + r"-[0-9a-f]{8}", made), made
    assert default_replica_id(tmp_path) == made  # kept in <state_dir>/replica.id
    for doc in ("docs/operations.md", "docs/scale-out.md"):
        text = (ROOT / doc).read_text(encoding="utf-8")
        assert "`<host>-<random>`" in text and "<host>-<pid>" not in text, doc


def test_every_service_module_is_named_in_the_architecture_doc() -> None:
    """docs/architecture.md names each module of ``service/`` where its package is described,
    so a newcomer finds every file there. The API's
    ``routes/`` are described as one module a route group."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    missing = [
        path.relative_to(ROOT).as_posix()
        for path in sorted((ROOT / "service").rglob("*.py"))
        if path.name != "__init__.py"
        and path.parent.name != "routes"
        and path.relative_to(ROOT).as_posix() not in doc
        and f"`{path.name}`" not in doc
        and not re.search(rf"[\s(`]{re.escape(path.name)}[\s),`]", doc)
    ]
    assert not missing, missing
