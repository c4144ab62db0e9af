"""The links' part of ``GET /v1/status`` as JSON, each link's part kept until it changes.

Building and encoding every link's object is most of a ``GET /v1/status``, and on a
settled daemon few links change between two calls; a link's part is rebuilt only when its
:class:`~service.daemon.linkstatus.LinkSnapshot` changed (the snapshot is the key).
"""

from __future__ import annotations

from collections.abc import Iterable

from service.daemon.linkstatus import LinkSnapshot, render
from service.jsonencode import json_bytes


class StatusCache:
    def __init__(self) -> None:
        self.parts: dict[int, tuple[LinkSnapshot, bytes]] = {}
        """Each link's last snapshot and the status JSON made of it."""

    def link_status_json(self, snapshots: Iterable[LinkSnapshot]) -> bytes:
        """``[render(snapshot) for snapshot in snapshots]`` as a JSON array.

        Each part is kept as an exact-size copy: orjson's answer keeps the whole buffer it
        was written into, many times a link part's size, for as long as the part is kept."""
        cache = self.parts
        parts: list[bytes] = []
        seen: set[int] = set()
        for snapshot in snapshots:
            seen.add(snapshot.server_id)
            hit = cache.get(snapshot.server_id)
            if hit is None or hit[0] != snapshot:
                hit = (snapshot, bytes(memoryview(json_bytes(render(snapshot)))))
                cache[snapshot.server_id] = hit
            parts.append(hit[1])
        if len(cache) > len(seen):
            for server_id in [s for s in cache if s not in seen]:
                del cache[server_id]
        return b"[" + b",".join(parts) + b"]"
