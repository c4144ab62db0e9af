"""Which certificates an ``https://`` connection trusts: the one builder for every client.

The MCP transports (probe, ``call``, the daemon's links), webhook deliveries and the OAuth
requests all take their :class:`ssl.SSLContext` from :func:`client_context`, so a CA that
works for one works for all.

* ``ca_cert`` (``--ca-cert FILE``): exactly that CA, nothing else.
* Otherwise the operating system's trust store, through ``truststore`` (the PyPA's library
  that pip uses for the same purpose): a company or mkcert CA installed in the system is
  trusted, as in a browser or curl, instead of certifi's copy of Mozilla's list, which knows
  none of them. On Linux truststore uses OpenSSL's default verify paths, so
  ``SSL_CERT_FILE`` and ``SSL_CERT_DIR`` still name the store there; on macOS and Windows,
  where the platform verifier ignores them, a set variable gets the plain OpenSSL context it
  names, as before.
* The drop-in also honours the TypeScript CLI's remedy: ``NODE_EXTRA_CA_CERTS`` adds a CA
  file to whichever trust the run has (:func:`honor_node_variables`), and
  ``NODE_USE_SYSTEM_CA=1`` asks for what is already the default.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import ssl  # imported where a context is made: a run on plain http:// never loads it

EXTRA_CA_VARIABLE = "NODE_EXTRA_CA_CERTS"

_PEM_SCAN_BYTES = 1 << 20
"""How much of that file is looked at for a PEM certificate before the run starts."""

_extra_ca: str | None = None
"""A CA file added to every context of this process (the drop-in's ``NODE_EXTRA_CA_CERTS``)."""


def honor_node_variables(environ: Mapping[str, str] = os.environ) -> str | None:
    """Let ``NODE_EXTRA_CA_CERTS`` add its CA to every context this process makes.

    Called by the drop-in only: scripts written for the TypeScript CLI set that variable,
    and there it means "trust this CA too". Returns a warning when the file cannot be read
    (it is then ignored, as Node ignores it), else None. Cheap: nothing is loaded until a
    context is made."""
    global _extra_ca
    path = (environ.get(EXTRA_CA_VARIABLE) or "").strip()
    _extra_ca = None
    if not path:
        return None
    try:
        with open(path, "rb") as file:
            head = file.read(_PEM_SCAN_BYTES)
    except OSError as exc:
        return f"ignoring {EXTRA_CA_VARIABLE}={path}: {exc.strerror or exc}"
    if b"-----BEGIN CERTIFICATE-----" not in head:
        return f"ignoring {EXTRA_CA_VARIABLE}={path}: no PEM certificate in it"
    _extra_ca = path
    return None


def client_context(ca_cert: str | None = None) -> ssl.SSLContext:
    """A verifying client context: ``ca_cert`` alone, else the system's trust (see above)."""
    import ssl

    context: ssl.SSLContext
    if ca_cert:
        # Exactly the CA the user named; NODE_EXTRA_CA_CERTS adds to the default trust only.
        context = ssl.create_default_context(cafile=ca_cert)
        return context
    cafile = os.environ.get("SSL_CERT_FILE") or None
    capath = os.environ.get("SSL_CERT_DIR") or None
    if sys.platform in ("darwin", "win32") and (cafile or capath):
        context = ssl.create_default_context(cafile=cafile, capath=capath)
    else:
        import truststore

        context = truststore.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if _extra_ca is not None:
        with contextlib.suppress(OSError, ssl.SSLError):  # ignored, as Node ignores it
            context.load_verify_locations(cafile=_extra_ca)
    return context
