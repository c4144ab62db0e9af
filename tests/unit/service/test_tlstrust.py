"""``service.tlstrust``: the system's trust store by default, ``--ca-cert`` alone, the drop-in's
``NODE_EXTRA_CA_CERTS``, and one builder for every https client (the MCP transports, the
daemon's shared context, webhooks, OAuth). The real handshakes are in tests/e2e/test_tls.py."""

from __future__ import annotations

import ast
import ssl
import sys
from pathlib import Path

import certifi
import pytest
import truststore

from service import tlstrust
from service.mcp.transports.choose import default_tls
from service.mcp.transports.viahttpx import make_http_client

ROOT = Path(__file__).resolve().parents[3]
A_CA = certifi.where()  # any PEM bundle will do
PEM = "-----BEGIN CERTIFICATE-----\n"


@pytest.fixture(autouse=True)
def _no_extra_ca(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tlstrust, "_extra_ca", None)


@pytest.mark.skipif(sys.platform != "linux", reason="on macOS/Windows SSL_CERT_* keep OpenSSL")
def test_the_default_is_the_operating_systems_store(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
    assert isinstance(tlstrust.client_context(), truststore.SSLContext)
    # The daemon's shared context is the same default (webhooks and links use it).
    assert isinstance(default_tls(), truststore.SSLContext)


def test_ca_cert_is_exactly_that_ca(tmp_path: Path) -> None:
    context = tlstrust.client_context(A_CA)
    assert not isinstance(context, truststore.SSLContext)
    assert len(context.get_ca_certs()) == Path(A_CA).read_text().count(PEM.strip())
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    with pytest.raises((OSError, ssl.SSLError)):
        tlstrust.client_context(str(tmp_path / "no-such.pem"))


def test_node_extra_ca_certs(tmp_path: Path) -> None:
    assert tlstrust.honor_node_variables({}) is None
    missing = tmp_path / "missing.pem"
    warning = tlstrust.honor_node_variables({"NODE_EXTRA_CA_CERTS": str(missing)})
    assert warning is not None and "ignoring NODE_EXTRA_CA_CERTS" in warning
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    warning = tlstrust.honor_node_variables({"NODE_EXTRA_CA_CERTS": str(junk)})
    assert warning is not None and "no PEM certificate" in warning
    assert tlstrust._extra_ca is None
    bundle = tmp_path / "bundle.pem"
    bundle.write_text("# a comment first\n" + PEM)
    assert tlstrust.honor_node_variables({"NODE_EXTRA_CA_CERTS": str(bundle)}) is None
    assert tlstrust._extra_ca == str(bundle)
    # A file that only looks like PEM is ignored when loaded, as Node ignores it.
    assert isinstance(tlstrust.client_context(), ssl.SSLContext)


def test_https_clients_get_the_builders_context(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[str | None] = []
    real = tlstrust.client_context

    def spy(ca_cert: str | None = None) -> ssl.SSLContext:
        made.append(ca_cert)
        return real(ca_cert)

    monkeypatch.setattr("service.mcp.transports.viahttpx.client_context", spy)
    make_http_client("https://example.test/mcp")
    make_http_client("https://example.test/mcp", ca_cert=A_CA)
    make_http_client("http://example.test/mcp")  # plain http through a proxy: no CA at all
    assert made == [None, A_CA]


SSL_MAKERS = {"create_default_context", "create_ssl_context", "SSLContext", "truststore"}


def test_one_place_makes_tls_contexts() -> None:
    """Every https client's trust comes from service/tlstrust.py: no other module of the
    product makes an SSL context, and every httpx client of ``service/`` (MCP, webhooks,
    OAuth) is given ``verify=``."""
    offenders: list[str] = []
    for package in ("service", "cli"):
        for path in sorted((ROOT / package).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            if relative == "service/tlstrust.py":
                continue
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and node.attr in SSL_MAKERS - {"SSLContext"}:
                    offenders.append(f"{relative}:{node.lineno} {node.attr}")
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names] + [getattr(node, "module", "") or ""]
                    if any(n.split(".")[0] == "truststore" for n in names):
                        offenders.append(f"{relative}:{node.lineno} imports truststore")
                if (
                    package == "service"  # cli/agent_run.py posts to a local agent's server
                    and isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("AsyncClient", "Client")
                    and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "httpx"
                    and not any(k.arg == "verify" for k in node.keywords)
                ):
                    offenders.append(f"{relative}:{node.lineno} httpx client without verify=")
    assert offenders == []
