"""The API's OpenAPI document, made to say what the API does (checked by schemathesis).

FastAPI's generated document is close but wrong in ways a client notices: it promises a
``422`` for bad input (we answer ``400`` with our error shape), lists none of the guard's or
the routes' error answers, and leaves strings unconstrained that the API refuses (a URI
without a scheme, a secret that is not ``whsec_`` + base64). :func:`document` post-processes
the generated document once: every error answer is listed with the shared ``Error`` schema,
and the parameters and bodies carry the constraints the validators enforce, so a request
the document calls valid is accepted and one it calls invalid gets a documented ``400``.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from service.app import validate
from service.eventtypes import EVENT_TYPES

_CONTROL = "\\x00-\\x1f\\x7f-\\x9f"
URI_SCHEMA: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": validate.MAX_URI_LENGTH,
    "pattern": f"^[^\\s{_CONTROL}]*:[^\\s{_CONTROL}]*$",
    "description": "resource URI: a scheme, no whitespace or control characters",
}
_PORT = "0*([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
URL_SCHEMA: dict[str, Any] = {
    "type": "string",
    "maxLength": validate.MAX_URL_LENGTH,
    # What validate.http_url accepts: http(s) (any case), optional user info, a host, an
    # optional port in 1..65535, then a path or query; no fragment, whitespace or controls.
    "pattern": (
        f"^[hH][tT][tT][pP][sS]?://([^\\s/?#\\[\\]{_CONTROL}]*@)?[^\\s/?#@:\\[\\]{_CONTROL}]+"
        f"(:({_PORT})?)?([/?][^\\s#{_CONTROL}]*)?$"
    ),
    "description": "absolute http(s) URL with a host; no fragment, whitespace or control characters",
}
PATTERN_SCHEMA: dict[str, Any] = {
    "type": "string",
    "minLength": 1,
    "maxLength": validate.MAX_URI_LENGTH,
    "pattern": f"^[^\\s{_CONTROL}]+$",
}
_B64 = "[A-Za-z0-9+/]"
SECRET_SCHEMA: dict[str, Any] = {
    "type": "string",
    # whsec_ + the base64 of 24..64 bytes (canonical padding).
    "pattern": (
        f"^whsec_(?:(?:{_B64}{{4}}){{8,21}}(?:{_B64}[AQgw]==)?"
        f"|(?:{_B64}{{4}}){{8,20}}{_B64}{{2}}[AEIMQUYcgkosw048]=)$"
    ),
    "description": "whsec_ + base64 of 24 to 64 random bytes; generated when absent",
}
_ONE_TYPE = "(?:" + "|".join(re.escape(name) for name in EVENT_TYPES) + ")"
TYPE_LIST_PATTERN = f"^{_ONE_TYPE}(?:,{_ONE_TYPE})*$"
"""Known event types, comma-separated (``resource.updated,subscription.state``): the API
refuses any other name with 400, so the document names them (service/eventtypes.py)."""
ID_SCHEMA: dict[str, Any] = {"type": "integer", "minimum": 1, "maximum": validate.MAX_ID}
SINCE_SCHEMA: dict[str, Any] = {
    "anyOf": [
        {"type": "number", "minimum": 0, "maximum": 1e11},
        {
            "type": "string",
            "pattern": (
                "^(19[7-9][0-9]|20[0-9]{2})-(0[1-9]|1[0-2])-(0[1-9]|1[0-9]|2[0-8])"
                "T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]Z$"
            ),
        },
    ],
    "description": "ISO-8601 (a naive time is UTC) or Unix seconds",
}


def body_schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    """A route's ``openapi_extra`` for a JSON object body (the route reads it itself)."""
    return {
        "requestBody": {
            "required": bool(required),
            "content": {
                "application/json": {
                    "schema": {"type": "object", "required": required, "properties": properties}
                }
            },
        }
    }


ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["errorCode", "message"],
    "properties": {
        "errorCode": {"type": "string"},
        "message": {"type": "string"},
        "field": {"type": "string"},
        "hint": {"type": "string"},
    },
}
_ERRORS = {
    "400": "bad input: INVALID_JSON, INVALID_URL, INVALID_URI, INVALID_PARAMETER, "
    "INVALID_SECRET, PRIVATE_TARGET, DUPLICATE_HEADER",
    "401": "API_TOKEN_REQUIRED (TCP mode)",
    "403": "ORIGIN_NOT_ALLOWED",
    "404": "not found (see errorCode)",
    "408": "REQUEST_TIMEOUT (body too slow) or NOTIFICATION_TIMEOUT (/v1/wait)",
    "413": "BODY_TOO_LARGE",
    "421": "HOST_NOT_ALLOWED",
    "503": "NOT_READY, STORAGE_FAILING or TOO_MANY_WAITERS",
}
_NOT_FOUND_PATHS = ("/v1/content", "/v1/wait", "/v1/deliveries/recover")
_BUSY_PATHS = ("/v1/wait", "/v1/events/stream", "/readyz")
_PARAMETER_SCHEMAS: dict[str, dict[str, Any]] = {"uri": URI_SCHEMA, "url": URL_SCHEMA}
TEXT_FILTER_SCHEMA: dict[str, Any] = {
    "type": "string",
    "maxLength": validate.MAX_URL_LENGTH,
    "pattern": f"^[^{_CONTROL}]*$",
    "description": "a fragment to look for (no control characters)",
}
STATE_FILTER_SCHEMA: dict[str, Any] = {"type": "string", "pattern": "^[a-z_]{0,32}$"}
_FILTER_PATHS = ("/v1/links", "/v1/subscriptions")
DELIVERY_STATES: tuple[str, ...] = ()
"""Set by the webhooks routes (their module owns the list)."""
QUERY_ENUMS: dict[tuple[str, str], tuple[str, ...]] = {}
"""(path, query parameter) -> its allowed values, set by the routes module that owns them."""
_BODY_SCHEMAS: dict[str, dict[str, Any]] = {
    "url": URL_SCHEMA,
    "uri": URI_SCHEMA,
    "secret": SECRET_SCHEMA,
    "target": ID_SCHEMA,
    "since": SINCE_SCHEMA,
    "uriPatterns": {"type": "array", "maxItems": 100, "items": PATTERN_SCHEMA},
    "subscriptionIds": {"type": "array", "maxItems": 100, "items": ID_SCHEMA},
}


def _error_response(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
    }


def _patch_operation(path: str, method: str, op: dict[str, Any]) -> None:
    responses: dict[str, Any] = op.setdefault("responses", {})
    responses.pop("422", None)
    codes = ["401", "403", "421"]
    if op.get("parameters") or op.get("requestBody"):
        codes.append("400")
    if "{id}" in path or path in _NOT_FOUND_PATHS:
        codes.append("404")
    if op.get("requestBody"):
        codes += ["408", "413"]
    if path == "/v1/wait":
        codes.append("408")
    if path in ("/v1/content", "/v1/wait"):
        codes.append("409")  # AMBIGUOUS_URI: several servers watch the URI, none named
    if path in _BUSY_PATHS:
        codes.append("503")
    if path == "/healthz":
        codes = ["403", "421"]
    for code in codes:
        if code not in responses or "content" not in responses[code]:
            description = responses.get(code, {}).get("description") or _ERRORS[code]
            responses[code] = _error_response(description)
    for param in op.get("parameters", []):
        name = param.get("name")
        if param.get("in") == "query" and name in _PARAMETER_SCHEMAS:
            param["schema"] = copy.deepcopy(_PARAMETER_SCHEMAS[name])
        if path.startswith("/v1/events") and name == "type":
            param["schema"] = {
                "type": "array",
                "items": {"type": "string", "pattern": TYPE_LIST_PATTERN},
            }
        if path in _FILTER_PATHS and name in ("server", "pattern"):
            param["schema"] = {**copy.deepcopy(TEXT_FILTER_SCHEMA), "type": "string"}
        if path in ("/v1/content", "/v1/wait") and name == "server":  # an id or a URL
            param["schema"] = {
                "anyOf": [{"type": "string", "pattern": "^[0-9]{1,18}$"}, copy.deepcopy(URL_SCHEMA)]
            }
        if path in _FILTER_PATHS and name == "state":
            param["schema"] = copy.deepcopy(STATE_FILTER_SCHEMA)
        if path == "/v1/deliveries" and name == "state" and DELIVERY_STATES:
            param["schema"] = {"type": "string", "enum": list(DELIVERY_STATES)}
        if (path, name) in QUERY_ENUMS:
            param["schema"] = {"type": "string", "enum": list(QUERY_ENUMS[path, name])}
    body = op.get("requestBody", {}).get("content", {}).get("application/json", {})
    if "schema" in body:
        _patch_body(body["schema"])


def _patch_body(schema: dict[str, Any]) -> None:
    variants = schema.get("oneOf", [])
    for variant in (*variants, *schema.get("anyOf", ())):
        _patch_body(variant)
    # oneOf variants told apart by a required key (uri / uris) must exclude each other's key:
    # the API refuses a body carrying both.
    keys = [set(v.get("required", [])) for v in variants]
    for variant, own in zip(variants, keys, strict=True):
        others = set().union(*(k for k in keys if k is not own)) - own
        if others:
            variant["not"] = {"anyOf": [{"required": [k]} for k in sorted(others)]}
    required = set(schema.get("required", []))
    for name, prop in list(schema.get("properties", {}).items()):
        extra = {k: v for k, v in prop.items() if k == "description"}
        if name in _BODY_SCHEMAS:
            prop = {**copy.deepcopy(_BODY_SCHEMAS[name]), **extra}
        elif name == "uris":
            prop = {**prop, "items": copy.deepcopy(URI_SCHEMA)}
        if name not in required:  # an optional field may be null: the same as absent
            prop = {"anyOf": [{k: v for k, v in prop.items() if k != "description"},
                              {"type": "null"}], **extra}  # fmt: skip
        schema["properties"][name] = prop


def document(app: FastAPI) -> dict[str, Any]:
    """The patched document (built once, then cached on ``app.openapi_schema``)."""
    if app.openapi_schema is not None:
        return app.openapi_schema
    spec = get_openapi(
        title=app.title, version=app.version, routes=app.routes, description=app.description
    )
    spec.setdefault("components", {}).setdefault("schemas", {})["Error"] = ERROR_SCHEMA
    for schemas in ("HTTPValidationError", "ValidationError"):
        spec["components"]["schemas"].pop(schemas, None)
    for path, operations in spec.get("paths", {}).items():
        for method, op in operations.items():
            if isinstance(op, dict):
                _patch_operation(path, method, op)
    app.openapi_schema = spec
    return spec
