"""Make text from servers and users safe to show (pure).

Two jobs, used by every place that prints or logs such text:

* :func:`terminal_safe` escapes what a terminal would act on instead of showing: C0 and C1
  control characters (ESC starts ANSI sequences, CR rewrites a line, BEL rings), DEL, and the
  Unicode bidirectional controls that reorder what is shown (U+202E "Trojan Source"). Each
  becomes a visible ``\\xNN`` / ``\\uNNNN``; ordinary text, backslashes included, is returned
  unchanged, so output for normal text stays byte-identical.
* :func:`visible` (and :func:`shown`) does that and also escapes what a reader cannot see:
  invisible format characters (Unicode category Cf: U+200B zero-width space, U+FEFF, U+2060
  word joiner, tag characters…), blank fillers and every space but U+0020. Used for one-line
  values such as URIs, so ``test://a\u200bb`` cannot pass for ``test://ab``;
  a resource's text keeps them (``terminal_safe``: they are part of its writing).
* :func:`redact_urls` replaces the ``user:password@`` part of every URL in a string with
  ``***@``, and the value of every secret parameter (:func:`is_secret_parameter`: a name in
  :data:`SECRET_QUERY_PARAMETERS`, or one containing :data:`SECRET_NAME_PARTS`; in the
  query, the path's ``;name=value`` matrix parameters and the fragment) with ``***``, so
  credentials in a server or webhook URL never reach a log, a table, an API answer or a bug
  report.
  :func:`split_secret` is the same rule for storing a URL: the shown form goes where anything
  may read it, the full one only where the wire needs it.
"""

from __future__ import annotations

import contextlib
import functools
import re
import sys
from collections.abc import Iterator

TYPE_CHECKING = False  # typing costs more than socket+json: not imported at run time
if TYPE_CHECKING:
    from typing import Any

BIDI_CONTROLS = frozenset(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)
_UNSAFE_CLASS = "\x00-\x1f\x7f-\x9f" + "".join(sorted(BIDI_CONTROLS)) + "\ud800-\udfff"
_KEEP_LINES_CLASS = "\x00-\x08\x0b-\x1f\x7f-\x9f" + "".join(sorted(BIDI_CONTROLS)) + "\ud800-\udfff"
INVISIBLE_CLASS = (
    "\u00a0\u00ad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160"
    "\u1680\u17b4\u17b5\u180b-\u180f\u2000-\u200f\u2028-\u202f\u205f-\u206f\u3000\u3164"
    "\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f"
    "\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f"
    "\U000e0100-\U000e01ef"
)
"""What :func:`visible` escapes beyond :func:`terminal_safe`: every format character (Cf, as
of Unicode 15.1; a test checks the running Python's table against it), every space and
separator but U+0020 (Zs, Zl, Zp), the Hangul and Khmer fillers and the variation selectors
that render as nothing. Written out: ``unicodedata`` would cost every CLI call its import."""
SECRET_QUERY_PARAMETERS = frozenset(
    {
        "access_token",
        "api_key",
        "apikey",
        "auth",
        "authorization",
        "bearer",
        "client_secret",
        "code",
        "credential",
        "credentials",
        "jwt",
        "key",
        "pass",
        "passwd",
        "password",
        "pat",
        "pwd",
        "refresh",
        "refresh_token",
        "secret",
        "session",
        "session_id",
        "sessionid",
        "sid",
        "sig",
        "signature",
        "ticket",
        "token",
        "x-amz-credential",
        "x-amz-signature",
        "x-goog-credential",
        "x-goog-signature",
    }
)
"""URL parameter names whose value is a credential by convention (compared ignoring case,
after percent-decoding). The maintained list, the one every surface uses (answers, events,
tables, the log, both CLIs' output and stderr, the face, the database URL ``mcpsubd``
prints): add a name here when a service is found putting a credential under it, and to
docs/api.md ("Credentials in a URL"). OAuth's ``code``, ``refresh``/``refresh_token`` and
``bearer``; GitHub's ``pat``; session ids; the console's login ``ticket``; the signed-URL
schemes' signatures (S3 ``X-Amz-Signature``/``X-Amz-Credential``, GCS ``X-Goog-*``, the
``sig`` of an Azure SAS, whose ``sv`` is only its version and stays shown). A name already
caught by :data:`SECRET_NAME_PARTS` is listed anyway when services use it as it is."""
SECRET_NAME_PARTS = ("token", "secret", "password", "passwd", "key", "credential")
"""A parameter whose name contains one of these (``X-Session-Token``, ``hmac_key``,
``oauth_client_secret``) is a credential too, whatever the service calls it."""
_PATTERNS = {
    "unsafe": f"[{_UNSAFE_CLASS}]",
    "keep_lines": f"[{_KEEP_LINES_CLASS}]",
    "visible": f"[{_UNSAFE_CLASS}{INVISIBLE_CLASS}]",
    "userinfo": r"(?i)\b([a-z][a-z0-9+.-]*://)[^/?#\s@]*@",
    "parameter": r"([?&;#])([^=&;#?/\s\"'<>]+)=([^&;#\s\"'<>]+)",
    "path_parameter": r"(;)([^=;/?#\s\"'<>]+)=([^;/?#\s\"'<>]+)",
    "url_with_parameters": (
        r"(?i)(?:\b[a-z][a-z0-9+.-]*://|(?<![\w/.:])/)[^\s\"'<>?#;]*[?#;][^\s\"'<>]*"
    ),
    "credentials": r"(?i)\b(basic|bearer)(\s+)([A-Za-z0-9._~+/-]+=*)(?![\w\"=.~+/-])",
}


@functools.cache
def _pattern(name: str) -> re.Pattern[str]:
    """Compiled on first use: every CLI call imports this module (its stderr wrapper), most
    never meet text that needs escaping, and compiling costs more than the rest of the call's
    own code (``results/cli.md``)."""
    return re.compile(_PATTERNS[name])


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def terminal_safe(text: str, *, keep_lines: bool = False) -> str:
    """``text`` with control and bidi characters escaped; ``keep_lines`` keeps ``\\n``/``\\t``
    (for multi-line content such as a resource's text)."""
    # Printable text has no C0/C1 controls, no bidi controls (format characters) and no lone
    # surrogates: nothing to escape, and no regular expression to run.
    if (text.replace("\n", "").replace("\t", "") if keep_lines else text).isprintable():
        return text
    return _pattern("keep_lines" if keep_lines else "unsafe").sub(_escape, text)


def visible(text: str) -> str:
    """``text`` as one line a reader can check character by character: what
    :func:`terminal_safe` escapes, and the invisible characters of :data:`INVISIBLE_CLASS`
    (for URIs and other one-line values; not for a resource's text)."""
    if text.isascii() and text.isprintable():
        return text
    return _pattern("visible").sub(_escape, text)


def redact_urls(text: str) -> str:
    """Every ``scheme://user:pass@host`` in ``text`` becomes ``scheme://***@host``, and every
    secret parameter of a URL in it (``?token=abc``, ``;password=abc``, ``&client_secret=``,
    :func:`is_secret_parameter`) becomes ``name=***``. The one redaction rule: every URL
    shown anywhere (answers, events, tables, the log) goes through it."""
    if "@" in text:
        text = _pattern("userinfo").sub(r"\1***@", text)
    if "=" in text:
        text = _pattern("url_with_parameters").sub(_redact_parameters, text)
    if "asic" in text or "earer" in text or "ASIC" in text or "EARER" in text:
        text = _pattern("credentials").sub(_cut_credentials, text)
    return text


def _cut_credentials(match: re.Match[str]) -> str:
    """``Basic <base64>`` and ``Bearer <token>`` (as a peer echoes an ``Authorization``
    header) keep their scheme and lose the credentials. A lower-case word after the scheme is
    prose ("Bearer token expired", "basic authentication"), not a credential."""
    value = match.group(3)
    if value.isalpha() and value.islower():
        return match.group()
    return f"{match.group(1)}{match.group(2)}***"


MIN_KNOWN_SECRET = 4
"""A credential shorter than this is not searched for in free text (:func:`redact_known`):
it would match ordinary words; in a URL the parameter and userinfo rules still hide it."""


def url_credentials(url: str) -> list[str]:
    """What ``url`` carries that is secret, as a peer might echo it: the userinfo (whole,
    each part, percent-decoded too, and the ``Basic`` credentials made of it) and the value
    of every secret parameter (:func:`is_secret_parameter`), as written and decoded. Pure."""
    from base64 import b64encode
    from urllib.parse import unquote, urlsplit

    found: list[str] = []
    try:
        parts = urlsplit(url)
    except ValueError:
        return found
    userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    if userinfo:
        user, _, password = userinfo.partition(":")
        found += [userinfo, user, password, unquote(user), unquote(password)]
        pair = f"{unquote(user)}:{unquote(password)}".encode()
        found.append(b64encode(pair).decode("ascii"))
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=len(url))
    for name, text in (("path_parameter", url[:cut]), ("parameter", url[cut:])):
        for match in _pattern(name).finditer(text):
            if is_secret_parameter(match.group(2)):
                found += [match.group(3), unquote(match.group(3))]
    return found


def known_secrets(*values: str | None) -> tuple[str, ...]:
    """The strings :func:`redact_known` cuts: each value given (a token, a webhook secret
    and its key), longest first so a secret that contains another goes whole, without the
    ones shorter than :data:`MIN_KNOWN_SECRET`. Pure."""
    unique = {value for value in values if value and len(value) >= MIN_KNOWN_SECRET}
    return tuple(sorted(unique, key=len, reverse=True))


def redact_known(text: str, secrets: tuple[str, ...]) -> str:
    """Text a peer sent (an error message, an HTTP error body, a receiver's answer), with
    every credential the daemon knows for that peer (``secrets``, :func:`known_secrets`)
    replaced by ``***``, then :func:`redact_urls`: a server that echoes its request cannot
    make a surface show what the request carried."""
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, "***")
    return redact_urls(text)


def is_secret_parameter(name: str) -> bool:
    """Whether a URL parameter called ``name`` carries a credential: a name of
    :data:`SECRET_QUERY_PARAMETERS`, or one containing a part of :data:`SECRET_NAME_PARTS`,
    compared ignoring case after percent-decoding (``pass%77ord`` is ``password``). Pure."""
    if "%" in name:
        from urllib.parse import unquote  # rare: not imported by every CLI call

        name = unquote(name)
    folded = name.casefold()
    return folded in SECRET_QUERY_PARAMETERS or any(part in folded for part in SECRET_NAME_PARTS)


def _redact_parameters(match: re.Match[str]) -> str:
    """The path's ``;name=value`` parameters end at ``/``, ``;``, ``?`` or ``#``; the query's
    and the fragment's at ``&``, ``;`` or ``#``."""
    url = match.group()
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=len(url))
    path, rest = url[:cut], url[cut:]
    if ";" in path:
        path = _pattern("path_parameter").sub(_redact_parameter, path)
    return path + _pattern("parameter").sub(_redact_parameter, rest)


def _redact_parameter(match: re.Match[str]) -> str:
    if not is_secret_parameter(match.group(2)):
        return match.group()
    return f"{match.group(1)}{match.group(2)}=***"


def split_secret(url: str) -> tuple[str, str | None]:
    """``(shown, secret)``: ``url`` as it may be shown (:func:`redact_urls`), and ``url``
    itself when that differs (it carries credentials), else None. Pure."""
    shown_url = redact_urls(url)
    return shown_url, (None if shown_url == url else url)


def shown(value: object) -> str:
    """A value from a server or a user as one safe line: redacted, escaped, and with its
    invisible characters shown (:func:`visible`)."""
    return visible(redact_urls(str(value)))


class SafeStream:
    """A text stream that escapes what :func:`terminal_safe` escapes (lines and tabs kept)
    and redacts credentials in URLs (:func:`redact_urls`).

    Installed over ``sys.stderr`` by both CLIs (:func:`safe_stderr`), so no diagnostic, whatever
    text from a server it quotes, can drive the terminal. Normal text passes byte for byte."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        self._inner.write(terminal_safe(redact_urls(text), keep_lines=True))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


@contextlib.contextmanager
def safe_stderr() -> Iterator[None]:
    """``sys.stderr`` wrapped in a :class:`SafeStream` for the duration (restored after)."""
    original = sys.stderr
    sys.stderr = SafeStream(original)
    try:
        yield
    finally:
        sys.stderr = original
