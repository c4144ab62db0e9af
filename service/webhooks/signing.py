"""Standard Webhooks v1 signatures (HMAC-SHA256), in a dozen lines of stdlib.

The signed content is ``{webhook-id}.{webhook-timestamp}.{body}`` over the exact bytes sent;
the header is a space-separated list of ``v1,<base64>`` so that during a secret rotation we
sign with both secrets and a receiver accepts either. Secrets are ``whsec_`` + base64 of the
key bytes (we generate 32 random bytes). The ``standardwebhooks`` package verifies our
output in the tests; we do not depend on it at run time.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import secrets
from collections.abc import Sequence

SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32


class InvalidSecret(ValueError):
    """Not ``whsec_`` + base64 of 24 to 64 bytes."""


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


def verify(secret: str, webhook_id: str, timestamp: int, body: bytes, header: str) -> bool:
    """True if any ``v1`` entry of ``header`` matches (constant-time compare)."""
    expected = sign(secret, webhook_id, timestamp, body)
    return any(hmac.compare_digest(expected, entry) for entry in header.split())
