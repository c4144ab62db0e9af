"""What the daemon's three front ends share as HTTP, in one place: the Host/Origin/token guard
(``guard``), the console's browser sessions (``sessions``), request limits and waiter slots
(``limits``), the one SSE encoder (``sse``), and serving: the sockets (``server``), bounded connections (``connections``)
and the console's loopback listener (``listener``).

It sits above the application layer (``service/app``, whose errors it answers with) and
below the REST API, the MCP face and the console, which all use it and never each other.
"""
