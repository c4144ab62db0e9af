"""service.jsonencode: one compact UTF-8 encoding, as bytes or as text, orjson's or json's."""

from __future__ import annotations

import json

from service.jsonencode import json_bytes, json_text


def test_bytes_and_text_are_the_same_compact_json() -> None:
    value = {"a": [1, "é", None], "b": {"c": True}}
    assert json_bytes(value) == b'{"a":[1,"\xc3\xa9",null],"b":{"c":true}}'
    assert json_text(value) == '{"a":[1,"é",null],"b":{"c":true}}'


def test_values_orjson_refuses_are_encoded_by_json() -> None:
    assert json_text({"big": 2**70}) == '{"big":1180591620717411303424}'
    deep: object = 0
    for _ in range(300):
        deep = [deep]
    assert json.loads(json_bytes(deep)) == deep
