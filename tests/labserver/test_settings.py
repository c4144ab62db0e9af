"""Env parsing of the lab server (seed §6.1 rules), pure."""

import pytest

from labserver.settings import (
    normalize_path,
    parse_bool,
    parse_log_level,
    parse_number,
    parse_port,
    settings_from_env,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, "/mcp"),
        ("", "/mcp"),
        ("   ", "/mcp"),
        ("/", "/mcp"),
        ("mcp/subscribe-probe", "/mcp/subscribe-probe"),
        ("  /custom//  ", "/custom"),
        ("/a/b/", "/a/b"),
    ],
)
def test_path_is_trimmed_prefixed_and_stripped(raw: str | None, expected: str) -> None:
    assert normalize_path(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, 8089),
        ("", 8089),
        ("0", 0),
        ("9000", 9000),
        ("-1", 8089),
        ("abc", 8089),
        ("inf", 8089),
        ("nan", 8089),
        ("80.5", 8089),
        ("70000", 8089),
        (" 1234 ", 1234),
    ],
)
def test_port_must_be_a_finite_non_negative_integer(raw: str | None, expected: int) -> None:
    assert parse_port(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [(None, 5.0), ("0.05", 0.05), ("0", 0.0), ("1e-1", 0.1), ("-2", 5.0), ("soon", 5.0)],
)
def test_delay_accepts_fractions(raw: str | None, expected: float) -> None:
    assert parse_number(raw, 5.0) == expected


@pytest.mark.parametrize("raw", ["1", "true", "TRUE", "Yes", "on", " on "])
def test_truthy_words(raw: str) -> None:
    assert parse_bool(raw) is True


@pytest.mark.parametrize("raw", [None, "", "0", "false", "no", "off", "y", "enabled"])
def test_everything_else_is_false(raw: str | None) -> None:
    assert parse_bool(raw) is False


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (None, "debug"),
        ("INFO", "info"),
        ("warn", "warn"),
        ("error", "error"),
        ("silent", "silent"),
        ("warning", "debug"),
        ("verbose", "debug"),
    ],
)
def test_log_level_falls_back_to_debug(raw: str | None, expected: str) -> None:
    assert parse_log_level(raw) == expected


def test_defaults_from_an_empty_environment() -> None:
    settings = settings_from_env({})
    assert (settings.port, settings.path, settings.update_delay_seconds) == (8089, "/mcp", 5.0)
    assert (settings.initial_status, settings.updated_status) == ("pending", "reviewed")
    assert settings.send_list_changed is False
    assert settings.log_level == "debug"
    assert settings.keepalive_seconds == 15.0
    assert settings.max_subscriptions == 100
    assert settings.max_body_bytes == 4 * 1024 * 1024
    assert settings.control is False
    assert settings.auth_token is None


def test_every_variable_is_read() -> None:
    settings = settings_from_env(
        {
            "MCP_TEST_PORT": "0",
            "MCP_TEST_PATH": "probe/",
            "MCP_TEST_UPDATE_DELAY_SECONDS": "0.25",
            "MCP_TEST_INITIAL_STATUS": "queued",
            "MCP_TEST_UPDATED_STATUS": "approved",
            "MCP_TEST_SEND_LIST_CHANGED": "yes",
            "MCP_TEST_LOG_LEVEL": "error",
            "MCP_TEST_KEEPALIVE_SECONDS": "0.5",
            "MCP_TEST_MAX_SUBSCRIPTIONS": "3",
            "MCP_TEST_MAX_BODY_BYTES": "100",
            "MCP_TEST_CONTROL": "true",
            "MCP_TEST_AUTH_TOKEN": "s3cret",
        }
    )
    assert settings.port == 0
    assert settings.path == "/probe"
    assert settings.update_delay_seconds == 0.25
    assert (settings.initial_status, settings.updated_status) == ("queued", "approved")
    assert settings.send_list_changed is True
    assert settings.log_level == "error"
    assert settings.keepalive_seconds == 0.5
    assert settings.max_subscriptions == 3
    assert settings.max_body_bytes == 100
    assert settings.control is True
    assert settings.auth_token == "s3cret"
    assert "s3cret" not in repr(settings)


@pytest.mark.parametrize("raw", ["0", "-3", "x", "1.5"])
def test_caps_below_one_fall_back(raw: str) -> None:
    assert settings_from_env({"MCP_TEST_MAX_SUBSCRIPTIONS": raw}).max_subscriptions == 100
