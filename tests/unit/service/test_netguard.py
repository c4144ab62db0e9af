"""service/netguard.py: the private-target rule (pure) and the guarded httpx connect.

The httpx test runs a real server on 127.0.0.1 and answers name lookups in-process
(``socket.getaddrinfo`` patched); connects to anything but loopback are refused by the
test too, so a broken guard fails here instead of sending a packet.
"""

from __future__ import annotations

import asyncio
import errno
import ipaddress
import socket
from typing import Any

import httpx
import pytest

from service.mcp.transports.viahttpx import guard_httpx
from service.netguard import AddressRefused, address_problem, judge, literal_address, refused_in


@pytest.mark.parametrize(
    ("address", "problem"),
    [
        ("169.254.169.254", "cloud metadata address"),
        ("100.100.100.200", "cloud metadata address"),
        ("fd00:ec2::254", "cloud metadata address"),
        ("169.254.1.2", "link-local"),
        ("fe80::1", "link-local"),
        ("::ffff:169.254.1.2", "link-local"),
        ("0.0.0.0", "unspecified"),
        ("::ffff:0.0.0.0", "unspecified"),
        ("::a9fe:a9fe", "embeds 169.254.169.254, a cloud metadata"),
        ("::a9fe:102", "embeds 169.254.1.2, a link-local"),
        ("64:ff9b::a9fe:a9fe", "embeds 169.254.169.254"),
        ("64:ff9b:1::a9fe:a9fe", "embeds 169.254.169.254"),  # local-use, /96
        ("64:ff9b:1:a9fe:a9:fe00::", "embeds 169.254.169.254"),  # local-use, /48
        ("64:ff9b:1:a9:fe:a9fe::", "embeds 169.254.169.254"),  # local-use, /56
        ("64:ff9b:1:0:a9:fea9:fe00:0", "embeds 169.254.169.254"),  # local-use, /64
        ("2002:a9fe:a9fe::", "embeds 169.254.169.254"),
        ("::ffff:0:a9fe:a9fe", "embeds 169.254.169.254, a cloud metadata"),  # SIIT (RFC 6145)
        ("::ffff:0:6464:64c8", "embeds 100.100.100.200, a cloud metadata"),  # SIIT
        ("::ffff:0:a9fe:102", "embeds 169.254.1.2, a link-local"),  # SIIT
        ("2001:0:a9fe:a9fe::", "embeds 169.254.169.254"),  # Teredo server
        ("2001:0:4136:e378:8000:63bf:5601:5601", "embeds 169.254.169.254"),  # Teredo client
        ("64:ff9b::7f00:1", None),  # embedded loopback stays allowed, as loopback does
        ("64:ff9b:1::5db8:d70e", None),  # other prefix lengths read 0.0.0.x: not refused
        ("2002:5db8:d70e::", None),
        ("2001:db8::1", None),
        ("127.0.0.1", None),
        ("::1", None),
        ("10.1.2.3", None),
        ("93.184.215.14", None),
    ],
)
def test_address_problem(address: str, problem: str | None) -> None:
    found = address_problem(ipaddress.ip_address(address))
    assert (found is None) if problem is None else (problem in (found or ""))


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("169.254.169.254.", "169.254.169.254"),  # the resolver drops one trailing dot
        ("0xa9fea9fe", "169.254.169.254"),
        ("2852039166", "169.254.169.254"),
        ("0251.0376.0251.0376", "169.254.169.254"),
        ("169.254.43518", "169.254.169.254"),
        ("::ffff:0:a9fe:a9fe", "::ffff:0:a9fe:a9fe"),
        ("fe80::1%eth0", "fe80::1"),
        ("127.0.0.1", "127.0.0.1"),
        ("example.test", None),
        ("example.test.", None),
        ("cafe", None),
        ("1.2.3.4..", None),
        ("10.0.0.1.example", None),
    ],
)
def test_literal_address_reads_a_host_as_the_resolver_does(host: str, address: str | None) -> None:
    found = literal_address(host)
    assert found == (None if address is None else ipaddress.ip_address(address))


def test_judge_refuses_a_name_if_any_address_is_refused() -> None:
    assert judge("a", ["127.0.0.1", "::1", "127.0.0.1"], address_problem) == ["127.0.0.1", "::1"]
    with pytest.raises(AddressRefused, match=r"b resolved to a refused address: 169\.254"):
        judge("b", ["127.0.0.1", "169.254.169.254"], address_problem)
    assert judge("c", ["fe80::1%lo"], lambda a: None) == ["fe80::1%lo"]


def test_refused_in_walks_the_cause_chain() -> None:
    refused = AddressRefused("x", "why")
    try:
        try:
            raise refused
        except AddressRefused as exc:
            raise httpx.ConnectError("wrapped") from exc
    except httpx.ConnectError as outer:
        assert refused_in(outer) is refused
    assert refused_in(ValueError("no")) is None


def test_guarded_httpx_connects_to_the_checked_address(monkeypatch: pytest.MonkeyPatch) -> None:
    real_getaddrinfo = socket.getaddrinfo
    answers = {"good.test": "127.0.0.1", "evil.test": "169.254.10.10"}

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in answers:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (answers[host], int(port)))]
        return real_getaddrinfo(host, port, *args, **kwargs)

    real_connect = socket.socket.connect

    def connect(self: socket.socket, address: Any) -> None:
        if isinstance(address, tuple) and not ipaddress.ip_address(address[0]).is_loopback:
            raise OSError(errno.ENETUNREACH, "test: off this machine")
        real_connect(self, address)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(socket.socket, "connect", connect)
    hosts: list[str] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        hosts.extend([ln.split(":", 1)[1].strip() for ln in head.decode().split("\r\n")
                  if ln.lower().startswith("host:")])  # fmt: skip
        writer.write(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()

    async def scenario() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        async with guard_httpx(httpx.AsyncClient(trust_env=False), address_problem) as client:
            response = await client.post(f"http://good.test:{port}/hook", content=b"{}")
            assert response.status_code == 204
            with pytest.raises(httpx.ConnectError) as caught:
                await client.post(f"http://evil.test:{port}/hook", content=b"{}")
            refused = refused_in(caught.value)
            assert refused is not None and "169.254.10.10 is a link-local address" in str(refused)
        # Unguarded, the same name is connected to (and the test's own guard stops it).
        async with httpx.AsyncClient(trust_env=False) as client:
            with pytest.raises(httpx.ConnectError) as caught:
                await client.post(f"http://evil.test:{port}/hook", content=b"{}")
            assert refused_in(caught.value) is None
        server.close()

    asyncio.run(scenario())
    assert hosts == [f"good.test:{hosts[0].rsplit(':', 1)[1]}"]  # the name, not the address
