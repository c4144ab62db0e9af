"""The tests' webhook receiver keeps the run's output clean: a daemon killed mid-delivery
resets its connection, which is what those tests do, not an error worth a traceback; any
other error in the receiver still prints one."""

from __future__ import annotations

from http.server import BaseHTTPRequestHandler

import pytest

from tests.webhooks.receiver import QuietServer


def test_a_sender_that_goes_away_prints_nothing_and_other_errors_still_do(
    capsys: pytest.CaptureFixture[str],
) -> None:
    server = QuietServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    try:
        for error in (ConnectionResetError(104, "reset"), BrokenPipeError(32, "pipe")):
            try:
                raise error
            except OSError:
                server.handle_error(None, ("127.0.0.1", 1))
        assert capsys.readouterr().err == ""
        try:
            raise ValueError("a bug in the receiver")
        except ValueError:
            server.handle_error(None, ("127.0.0.1", 1))
        assert "ValueError: a bug in the receiver" in capsys.readouterr().err
    finally:
        server.server_close()
