"""service.proberesult.ProbeResult: what both CLIs print of a probe."""

from __future__ import annotations

import pytest

from service.proberesult import ProbeResult


def result(**kw: object) -> ProbeResult:
    return ProbeResult("http://127.0.0.1:9/mcp", "r://a", ["r://a"], **kw)  # type: ignore[arg-type]


def test_defaults() -> None:
    r = result()
    assert r.route == "timeout"
    assert r.honored_uris == []
    assert r.notification_received is False
    assert r.recommended_next_action is None


def test_honored_uris_default_is_not_shared() -> None:
    one, two = result(), result()
    one.honored_uris.append("r://a")
    assert two.honored_uris == []


def test_notification_received_only_on_the_subscription_route() -> None:
    assert result(route="subscription").notification_received is True
    assert result(route="poll").notification_received is False


def test_next_action_comes_from_the_final_text() -> None:
    r = result(
        initial_text='{"recommended_next_action": "IGNORED"}',
        final_text='{"recommended_next_action": "MERGE"}',
    )
    assert r.recommended_next_action == "MERGE"


def test_equality_is_field_by_field_and_unhashable() -> None:
    assert result(notification_count=2) == result(notification_count=2)
    assert result(notification_count=2) != result(notification_count=3)
    assert result().__eq__("x") is NotImplemented
    with pytest.raises(TypeError):
        hash(result())


def test_repr_names_every_field() -> None:
    text = repr(result(error_code="TIMEOUT"))
    assert text.startswith("ProbeResult(")
    assert all(f"{name}=" in text for name in ProbeResult.__slots__)
    assert "error_code='TIMEOUT'" in text
