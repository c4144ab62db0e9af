"""TLS against the real lab server: an untrusted certificate is ``TLS_CERT_UNTRUSTED`` in every
front door (seed-behaviour §2), and trusting it with ``--ca-cert`` or ``SSL_CERT_FILE`` works.

The certificate is self-signed for ``127.0.0.1`` (an IP SAN, as hostname checking requires)
and made here with ``cryptography``; nothing is fetched and nothing leaves loopback.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support.cli import run_cli
from tests.support.lab import LabServer

PROG = "mcp-resource-subscriber"
REVIEW = "test://review/status"


def _self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mcpsub test 127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path = directory / "cert.pem"
    key_path = directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


@pytest.fixture(scope="module")
def cert_pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _self_signed(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_lab(cert_pair: tuple[Path, Path]) -> Iterator[LabServer]:
    cert, key = cert_pair
    with LabServer(
        {"MCP_TEST_UPDATE_DELAY_SECONDS": "0.05"},
        args=["--ssl-certfile", str(cert), "--ssl-keyfile", str(key)],
    ) as lab:
        yield lab


# The CLIs must not pick up a trust setting from the developer's shell.
UNTRUSTING_ENV = {"SSL_CERT_FILE": "", "SSL_CERT_DIR": ""}


def test_lab_announces_https(tls_lab: LabServer) -> None:
    assert tls_lab.url == f"https://127.0.0.1:{tls_lab.port}/mcp"
    line = tls_lab.wait_for_line("listening on")
    assert line == f"MCP resource subscribe test server listening on {tls_lab.url}"


def test_subscribe_json_untrusted(tls_lab: LabServer) -> None:
    result = run_cli(
        PROG, "--url", tls_lab.url, "--uri", REVIEW, "--json", env=UNTRUSTING_ENV, timeout=30
    )
    assert result.code == 1, result
    data = result.json
    assert data["route"] == "failed"
    assert data["errorCode"] == "TLS_CERT_UNTRUSTED"
    assert data["serverUrl"] == tls_lab.url
    hint = data["recommendedNextAction"]
    assert "SSL_CERT_FILE" in hint
    assert "--ca-cert" in hint
    assert f"hint: {hint}" in result.stderr


def test_subscribe_lines_untrusted(tls_lab: LabServer) -> None:
    result = run_cli(PROG, "--url", tls_lab.url, "--uri", REVIEW, env=UNTRUSTING_ENV, timeout=30)
    assert result.code == 1, result
    assert result.field("error-code") == "TLS_CERT_UNTRUSTED"
    assert "--ca-cert" in result.field("recommended-next-action")
    assert result.stdout.splitlines()[-1] == (
        f"phase-summary route=failed url={tls_lab.url} uri={REVIEW} error-code=TLS_CERT_UNTRUSTED"
    )


def test_call_mode_untrusted_exits_3(tls_lab: LabServer) -> None:
    result = run_cli(
        PROG,
        "call",
        "--url",
        tls_lab.url,
        "--tool",
        "echo",
        "--json",
        env=UNTRUSTING_ENV,
        timeout=30,
    )
    assert result.code == 3, result
    data = result.json
    assert data["errorCode"] == "TLS_CERT_UNTRUSTED"
    assert data["isError"] is True
    assert data["content"] is None
    assert "--ca-cert" in data["recommendedNextAction"]


def test_ctl_probe_untrusted_exits_5(tls_lab: LabServer) -> None:
    result = run_cli(
        "mcpsubctl",
        "probe",
        "--url",
        tls_lab.url,
        "--uri",
        REVIEW,
        "--json",
        env=UNTRUSTING_ENV,
        timeout=30,
    )
    assert result.code == 5, result
    assert result.json["errorCode"] == "TLS_CERT_UNTRUSTED"


def test_ca_cert_flag_trusts_the_server(tls_lab: LabServer, cert_pair: tuple[Path, Path]) -> None:
    cert, _ = cert_pair
    result = run_cli(
        PROG,
        "--url",
        tls_lab.url,
        "--uri",
        REVIEW,
        "--ca-cert",
        str(cert),
        "--json",
        env=UNTRUSTING_ENV,
        timeout=30,
    )
    assert result.code == 0, result
    data = result.json
    assert data["route"] == "subscription"
    assert data["errorCode"] is None
    assert data["finalText"].startswith("status: reviewed")


def test_ctl_probe_with_ca_cert(tls_lab: LabServer, cert_pair: tuple[Path, Path]) -> None:
    cert, _ = cert_pair
    result = run_cli(
        "mcpsubctl",
        "probe",
        "--url",
        tls_lab.url,
        "--uri",
        REVIEW,
        "--ca-cert",
        str(cert),
        "--json",
        env=UNTRUSTING_ENV,
        timeout=30,
    )
    assert result.code == 0, result
    assert result.json["route"] == "subscription"


def test_ssl_cert_file_env_trusts_the_server(
    tls_lab: LabServer, cert_pair: tuple[Path, Path]
) -> None:
    # httpx 0.28 reads SSL_CERT_FILE itself when verify=True and trust_env=True
    # (httpx/_config.py create_ssl_context), which is how make_http_client builds https clients.
    cert, _ = cert_pair
    result = run_cli(
        PROG,
        "--url",
        tls_lab.url,
        "--uri",
        REVIEW,
        "--json",
        env={"SSL_CERT_FILE": str(cert), "SSL_CERT_DIR": ""},
        timeout=30,
    )
    assert result.code == 0, result
    data = result.json
    assert data["route"] == "subscription"
    assert data["finalText"].startswith("status: reviewed")
