"""The agent face: an MCP server that shows the daemon's subscriptions to agents.

The face owns no state: it reads and changes the daemon's through a :class:`FaceBackend`
(``backend.py``), over the local API for ``mcpsubctl mcp`` (``remote.py``) or in-process for
``/mcp`` (``inproc.py``). The JSON-RPC and era rules are pure (``protocol.py``, ``tools.py``,
``render.py``); ``session.py`` is the async dispatcher, ``stdio.py`` and ``http.py`` the
transports. Nothing here imports ``service.mcp``: the face speaks to agents, the links to
servers.
"""
