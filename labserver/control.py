"""The ``/lab`` control surface: inspect and steer a running lab server over JSON.

Only mounted when ``MCP_TEST_CONTROL`` is true (otherwise every ``/lab`` path is 404), and
never behind the MCP bearer token: it is for tests and people on the same machine. Each
endpoint is documented in ``docs/labserver.md``; client tests are written against these
exact paths and field names.
"""

from __future__ import annotations

import asyncio
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from labserver.labconfig import ConfigError, apply_patch
from labserver.resources import REVIEW_URI
from labserver.state import Lab


def _lab(request: Request) -> Lab:
    lab: Lab = request.app.state.lab
    return lab


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def _json_object(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw.strip():
        return {}
    try:
        body = await request.json()
    except ValueError as exc:
        raise ConfigError("body must be JSON") from exc
    if not isinstance(body, dict):
        raise ConfigError("body must be a JSON object")
    return body


def _int_arg(body: dict[str, Any], key: str, default: int | None = None, minimum: int = 0) -> int:
    value = body.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{key} must be an integer >= {minimum}")
    return value


async def state(request: Request) -> Response:
    return JSONResponse(_lab(request).state())


async def put_resource(request: Request) -> Response:
    lab = _lab(request)
    try:
        body = await _json_object(request)
        uri, text = body.get("uri"), body.get("text")
        if not isinstance(uri, str) or not uri or not isinstance(text, str):
            raise ConfigError("uri (non-empty string) and text (string) are required")
        name, mime = body.get("name"), body.get("mimeType")
        notify = body.get("notify", True)
        if name is not None and not isinstance(name, str):
            raise ConfigError("name must be a string")
        if mime is not None and not isinstance(mime, str):
            raise ConfigError("mimeType must be a string")
        if not isinstance(notify, bool):
            raise ConfigError("notify must be a boolean")
    except ConfigError as exc:
        return _error(400, str(exc))
    resource, created = lab.put_resource(uri, text, name=name, mime_type=mime, notify=notify)
    lab.log.record("lab.resource.put", uri=uri, version=resource.version, created=created)
    return JSONResponse(
        {**resource.state(), "created": created}, status_code=201 if created else 200
    )


async def delete_resource(request: Request) -> Response:
    lab = _lab(request)
    uri = request.query_params.get("uri")
    if not uri:
        return _error(400, "query parameter uri is required")
    if not lab.delete_resource(uri):
        return _error(404, f"unknown resource: {uri}")
    lab.log.record("lab.resource.deleted", uri=uri)
    return JSONResponse({"deleted": uri})


async def burst(request: Request) -> Response:
    lab = _lab(request)
    try:
        body = await _json_object(request)
        uri = body.get("uri")
        count = _int_arg(body, "count", minimum=1)
        interval_ms = _int_arg(body, "intervalMs", default=0)
        template = body.get("text", "burst {n}")
        if not isinstance(uri, str) or not isinstance(template, str):
            raise ConfigError("uri and text must be strings")
    except ConfigError as exc:
        return _error(400, str(exc))
    if uri not in lab.resources:
        return _error(404, f"unknown resource: {uri}")
    for n in range(1, count + 1):
        if n > 1 and interval_ms:
            await asyncio.sleep(interval_ms / 1000)
        resource, _ = lab.put_resource(uri, template.replace("{n}", str(n)))
    lab.log.record("lab.burst", uri=uri, count=count)
    return JSONResponse({**resource.state(), "count": count})


async def update(request: Request) -> Response:
    lab = _lab(request)
    try:
        body = await _json_object(request)
    except ConfigError as exc:
        return _error(400, str(exc))
    uri = body.get("uri", REVIEW_URI)
    if not isinstance(uri, str):
        return _error(400, "uri must be a string")
    if uri == REVIEW_URI and lab.review() is not None:
        resource = lab.fire_review_update()
    elif uri in lab.resources:
        current = lab.resources[uri]
        resource, _ = lab.put_resource(uri, current.text)
    else:
        return _error(404, f"unknown resource: {uri}")
    assert resource is not None
    return JSONResponse(resource.state())


async def notify(request: Request) -> Response:
    """Send ``notifications/resources/updated`` for ``uri`` without changing anything.

    ``via`` (optional) names the subscribed URI whose streams get it, for sub-resources.
    """
    lab = _lab(request)
    try:
        body = await _json_object(request)
    except ConfigError as exc:
        return _error(400, str(exc))
    uri, via = body.get("uri"), body.get("via")
    if not isinstance(uri, str) or not (via is None or isinstance(via, str)):
        return _error(400, "uri (and via, if given) must be strings")
    sent = lab.hub.publish_updated(uri, via=via)
    lab.log.record("lab.notify", uri=uri, via=via, streams=sent)
    return JSONResponse({"uri": uri, "via": via, "streams": sent})


async def drop_streams(request: Request) -> Response:
    return JSONResponse({"dropped": await _lab(request).end_streams("drop")})


async def close_streams(request: Request) -> Response:
    return JSONResponse({"closed": await _lab(request).end_streams("close")})


async def get_config(request: Request) -> Response:
    return JSONResponse(_lab(request).config.to_json())


async def patch_config(request: Request) -> Response:
    lab = _lab(request)
    try:
        lab.config = apply_patch(lab.config, await _json_object(request))
    except ConfigError as exc:
        return _error(400, str(exc))
    return JSONResponse(lab.config.to_json())


async def reset(request: Request) -> Response:
    lab = _lab(request)
    lab.reset()
    return JSONResponse(lab.state())


def _since(request: Request) -> int:
    raw = request.query_params.get("since", "0")
    return int(raw) if raw.isdigit() else 0


async def log(request: Request) -> Response:
    return JSONResponse({"entries": _lab(request).log.entries(_since(request))})


async def wait(request: Request) -> Response:
    params = request.query_params
    event = params.get("event")
    if not event:
        return _error(400, "query parameter event is required")
    try:
        count = int(params.get("count", "1"))
        timeout_ms = float(params.get("timeoutMs", "5000"))
    except ValueError:
        return _error(400, "count and timeoutMs must be numbers")
    found = await _lab(request).log.wait_for(
        event, count, max(timeout_ms, 0) / 1000, since=_since(request)
    )
    if found is None:
        entries = _lab(request).log.entries(_since(request), event)
        return JSONResponse(
            {"error": f"timed out waiting for {count} x {event}", "entries": entries},
            status_code=408,
        )
    return JSONResponse({"entries": found})


def control_routes() -> list[Route]:
    return [
        Route("/lab/state", state, methods=["GET"]),
        Route("/lab/resources", put_resource, methods=["PUT"]),
        Route("/lab/resources", delete_resource, methods=["DELETE"]),
        Route("/lab/burst", burst, methods=["POST"]),
        Route("/lab/update", update, methods=["POST"]),
        Route("/lab/notify", notify, methods=["POST"]),
        Route("/lab/streams/drop", drop_streams, methods=["POST"]),
        Route("/lab/streams/close", close_streams, methods=["POST"]),
        Route("/lab/config", get_config, methods=["GET"]),
        Route("/lab/config", patch_config, methods=["PATCH"]),
        Route("/lab/reset", reset, methods=["POST"]),
        Route("/lab/log", log, methods=["GET"]),
        Route("/lab/wait", wait, methods=["GET"]),
    ]
