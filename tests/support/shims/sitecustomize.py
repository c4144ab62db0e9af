"""Test-only start-up hook for CLI subprocesses (put on PYTHONPATH by tests/support/cli.py).

Tests must never send traffic off this machine, yet the CLI's DNS_LOOKUP_FAILED path has to
be driven through the real binary. With ``MCPSUB_TEST_UNRESOLVABLE=host1,host2`` set, name
resolution of exactly those hosts fails here, locally, the way a resolver's NXDOMAIN does,
and nothing is sent to any DNS server.
"""

import os
import socket

_hosts = {h for h in os.environ.get("MCPSUB_TEST_UNRESOLVABLE", "").split(",") if h}
if _hosts:
    _real = socket.getaddrinfo

    def _getaddrinfo(host, *args, **kwargs):  # type: ignore[no-untyped-def]
        if isinstance(host, bytes):
            host = host.decode()
        if host in _hosts:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return _real(host, *args, **kwargs)

    socket.getaddrinfo = _getaddrinfo
