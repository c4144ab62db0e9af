"""The pure rules that keep secrets and bad hosts out: ambiguous body framing, a URL's Basic credentials, and
what a host name must be to be stored (service/http/connections.py, service/mcp/transports/lean.py,
service/app/validate.py)."""

from __future__ import annotations

import pytest

from service.app.validate import host_name_problem
from service.http.connections import ambiguous_framing
from service.mcp.transports.lean import _basic_auth


@pytest.mark.parametrize(
    ("headers", "ambiguous"),
    [
        ([(b"content-length", b"4"), (b"transfer-encoding", b"chunked")], True),
        ([(b"Transfer-Encoding", b"chunked"), (b"Content-Length", b"0")], True),
        ([(b"content-length", b"4")], False),
        ([(b"transfer-encoding", b"chunked")], False),
        ([], False),
    ],
)
def test_ambiguous_framing(headers: list[tuple[bytes, bytes]], ambiguous: bool) -> None:
    assert ambiguous_framing(headers) is ambiguous


def test_basic_auth_from_userinfo() -> None:
    assert _basic_auth(None, None) is None
    assert _basic_auth("bob", "s3") == "Basic Ym9iOnMz"
    assert _basic_auth("a%40b", "p%3Aq") == "Basic YUBiOnA6cQ=="  # percent-decoded first
    assert _basic_auth("tok", None) == "Basic dG9rOg=="


@pytest.mark.parametrize(
    ("host", "refused"),
    [
        ("ß" * 250 + ".com", True),
        ("a" * 64 + ".com", True),
        ("a..b", True),
        ("\uff11\uff12\uff17.0.0.1", True),  # fullwidth digits: not IDNA 2008
        ("a" * 63 + ".com", False),
        ("bücher.example", False),
        ("example.com.", False),
        ("localhost", False),
        ("::1", False),
        ("fe80::1%eth0", False),
    ],
)
def test_host_name_problem(host: str, refused: bool) -> None:
    assert (host_name_problem(host) is not None) is refused
