"""What an attempt keeps of a receiver's answer: the first RESPONSE_EXCERPT bytes, without the
credentials the daemon sent it (its URL's, the signing secret and its key)."""

from __future__ import annotations

from service.webhooks.dispatcher import RESPONSE_EXCERPT, excerpt, target_secrets

URL = "http://u:hook-pass-1@127.0.0.1:9/h?token=hook-tok-2"
SIGNING = "whsec_c2lnbmluZy1rZXk="


def test_an_echoing_receiver_keeps_none_of_the_secrets() -> None:
    secrets = target_secrets(URL, [SIGNING])
    body = f"got {URL} as u:hook-pass-1, key {SIGNING[6:]} and {SIGNING}".encode()
    assert (
        excerpt(body, secrets) == "got http://***@127.0.0.1:9/h?token=*** as ***, key *** and ***"
    )


def test_a_secret_across_the_cut_goes_whole() -> None:
    secrets = target_secrets(URL, [SIGNING])
    body = b"x" * (RESPONSE_EXCERPT - 5) + SIGNING.encode() + b"tail"
    kept = excerpt(body, secrets)
    assert kept == "x" * (RESPONSE_EXCERPT - 5) + "***ta"  # kept to the same size
