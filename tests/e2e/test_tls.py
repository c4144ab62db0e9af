"""TLS against the real lab server: an untrusted certificate is ``TLS_CERT_UNTRUSTED`` in every
front door (seed-behaviour §2), and each way of trusting it works: ``--ca-cert``,
``SSL_CERT_FILE``, the drop-in's ``NODE_EXTRA_CA_CERTS`` (the TypeScript CLI's remedy), and
the system trust store, which is the default (``service/tlstrust.py``, through truststore).

The lab's certificate for ``127.0.0.1`` (an IP SAN, as hostname checking requires) is issued
by a CA of the test's own, both made here with ``cryptography``; nothing is fetched, nothing
leaves loopback, and the machine's trust store is never touched: on Linux truststore reads
OpenSSL's default verify paths, whose directory ``SSL_CERT_DIR`` names, so the "system store"
case points that at a private directory holding the CA under its OpenSSL subject hash.
"""

from __future__ import annotations

import datetime
import ipaddress
import shutil
import subprocess
import sys
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


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _ca_and_leaf(directory: Path) -> tuple[Path, Path, Path]:
    """(CA certificate, the lab's certificate, the lab's key): a CA of the test's own."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "mcpsub test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=False, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False
        )
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    ca_path, cert_path, key_path = (
        directory / "ca.pem",
        directory / "cert.pem",
        directory / "key.pem",
    )
    ca_path.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    cert_path.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(_pem_key(key))
    return ca_path, cert_path, key_path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    return _ca_and_leaf(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def cert_pair(pki: tuple[Path, Path, Path]) -> tuple[Path, Path]:
    """(the CA to trust, unused): what the older cases of this module pass to --ca-cert."""
    return pki[0], pki[2]


@pytest.fixture(scope="module")
def tls_lab(pki: tuple[Path, Path, Path]) -> Iterator[LabServer]:
    _, cert, key = pki
    with LabServer(
        {"MCP_TEST_UPDATE_DELAY_SECONDS": "0.05"},
        args=["--ssl-certfile", str(cert), "--ssl-keyfile", str(key)],
    ) as lab:
        yield lab


# The CLIs must not pick up a trust setting from the developer's shell.
UNTRUSTING_ENV = {"SSL_CERT_FILE": "", "SSL_CERT_DIR": "", "NODE_EXTRA_CA_CERTS": ""}


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
    # The hint names what works: the TypeScript CLI's remedies first, then ours.
    for remedy in ("NODE_EXTRA_CA_CERTS", "NODE_USE_SYSTEM_CA=1", "--ca-cert", "SSL_CERT_FILE"):
        assert remedy in hint
    assert "operating system's trust store (used by default" in hint
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
    assert "NODE_EXTRA_CA_CERTS" in data["recommendedNextAction"]  # a network-level error


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
    hint = result.json["recommendedNextAction"]
    assert "--ca-cert" in hint and "operating system's trust store" in hint
    assert "NODE_" not in hint  # mcpsubctl is no Node program


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
    cert, _ = cert_pair
    result = run_cli(
        PROG,
        "--url",
        tls_lab.url,
        "--uri",
        REVIEW,
        "--json",
        env={**UNTRUSTING_ENV, "SSL_CERT_FILE": str(cert)},
        timeout=30,
    )
    assert result.code == 0, result
    data = result.json
    assert data["route"] == "subscription"
    assert data["finalText"].startswith("status: reviewed")


def test_node_extra_ca_certs_adds_the_ca_in_the_drop_in(
    tls_lab: LabServer, cert_pair: tuple[Path, Path]
) -> None:
    ca, _ = cert_pair
    env = {**UNTRUSTING_ENV, "NODE_EXTRA_CA_CERTS": str(ca)}
    result = run_cli(PROG, "--url", tls_lab.url, "--uri", REVIEW, "--json", env=env, timeout=30)
    assert result.code == 0, result
    assert result.json["route"] == "subscription"
    called = run_cli(
        PROG, "call", "--url", tls_lab.url, "--tool", "echo_tool", "--args",
        '{"message":"hi"}', "--json", env=env, timeout=30,
    )  # fmt: skip
    assert (called.code, called.json["content"]) == (0, [{"type": "text", "text": "hi"}])
    # A Node variable is the drop-in's compatibility, not mcpsubctl's.
    ctl = run_cli(
        "mcpsubctl", "probe", "--url", tls_lab.url, "--uri", REVIEW, "--json", env=env, timeout=30
    )
    assert ctl.json["errorCode"] == "TLS_CERT_UNTRUSTED", ctl


def test_node_extra_ca_certs_unreadable_is_ignored_with_a_warning(
    tls_lab: LabServer, tmp_path: Path
) -> None:
    env = {**UNTRUSTING_ENV, "NODE_EXTRA_CA_CERTS": str(tmp_path / "missing.pem")}
    result = run_cli(PROG, "--url", tls_lab.url, "--uri", REVIEW, "--json", env=env, timeout=30)
    assert result.json["errorCode"] == "TLS_CERT_UNTRUSTED", result
    assert "warning: ignoring NODE_EXTRA_CA_CERTS=" in result.stderr


def _private_system_store(ca: Path, directory: Path) -> Path:
    """A directory laid out as OpenSSL's certificate directory: the CA under ``HASH.0``."""
    openssl = shutil.which("openssl")
    assert openssl, "the openssl command names the CA by its subject hash"
    digest = subprocess.run(
        [openssl, "x509", "-hash", "-noout", "-in", str(ca)],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    store = directory / "certs"
    store.mkdir()
    shutil.copy(ca, store / f"{digest}.0")
    return store


@pytest.mark.skipif(sys.platform != "linux", reason="SSL_CERT_DIR is how Linux names the store")
def test_the_system_trust_store_is_the_default(
    tls_lab: LabServer, cert_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    ca, _ = cert_pair
    store = _private_system_store(ca, tmp_path)
    # No --ca-cert, no SSL_CERT_FILE: only the store OpenSSL (and so truststore) reads.
    env = {**UNTRUSTING_ENV, "SSL_CERT_DIR": str(store)}
    for program in (PROG, "mcpsubctl probe"):
        result = run_cli(
            *program.split(), "--url", tls_lab.url, "--uri", REVIEW, "--json",
            env={**env, "NODE_USE_SYSTEM_CA": "1"}, timeout=30,
        )  # fmt: skip
        assert result.code == 0, result
        assert result.json["route"] == "subscription"


def test_trace_over_https_goes_through_the_httpx_transport(
    tls_lab: LabServer, cert_pair: tuple[Path, Path], tmp_path: Path
) -> None:
    """https is carried by the httpx transport: its exchanges are traced at the same seam as
    the lean transport's (tests/e2e/test_trace.py)."""
    import json

    ca, _ = cert_pair
    trace = tmp_path / "tls.jsonl"
    result = run_cli(
        PROG, "--url", tls_lab.url, "--uri", REVIEW, "--ca-cert", str(ca), "--json",
        "--trace", str(trace), env=UNTRUSTING_ENV, timeout=30,
    )  # fmt: skip
    assert result.code == 0, result
    records = [json.loads(line) for line in trace.read_text().splitlines()]
    kinds = [r["type"] for r in records]
    assert kinds[:3] == ["trace-start", "request", "response"]
    assert "stream-open" in kinds and kinds[-1] == "stream-end"
    methods = [r["message"].get("method") for r in records if r["type"] == "sse"]
    assert methods[:2] == [
        "notifications/subscriptions/acknowledged",
        "notifications/resources/updated",
    ]
    assert all(r.get("url", tls_lab.url) == tls_lab.url for r in records)
