"""The links' part of ``GET /v1/status`` as JSON, each link's part kept until it changes.

Building and encoding 1,000 link objects was most of a ``GET /v1/status`` (py-spy), and on a
settled daemon few links change between two calls; a link's part is rebuilt only when its
:func:`~service.daemon.linkstatus.status_key` changed.
"""

from __future__ import annotations

from typing import Any

from service.daemon.link import ServerLink
from service.jsonout import dumps


class StatusCache:
    def __init__(self) -> None:
        self.parts: dict[int, tuple[ServerLink, tuple[Any, ...], bytes]] = {}
        """Each link's last status JSON and the key it was made for."""

    def link_status_json(self, links: dict[int, ServerLink]) -> bytes:
        """``[link.status() for link in links]`` as a JSON array.

        Each part is kept as an exact-size copy: orjson's answer keeps the 8 kB buffer it
        was written into (a 600-byte link part held 8.6 kB), 8 MB at 1,000 links
        (tracemalloc; issue 13's RSS target)."""
        cache = self.parts
        parts: list[bytes] = []
        for server_id, link in links.items():
            key = link.status_key()
            hit = cache.get(server_id)
            if hit is None or hit[0] is not link or hit[1] != key:
                hit = (link, key, bytes(memoryview(dumps(link.status()))))
                cache[server_id] = hit
            parts.append(hit[2])
        if len(cache) > len(links):
            for server_id in [s for s in cache if s not in links]:
                del cache[server_id]
        return b"[" + b",".join(parts) + b"]"
