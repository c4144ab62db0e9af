"""cli.argscan: the TypeScript CLI's argv rules (seed §1.2)."""

from __future__ import annotations

import pytest

from cli.argscan import UsageError, has_flag, option, parse_timeout_ms, peek


def test_space_form() -> None:
    assert option(["--url", "http://a/mcp"], "url") == "http://a/mcp"


def test_equals_form() -> None:
    assert option(["--url=http://a/mcp?x=1"], "url") == "http://a/mcp?x=1"
    assert option(["--url="], "url") == ""


def test_flags_found_anywhere() -> None:
    assert option(["call", "--json", "--tool", "t", "--url", "u"], "url") == "u"


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--url", "first", "--url", "second"], "first"),
        (["--url=first", "--url", "second"], "first"),
        (["--url", "first", "--url=second"], "first"),
        (["--url=first", "--url=second"], "first"),
    ],
)
def test_first_occurrence_wins(argv: list[str], expected: str) -> None:
    assert option(argv, "url") == expected


def test_absent_is_none() -> None:
    assert option(["--uri", "x", "--urlx", "y", "--url-other=z"], "url") is None


@pytest.mark.parametrize("argv", [["--uri"], ["--uri", "--json"], ["--uri", "--url", "u"]])
def test_missing_value(argv: list[str]) -> None:
    with pytest.raises(UsageError) as info:
        option(argv, "uri")
    assert str(info.value) == "Missing value for --uri"


def test_single_dash_value_is_accepted() -> None:
    assert option(["--args", "-1"], "args") == "-1"


def test_missing_value_after_first_occurrence_wins_over_later_good_one() -> None:
    with pytest.raises(UsageError, match="Missing value for --url"):
        option(["--url", "--json", "--url", "http://ok"], "url")


def test_peek_never_raises() -> None:
    assert peek(["--url"], "url") is None
    assert peek(["--url", "--json"], "url") is None
    assert peek(["--url", "u", "--uri"], "url") == "u"
    assert peek([], "url") is None


def test_has_flag() -> None:
    assert has_flag(["a", "--json"], "--json")
    assert has_flag(["-h"], "--help", "-h")
    assert not has_flag(["--json=1", "--jsonx"], "--json")


@pytest.mark.parametrize(
    ("raw", "value"),
    [("1000", 1000.0), ("1.5e3", 1500.0), (" 250 ", 250.0), ("0.5", 0.5), ("1E2", 100.0)],
)
def test_parse_timeout_ms_accepts(raw: str, value: float) -> None:
    assert parse_timeout_ms(raw) == value


@pytest.mark.parametrize(
    "raw", ["0", "-1", "abc", "inf", "-inf", "Infinity", "nan", "", "   ", "1e400", "10ms"]
)
def test_parse_timeout_ms_rejects(raw: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_timeout_ms(raw)
    assert str(info.value) == f"Invalid --timeout-ms: {raw}"


def test_usage_error_is_value_error() -> None:
    assert issubclass(UsageError, ValueError)


def test_parse_timeout_ms_rejects_underscores_like_number() -> None:
    with pytest.raises(UsageError):
        parse_timeout_ms("1_000")
