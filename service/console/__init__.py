"""The web console at ``/ui``: server-rendered page shells, one hand-written script that
fills them from the documented API (``/v1/...``) and follows ``/v1/events/stream``.

It holds no state and has no queries of its own: whatever a page shows, the API answers.
Its routes (:mod:`service.console.routes`) load the pages on the first ``/ui`` request.
"""
