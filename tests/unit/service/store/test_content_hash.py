"""service.store.store.content_hash: the same digest as the canonical ``json.dumps`` text it
was defined by (stored hashes must keep matching), whichever encoder makes it."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from service.store.store import content_hash


def defined(contents: list[Any]) -> str:
    canonical = json.dumps(contents, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode()).hexdigest()


_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


@given(st.lists(st.dictionaries(st.text(), _json, max_size=5), max_size=3))
@settings(max_examples=200)
def test_the_digest_is_the_canonical_json_digest(contents: list[dict[str, Any]]) -> None:
    assert content_hash(contents) == defined(contents)


def test_floats_and_wide_integers_keep_their_json_spelling() -> None:
    for value in (1e-07, 1e-05, 5.8564854802283824e-05, 1e16, 2**64, -(2**65)):
        contents = [{"uri": "test://a", "_meta": {"n": [value]}}]
        assert content_hash(contents) == defined(contents)
