"""Test-only start-up hook for CLI and daemon subprocesses (put on PYTHONPATH by
tests/support/cli.py). Tests must never send traffic off this machine.

``MCPSUB_TEST_UNRESOLVABLE=host1,host2``: name resolution of exactly those hosts fails here,
locally, the way a resolver's NXDOMAIN does (the CLI's DNS_LOOKUP_FAILED path).

``MCPSUB_TEST_RESOLVE=name=address,…``: those names resolve, here, to those addresses (a DNS
answer pointing a webhook host at 169.254.x, say), and nothing is asked of any DNS server.
With it set, every ``connect`` to an address that is not loopback fails with ENETUNREACH
before a packet is sent, so code that forgot to refuse such an address fails the test
instead of reaching the network.
"""

import errno
import ipaddress
import os
import socket

_real = socket.getaddrinfo
_unresolvable = {h for h in os.environ.get("MCPSUB_TEST_UNRESOLVABLE", "").split(",") if h}
_answers = dict(
    item.split("=", 1)
    for item in os.environ.get("MCPSUB_TEST_RESOLVE", "").split(",")
    if "=" in item
)

if _unresolvable or _answers:

    def _getaddrinfo(host, port, family=0, type=0, proto=0, flags=0):  # type: ignore[no-untyped-def]
        name = host.decode() if isinstance(host, bytes) else host
        if name in _unresolvable:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        if name in _answers:
            address = _answers[name]
            number = int(port or 0) if not isinstance(port, str) or port.isdigit() else 0
            if ":" in address:
                return [(socket.AF_INET6, type or socket.SOCK_STREAM, proto or 6, "",
                         (address, number, 0, 0))]  # fmt: skip
            return [(socket.AF_INET, type or socket.SOCK_STREAM, proto or 6, "", (address, number))]
        return _real(host, port, family, type, proto, flags)

    socket.getaddrinfo = _getaddrinfo

if _answers:
    _connect = socket.socket.connect
    _connect_ex = socket.socket.connect_ex

    def _check(address):  # type: ignore[no-untyped-def]
        if isinstance(address, tuple):
            try:
                ip = ipaddress.ip_address(str(address[0]).split("%", 1)[0])
            except ValueError:
                return
            if not ip.is_loopback:
                raise OSError(errno.ENETUNREACH, f"test shim: {ip} is off this machine")

    def connect(self, address):  # type: ignore[no-untyped-def]
        _check(address)
        return _connect(self, address)

    def connect_ex(self, address):  # type: ignore[no-untyped-def]
        _check(address)
        return _connect_ex(self, address)

    socket.socket.connect = connect
    socket.socket.connect_ex = connect_ex

if _unresolvable or _answers:
    # The daemon runs on uvloop (service/eventloop.py), whose name lookups and connects are
    # libuv's, not the socket module's patched above: its loop gets the same answers and the
    # same refusal of any address off this machine.
    try:
        import uvloop
    except ImportError:
        uvloop = None

    if uvloop is not None:

        class _ShimLoop(uvloop.Loop):  # type: ignore[misc,name-defined]
            async def getaddrinfo(self, host, port, *, family=0, type=0, proto=0, flags=0):  # type: ignore[no-untyped-def]
                name = host.decode() if isinstance(host, bytes) else host
                if name in _unresolvable or name in _answers:
                    return _getaddrinfo(host, port, family, type, proto, flags)
                return await super().getaddrinfo(
                    host, port, family=family, type=type, proto=proto, flags=flags
                )

            async def create_connection(self, protocol_factory, host=None, port=None, **kw):  # type: ignore[no-untyped-def]
                if host is not None:
                    name = host.decode() if isinstance(host, bytes) else host
                    if name in _unresolvable or name in _answers:
                        host = (await self.getaddrinfo(name, port))[0][4][0]
                    if _answers:
                        _check((host, port))
                return await super().create_connection(protocol_factory, host, port, **kw)

            async def sock_connect(self, sock, address):  # type: ignore[no-untyped-def]
                if _answers:
                    _check(address)
                return await super().sock_connect(sock, address)

        uvloop.new_event_loop = _ShimLoop
