"""Where a webhook may be sent: the private-target rule, on literals and on resolved names.

Link-local (169.254.0.0/16, fe80::/10) and cloud-metadata addresses hold credentials that a
webhook body must never reach by accident, so a target pointing at one is refused unless it
was registered with ``allowPrivateTarget``. Loopback stays allowed: the daemon serves one
user on one machine and a receiver on 127.0.0.1 is the common case (tests use it too).

The API judges the URL when a target is registered (:func:`address_problem` on a literal
address, :data:`METADATA_HOSTS` for well-known names), with no DNS lookup. That leaves a
*name* that resolves, now or after a DNS change, to a refused address. So the dispatcher
applies the same rule again at delivery time, after resolution: :func:`resolve_checked`
resolves the host once, refuses the attempt if any address is refused, and hands back the
addresses to connect to, so the connection goes to exactly the address that was judged (no
second lookup a rebinding DNS server could answer differently). Both transports connect
through :func:`connect_checked` when given an address check (the lean one directly, httpx's
through a network backend; TLS still verifies the certificate for the name). Through a proxy
the proxy resolves the name, so only the proxy's own address is judged.

The rule itself (:func:`address_problem`) is pure. It judges an IPv6 address also by every
IPv4 address it embeds (mapped, compatible, SIIT-translated, NAT64, 6to4, Teredo:
:func:`embedded_ipv4`), since a translator or tunnel delivers the packet to that IPv4 address.
A host is read as an address the way the resolver reads it (:func:`literal_address`: a
trailing dot, and the inet_aton forms ``0xa9fea9fe`` or ``2852039166``), so the check at
creation judges the address that delivery would connect to.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import TypeVar

T = TypeVar("T")

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
AddressCheck = Callable[[IPAddress], "str | None"]
"""Why an address is refused (None: allowed)."""

METADATA_ADDRESSES = frozenset(
    {
        ipaddress.ip_address("169.254.169.254"),  # AWS, GCP, Azure, OpenStack
        ipaddress.ip_address("fd00:ec2::254"),  # AWS over IPv6
        ipaddress.ip_address("100.100.100.200"),  # Alibaba Cloud
    }
)
METADATA_HOSTS = frozenset({"metadata.google.internal", "metadata.goog", "metadata"})


IPV4_COMPATIBLE = ipaddress.ip_network("::/96")
IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")
"""SIIT's IPv4-translated addresses (RFC 6145, RFC 7915): ``::ffff:0:a.b.c.d``."""
NAT64_WELL_KNOWN = ipaddress.ip_network("64:ff9b::/96")
NAT64_LOCAL_USE = ipaddress.ip_network("64:ff9b:1::/48")
NAT64_LOCAL_PREFIXES = (48, 56, 64, 96)
"""RFC 6052 prefix lengths a local-use NAT64 prefix (RFC 8215) inside 64:ff9b:1::/48 may have."""


def _rfc6052_ipv4(value: int, prefix: int) -> ipaddress.IPv4Address:
    """The IPv4 address RFC 6052 places after a ``prefix``-bit NAT64 prefix (bits 64..71, the
    "u" octet, are skipped)."""
    octets = value.to_bytes(16, "big")
    start = prefix // 8
    body = [octets[i] for i in range(start, 16) if i != 8][:4]
    return ipaddress.IPv4Address(bytes(body))


def embedded_ipv4(address: ipaddress.IPv6Address) -> tuple[ipaddress.IPv4Address, ...]:
    """Every IPv4 address that a packet to ``address`` may end up at. Pure.

    An IPv6 address can carry an IPv4 one that a translator, a tunnel or the host's own stack
    then connects to: IPv4-mapped (``::ffff:a.b.c.d``), IPv4-compatible (``::a.b.c.d``),
    IPv4-translated (SIIT, ``::ffff:0:a.b.c.d``), NAT64 (``64:ff9b::/96``, and the local-use ``64:ff9b:1::/48`` at each prefix length RFC
    6052 allows, since its length is the operator's choice), 6to4 (``2002:AABB:CCDD::/48``) and
    Teredo (``2001::/32``: its server, and its client's obfuscated address). Judging only the
    IPv6 form would let ``[::a9fe:a9fe]`` reach 169.254.169.254.
    """
    value = int(address)
    found: list[ipaddress.IPv4Address] = []
    if address.ipv4_mapped is not None:
        found.append(address.ipv4_mapped)
    elif address in IPV4_COMPATIBLE or address in IPV4_TRANSLATED:
        found.append(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    if address in NAT64_WELL_KNOWN:
        found.append(_rfc6052_ipv4(value, 96))
    if address in NAT64_LOCAL_USE:
        found.extend(_rfc6052_ipv4(value, prefix) for prefix in NAT64_LOCAL_PREFIXES)
    if address.sixtofour is not None:
        found.append(address.sixtofour)
    if address.teredo is not None:
        found.extend(address.teredo)
    return tuple(found)


_INET_ATON_FORM = re.compile(r"(?i)^(?:0x[0-9a-f]*|[0-9]+)(?:\.(?:0x[0-9a-f]*|[0-9]+)){0,3}$")
"""A host that the C resolver reads as an IPv4 address (inet_aton: 1 to 4 parts, each decimal,
octal or hex), not as a name."""


def literal_address(host: str) -> IPAddress | None:
    """``host`` (a URL's host, brackets removed) as the address a connection would go to, when
    it is an address and not a name; None for a name. Pure.

    Read as ``getaddrinfo`` reads it: one trailing dot dropped (``169.254.169.254.`` is that
    address, not a name), an IPv6 zone ignored, and the legacy IPv4 forms inet_aton accepts
    (``0xa9fea9fe``, ``2852039166``, ``0251.0376.0251.0376``, ``169.254.43518``), which
    :func:`ipaddress.ip_address` alone refuses and the resolver connects to."""
    text = host.split("%", 1)[0]
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1]
    try:
        return ipaddress.ip_address(text)
    except ValueError:
        pass
    if not _INET_ATON_FORM.match(text):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(text))
    except OSError:
        return None


def address_problem(address: IPAddress) -> str | None:
    """Why ``address`` is not a webhook target (None when it may be one). Pure.

    An IPv6 address is judged as itself and then as every IPv4 address it embeds
    (:func:`embedded_ipv4`). An embedded address is refused for being link-local or
    metadata only: a 0.0.0.0 read out of a NAT64 prefix length the operator did not choose
    says nothing about where the packet goes."""
    kind = _refused_kind(address)
    if kind is not None:
        return f"{address} is {kind}"
    if address.is_unspecified:
        return f"{address} is the unspecified address"
    if isinstance(address, ipaddress.IPv6Address):
        mapped = address.ipv4_mapped
        if mapped is not None and mapped.is_unspecified:
            return f"{address} is the unspecified address {mapped}"
        for inner in embedded_ipv4(address):
            kind = _refused_kind(inner)
            if kind is not None:
                return f"{address} embeds {inner}, {kind}"
    return None


def _refused_kind(address: IPAddress) -> str | None:
    if address in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if address.is_link_local:
        return "a link-local address"
    return None


class AddressRefused(OSError):
    """A target's host resolved to an address the private-target rule refuses.

    An ``OSError`` so that code which treats connect failures alike still catches it; the
    dispatcher looks for it by type (:func:`refused_in`) to record ``PRIVATE_TARGET``.
    """

    def __init__(self, host: str, problem: str) -> None:
        self.host = host
        self.problem = problem
        super().__init__(f"{host} resolved to a refused address: {problem}")


def refused_in(exc: BaseException | None) -> AddressRefused | None:
    """The :class:`AddressRefused` behind ``exc`` (itself, or in its cause/context chain)."""
    seen = 0
    while exc is not None and seen < 16:
        if isinstance(exc, AddressRefused):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def judge(host: str, addresses: Iterable[str], check: AddressCheck) -> list[str]:
    """The addresses to try, in order; :class:`AddressRefused` if *any* is refused (a name
    mixing a public and a metadata address is an attack, not a fallback). Pure."""
    ordered: list[str] = []
    for text in addresses:
        address = ipaddress.ip_address(text.split("%", 1)[0])
        problem = check(address)
        if problem is not None:
            raise AddressRefused(host, problem)
        if text not in ordered:
            ordered.append(text)
    return ordered


async def resolve_checked(host: str, port: int, check: AddressCheck) -> list[str]:
    """Resolve ``host`` once (an IP literal resolves to itself) and judge every address."""
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return judge(host, (str(info[4][0]) for info in infos), check)


async def connect_checked(
    host: str, port: int, check: AddressCheck, connect: Callable[[str], Awaitable[T]]
) -> T:
    """``connect`` to the first address of ``host`` that takes the connection, every address
    judged first (:class:`AddressRefused` if any is refused); each is tried in turn, as
    ``open_connection`` would, and the last failure is raised. Both transports connect
    through this: the lean one with asyncio, httpx's through a network backend."""
    failure: Exception | None = None
    for address in await resolve_checked(host, port, check):
        try:
            return await connect(address)
        except Exception as exc:  # the transport's own connect errors: try the next address
            failure = exc
    assert failure is not None  # getaddrinfo never answers with no address
    raise failure
