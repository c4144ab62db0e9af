"""service.safetext and the pure parts of output hygiene (escaping, redaction, limits)."""

from __future__ import annotations

import io
import sys

import pytest

from cli.apicmd import table
from cli.event_cmds import event_line
from service.daemon.config import ConfigError, load_settings
from service.daemon.logs import RepeatLimiter
from service.safetext import (
    SECRET_QUERY_PARAMETERS,
    SafeStream,
    known_secrets,
    redact_known,
    redact_urls,
    safe_stderr,
    shown,
    split_secret,
    terminal_safe,
    url_credentials,
)


@pytest.mark.parametrize(
    ("raw", "safe"),
    [
        ("\x1b[31mred\x1b[0m", "\\x1b[31mred\\x1b[0m"),
        ("a\rb\x07\x00", "a\\x0db\\x07\\x00"),
        ("c1 \x9b2J", "c1 \\x9b2J"),
        ("file\u202etxt.exe", "file\\u202etxt.exe"),
        ("\u2066iso\u2069 \u200f", "\\u2066iso\\u2069 \\u200f"),
        ("lone \ud800", "lone \\ud800"),
        ("two\nlines\ttab", "two\\x0alines\\x09tab"),
    ],
)
def test_terminal_safe_escapes_what_a_terminal_acts_on(raw: str, safe: str) -> None:
    assert terminal_safe(raw) == safe
    assert all(ch.isprintable() for ch in terminal_safe(raw))


@pytest.mark.parametrize(
    "text",
    ["plain", "C:\\path\\x1b literally", "naïve 日本語 ✓ emoji 🎉", "test://review/status", ""],
)
def test_normal_text_is_unchanged(text: str) -> None:
    assert terminal_safe(text) == text == terminal_safe(text, keep_lines=True)


def test_keep_lines_keeps_newlines_and_tabs_only() -> None:
    assert terminal_safe("a\nb\tc\r\x1b", keep_lines=True) == "a\nb\tc\\x0d\\x1b"


@pytest.mark.parametrize(
    ("raw", "redacted"),
    [
        ("http://user:pw@h:1/mcp", "http://***@h:1/mcp"),
        ("GET https://tok@h/x failed", "GET https://***@h/x failed"),
        ("http://h/x?to=a@b.c", "http://h/x?to=a@b.c"),
        ("mail me at a@b.c", "mail me at a@b.c"),
        ("two http://a:b@x and http://c:d@y", "two http://***@x and http://***@y"),
        ("http://h/x?token=abc&b=1", "http://h/x?token=***&b=1"),
        ("http://h/x?a=1&API_KEY=abc#f", "http://h/x?a=1&API_KEY=***#f"),
        ("http://h/x?sig=s;key=k&access_token=t", "http://h/x?sig=***;key=***&access_token=***"),
        ("'http://u:p@h/x?key=k' failed", "'http://***@h/x?key=***' failed"),
        ("http://h/x?page=1&keys=2&token=", "http://h/x?page=1&keys=***&token="),
        # The names people use, any case, and any name containing a secret word.
        (
            "http://h/x?password=p&Secret=s&client_secret=c&APIKEY=a&auth=u&ok=1",
            "http://h/x?password=***&Secret=***&client_secret=***&APIKEY=***&auth=***&ok=1",
        ),
        ("http://h/mcp;token=t;v=1/x?a=1", "http://h/mcp;token=***;v=1/x?a=1"),  # matrix
        ("http://h/mcp;jsessionid=j?q=1", "http://h/mcp;jsessionid=j?q=1"),
        (
            "http://h/p?X-Session-Token=t&hmac_key=k&monkey=m",
            "http://h/p?X-Session-Token=***&hmac_key=***&monkey=***",
        ),
        (
            "http://h/p?pass%77ord=p&x-amz-signature=s",
            "http://h/p?pass%77ord=***&x-amz-signature=***",
        ),
        ("http://h/cb#access_token=t&state=1", "http://h/cb#access_token=***&state=1"),
        ("see http://h/p;password=p then", "see http://h/p;password=*** then"),
        ("http://h/p?author=me&title=t", "http://h/p?author=me&title=t"),
        ("token=abc outside a URL", "token=abc outside a URL"),
        ("http://h/x/token=abc", "http://h/x/token=abc"),
    ],
)
def test_redact_urls(raw: str, redacted: str) -> None:
    assert redact_urls(raw) == redacted


NEWLY_SECRET = (
    "bearer",
    "code",
    "session_id",
    "sessionid",
    "pat",
    "refresh",
    "refresh_token",
    "ticket",
    "sig",
    "signature",
    "X-Amz-Signature",
    "X-Amz-Credential",
    "X-Goog-Signature",
)


@pytest.mark.parametrize("name", NEWLY_SECRET)
@pytest.mark.parametrize("spelling", [str.lower, str.upper, str.title])
def test_every_listed_name_is_secret_in_any_case(name: str, spelling: object) -> None:
    """The maintained list: each name's value is hidden, whatever its case, on every surface
    (they all call redact_urls: answers, tables, the log, the CLIs, the face, db_display)."""
    assert callable(spelling)
    shown_name = spelling(name)
    raw = f"http://h/p?page=2&{shown_name}=V4LUE#x"
    assert redact_urls(raw) == f"http://h/p?page=2&{shown_name}=***#x"
    assert name.casefold() in SECRET_QUERY_PARAMETERS


def test_azure_sas_keeps_its_version_and_hides_its_signature() -> None:
    sas = "https://a.blob.core.windows.net/c/b?sv=2022-11-02&se=2030-01-01&sp=r&SIG=abc%2Bdef%3D"
    assert redact_urls(sas).endswith("?sv=2022-11-02&se=2030-01-01&sp=r&SIG=***")


@pytest.mark.parametrize(
    ("raw", "redacted"),
    [
        # A peer echoing the request: a path without a scheme is judged as a URL.
        ("internal error at /mcp?token=SEKRIT", "internal error at /mcp?token=***"),
        ("auth=Basic dTpTRUtSSVQ= rest", "auth=Basic *** rest"),
        ("Authorization: Bearer eyJhbGciOi.x-y_z", "Authorization: Bearer ***"),
        ("authorization: bearer SEKRIT2", "authorization: bearer ***"),
        # Prose and challenges stay readable.
        ("the Bearer token expired", "the Bearer token expired"),
        ("basic authentication failed", "basic authentication failed"),
        ('Bearer realm="mcp", error="invalid_token"', 'Bearer realm="mcp", error="invalid_token"'),
    ],
)
def test_echoed_credentials_are_cut(raw: str, redacted: str) -> None:
    assert redact_urls(raw) == redacted


def test_known_secrets_of_a_url_are_cut_from_peer_text() -> None:
    url = "http://alice:s%40cret@h/mcp?token=T0KEN&page=1"
    secrets = known_secrets(*url_credentials(url), "bearer-value-1", "ab")
    echo = (
        "denied alice:s%40cret s@cret YWxpY2U6c0BjcmV0 T0KEN bearer-value-1 page=1 ab "
        "at /mcp?token=T0KEN"
    )
    assert redact_known(echo, secrets) == ("denied *** *** *** *** *** page=1 ab at /mcp?token=***")
    assert "ab" not in secrets  # too short to look for in free text


def test_split_secret() -> None:
    assert split_secret("http://h/mcp") == ("http://h/mcp", None)
    url = "http://u:p@h/mcp?token=t"
    assert split_secret(url) == ("http://***@h/mcp?token=***", url)


def test_cli_tables_and_event_lines_are_escaped_and_redacted() -> None:
    text = table(("URL", "URI"), [["http://u:secret@h/mcp", "test://a\x1b]0;pwned\x07"]])
    assert "secret" not in text and "***@h" in text
    assert "\x1b" not in text and "\\x1b]0;pwned\\x07" in text
    line = event_line({"id": 1, "type": "resource.updated", "uri": "test://\u202eevil"})
    assert "\u202e" not in line and "\\u202e" in line


def test_safe_stream_escapes_everything_but_lines() -> None:
    sink = io.StringIO()
    stream = SafeStream(sink)
    assert stream.write("err \x1b[2J\nnext\n") == len("err \x1b[2J\nnext\n")
    assert sink.getvalue() == "err \\x1b[2J\nnext\n"
    original = sys.stderr
    with safe_stderr():
        assert isinstance(sys.stderr, SafeStream)
    assert sys.stderr is original
    assert shown("http://a:b@h/\x1b") == "http://***@h/\\x1b"


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "1e999"])
def test_non_finite_numbers_are_config_errors(value: str) -> None:
    with pytest.raises(ConfigError, match="keepalive_s"):
        load_settings(env={"MCPSUB_KEEPALIVE_S": value})


def test_repeat_limiter_lets_one_through_per_window_and_counts_the_rest() -> None:
    limiter = RepeatLimiter(window_s=10.0, max_tracked=4)
    assert limiter.check("emfile", 0.0) == 0
    assert all(limiter.check("emfile", 0.001 * i) is None for i in range(1, 5000))
    assert limiter.check("other", 1.0) == 0
    assert limiter.check("emfile", 10.5) == 4999
    for i in range(10):  # many distinct keys: bounded memory, still lets new keys through
        assert limiter.check(f"k{i}", 11.0) == 0
    assert len(limiter._seen) <= 4


def test_visible_escapes_every_invisible_character_of_this_python() -> None:
    """U+200B, U+FEFF, U+2060 and the rest of Unicode's Cf category, and every space but
    U+0020, are shown as escapes in URIs: lookalike URIs can be told apart."""
    import unicodedata

    from service.safetext import visible

    for code in range(sys.maxunicode + 1):
        char = chr(code)
        if unicodedata.category(char) in ("Cf", "Zs", "Zl", "Zp") and char != " ":
            assert visible(f"a{char}b") != f"a{char}b", hex(code)
    assert visible("test://a\u200bb") == "test://a\\u200bb"
    assert visible("tag\U000e0041") == "tag\\U000e0041"
    assert visible("naïve 日本語 🎉 test://x") == "naïve 日本語 🎉 test://x"
    assert shown("http://h/\ufeffx") == "http://h/\\ufeffx"
    assert terminal_safe("keeps \u200d in text") == "keeps \u200d in text"
