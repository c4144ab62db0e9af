"""Facts the docs state about the code, checked against the code (issue 21 §5)."""

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
