"""Pure parts of ``mcpsubctl webhook``/``deliveries``: --since values, the delivery table."""

from __future__ import annotations

import time

from cli.webhook_cmds import DELIVERY_HEADERS, delivery_lines, delivery_rows, since_value


def test_since_takes_a_duration_back_from_now() -> None:
    now = time.time()
    assert abs(int(since_value("2h")) - (now - 7200)) <= 2
    assert abs(int(since_value("90s")) - (now - 90)) <= 2
    assert abs(int(since_value("7D")) - (now - 7 * 86400)) <= 2
    for passed in ("2026-11-29T00:00:00Z", "1764374400", "h", "2x", "-1h"):
        assert since_value(passed) == passed  # the daemon judges these


def test_the_last_error_is_shown_without_json() -> None:
    delivery = {
        "id": 4, "targetId": 1, "state": "dead", "attempts": 3, "lastStatus": 500,
        "webhookId": "msg_1", "nextAttemptAt": None, "deliveredAt": None, "createdAt": 1.0,
        "uri": "test://a", "lastError": "HTTP 500\x1b[2J", "eventId": 7, "subscriptionId": 2,
    }  # fmt: skip
    [row] = delivery_rows([delivery])
    assert DELIVERY_HEADERS[-1] == "LAST ERROR" and row[-1] == "HTTP 500\x1b[2J"
    assert "last error:    HTTP 500\\x1b[2J" in delivery_lines(delivery).splitlines()
