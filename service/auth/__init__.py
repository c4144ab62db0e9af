"""Gateway authentication: device-flow login, the token cache and unattended refresh.

Modules, pure logic first:

* :mod:`service.auth.errors` — the exception classes and their stable ``error_code``.
* :mod:`service.auth.rules` — pure helpers (origins, ``WWW-Authenticate`` parsing, expiry).
* :mod:`service.auth.store` — the SQLite token store and its cross-process lock.
* :mod:`service.auth.oauth` — HTTP: discovery (RFC 9728, RFC 8414), DCR, device flow, refresh.
* :mod:`service.auth.resolve` — which token a run uses (seed-behaviour §5.5).
* :mod:`service.auth.login` — the ``--login`` orchestration.

See ``docs/auth.md``.
"""
