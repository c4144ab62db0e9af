"""The console's routes: ``/ui`` and ``/favicon.ico``, added to the daemon's app by its
composition root. Light on purpose: :mod:`service.console.pages` is imported on the first
request, so a daemon nobody browses never loads it."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response

router = APIRouter()


@router.get("/favicon.ico", include_in_schema=False)
async def favicon() -> Response:
    from service.console.pages import favicon  # lazily, as below

    return favicon()


@router.api_route("/ui{rest:path}", methods=["GET", "HEAD", "POST"], include_in_schema=False)
async def console(request: Request, rest: str) -> Response:
    from service.console.pages import handle  # lazily: a daemon nobody browses never loads it

    return await handle(request, rest)
