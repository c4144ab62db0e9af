"""The application layer: what the daemon does for the people and agents who use it, below
every front end.

The REST API (``service/api``), the MCP face (``service/face``) and the web console
(``service/console``) all call it and none of them calls another: input checks
(``validate``), JSON shapes (``views``), read-only queries (``queries``), diffs, the error
tree (``errors``), and the use cases the front ends call: ``subscriptions`` (with the agent
policy, ``policy``, and ``firststate``), ``webhooks`` (each change with its wake), ``triggers``, ``status``; ``usecases`` makes them once. It knows no
HTTP framework; the HTTP concerns the three share (guard, sessions, limits, serving) are
``service/http``.
"""
