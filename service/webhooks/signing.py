"""Standard Webhooks v1 signatures (HMAC-SHA256), in a dozen lines of stdlib.

The signed content is ``{webhook-id}.{webhook-timestamp}.{body}`` over the exact bytes sent;
the header is a space-separated list of ``v1,<base64>`` so that during a secret rotation we
sign with both secrets and a receiver accepts either. Secrets are ``whsec_`` + base64 of the
key bytes (we generate 32 random bytes). The ``standardwebhooks`` package verifies our
output in the tests; we do not depend on it at run time.

This module is the one place that knows the scheme: the secret's form (:func:`generate_secret`,
:func:`checked_secret` for a person's own, :func:`secret_key`), the three headers a delivery
carries (:func:`signed_headers`) and their check (:func:`verify_headers`, ``cli/receiver.py``).
Another scheme would be another module with these functions.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import secrets
from collections.abc import Mapping, Sequence

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32


class InvalidSecret(ValueError):
    """Not ``whsec_`` + base64 of 24 to 64 bytes."""


ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"


def generate_secret() -> str:
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode()


def secret_key(secret: str) -> bytes:
    raw = secret.removeprefix(SECRET_PREFIX)
    try:
        key = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise InvalidSecret("the secret must be whsec_ followed by base64") from exc
    if not 24 <= len(key) <= 64:
        raise InvalidSecret("the secret must decode to 24..64 bytes (Standard Webhooks)")
    return key


def checked_secret(secret: str) -> str:
    """A secret a person gives, as it is kept; InvalidSecret unless ``whsec_`` + the canonical
    base64 of 24 to 64 bytes. The base64 decoder ignores a last character's unused bits
    ("…B==" and "…A==" name one key): only the canonical spelling is taken, so that a secret
    is one string everywhere (Standard Webhooks libraries write it canonically)."""
    key = secret_key(secret)
    if not secret.startswith(SECRET_PREFIX):
        raise InvalidSecret(f"the secret must start with {SECRET_PREFIX}")
    if base64.b64encode(key).decode() != secret.removeprefix(SECRET_PREFIX):
        raise InvalidSecret(
            "the secret's base64 is not canonical (its last character carries unused bits)"
        )
    return secret


@functools.lru_cache(maxsize=256)
def _cached_key(secret: str) -> bytes:
    return secret_key(secret)  # an invalid secret raises, and nothing is cached


def sign(secret: str, webhook_id: str, timestamp: int, body: bytes) -> str:
    """One ``v1,<base64>`` entry."""
    mac = hmac.new(_cached_key(secret), f"{webhook_id}.{timestamp}.".encode(), hashlib.sha256)
    mac.update(body)
    digest = mac.digest()
    return "v1," + base64.b64encode(digest).decode()


def signature_header(
    secrets_in_use: Sequence[str], webhook_id: str, timestamp: int, body: bytes
) -> str:
    return " ".join(sign(s, webhook_id, timestamp, body) for s in secrets_in_use)


def signed_headers(
    secrets_in_use: Sequence[str], webhook_id: str, timestamp: int, body: bytes
) -> dict[str, str]:
    """The three headers that let a receiver check a delivery of ``body``."""
    return {
        ID_HEADER: webhook_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: signature_header(secrets_in_use, webhook_id, timestamp, body),
    }


def verify(secret: str, webhook_id: str, timestamp: int, body: bytes, header: str) -> bool:
    """True if any ``v1`` entry of ``header`` matches (constant-time compare)."""
    expected = sign(secret, webhook_id, timestamp, body)
    return any(hmac.compare_digest(expected, entry) for entry in header.split())


def verify_headers(secret: str, headers: Mapping[str, str], body: bytes) -> bool:
    """A receiver's check of a delivery from its headers (False for missing or malformed)."""
    try:
        timestamp = int(headers.get(TIMESTAMP_HEADER, ""))
        return verify(
            secret, headers.get(ID_HEADER, ""), timestamp, body, headers.get(SIGNATURE_HEADER, "")
        )
    except ValueError:
        return False
