"""service.actions: recommended_next_action extraction (seed §3.4)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from service import actions, jsondecode
from service.actions import NON_TERMINAL_ACTIONS, extract_next_action, is_non_terminal


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("review_status: IN_PROGRESS\nrecommended_next_action: POLL_AFTER", "POLL_AFTER"),
        (
            'final: { review_status: "IN_PROGRESS", recommended_next_action: "POLL_AFTER" }',
            "POLL_AFTER",
        ),
        ('{"recommended_next_action":"READ_REVIEW_THREADS"}', "READ_REVIEW_THREADS"),
        ('{"watch":{"recommended_next_action":"CHECK_FAILURE"}}', "CHECK_FAILURE"),
    ],
)
def test_seed_vectors(text: str, expected: str) -> None:
    assert extract_next_action(text) == expected


def test_depth_first_in_document_order() -> None:
    text = (
        '{"a":{"b":{"recommended_next_action":"DEEP_FIRST"}},'
        '"c":{"recommended_next_action":"SHALLOW_LATER"}}'
    )
    assert extract_next_action(text) == "DEEP_FIRST"


def test_own_key_beats_children() -> None:
    text = '{"nested":{"recommended_next_action":"INNER"},"recommended_next_action":"OUTER"}'
    assert extract_next_action(text) == "OUTER"


def test_arrays_are_searched_in_order() -> None:
    text = (
        '[1, {"x": []}, {"recommended_next_action": "IN_LIST"}, {"recommended_next_action": "NO"}]'
    )
    assert extract_next_action(text) == "IN_LIST"


def test_non_string_value_is_skipped() -> None:
    text = '{"recommended_next_action": 5, "child": {"recommended_next_action": "REAL"}}'
    assert extract_next_action(text) == "REAL"


@pytest.mark.parametrize(
    "text",
    [
        '{"recommended_next_action": null}',
        '{"recommended_next_action": ["POLL_AFTER"]}',
        '{"recommended_next_action": {"x": 1}}',
        '"just a string"',
        "42",
        "nothing here",
        "myrecommended_next_action: X",
    ],
)
def test_no_action(text: str) -> None:
    assert extract_next_action(text) is None


@pytest.mark.parametrize("text", [None, ""])
def test_none_or_empty(text: str | None) -> None:
    assert extract_next_action(text) is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("recommended_next_action=START_NEW_WATCH", "START_NEW_WATCH"),
        ("x,recommended_next_action : BLOCKED, y", "BLOCKED"),
        ('{bad json, "recommended_next_action": "FROM_B with space"}', "FROM_B with space"),
        ('prefix"recommended_next_action": "B ONLY"', "B ONLY"),
    ],
)
def test_regex_fallbacks(text: str, expected: str) -> None:
    assert extract_next_action(text) == expected


def test_is_non_terminal_case_sensitive() -> None:
    assert frozenset({"POLL_AFTER"}) == NON_TERMINAL_ACTIONS
    assert is_non_terminal("recommended_next_action: POLL_AFTER")
    assert is_non_terminal('{"recommended_next_action":"POLL_AFTER"}')
    assert not is_non_terminal("recommended_next_action: poll_after")
    assert not is_non_terminal("recommended_next_action: Poll_After")
    assert not is_non_terminal("recommended_next_action: READ_REVIEW_THREADS")
    assert not is_non_terminal(None)
    assert not is_non_terminal("")


def _reference(text: str | None) -> str | None:
    """The search without its shortcut: JSON first, then the two patterns."""
    if not text:
        return None
    try:
        parsed = jsondecode.loads(text)
    except jsondecode.InvalidJson:
        parsed = None
    found = actions._search(parsed) if parsed is not None else None
    if found is not None:
        return found
    for pattern in (actions._PATTERN_A, actions._PATTERN_B):
        match = pattern.search(text)
        if match:
            return match.group(1)
    return None


_PIECES = st.sampled_from(
    ['{"recommended_next_action": "POLL_AFTER"}', '"recommended\\u005fnext_action"', "recommended_next_action=DONE",
     '{"a": [', "]}", ": ", '"x"', "\\u0041", "recommended_next", "_action", " ", ",", "{", "}"]
)  # fmt: skip


@given(st.lists(_PIECES, max_size=8).map("".join))
@settings(max_examples=200)
def test_the_shortcut_finds_what_the_full_search_finds(text: str) -> None:
    assert extract_next_action(text) == _reference(text)


def test_a_key_spelled_with_an_escape_is_still_found() -> None:
    assert extract_next_action('{"recommended\\u005fnext_action": "POLL_AFTER"}') == "POLL_AFTER"
