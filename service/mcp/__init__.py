"""The MCP 2026-07-28 client: pure wire modules plus one async client over one transport
(lean llhttp on plain http://, httpx otherwise; :mod:`service.mcp.transports`)."""

import sys

# httpx imports its optional command-line tool (click, rich, pygments) whenever those happen
# to be installed, which uvicorn's dependencies make true here; that is a third of a one-shot
# probe's start-up. Marking the module absent makes httpx skip it; nothing of ours uses it.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
