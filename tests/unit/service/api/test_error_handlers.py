"""service.api.error_handlers: every failure of the local API is one JSON shape with a stable
code.

A small FastAPI app with only these handlers, called in process (no daemon, no socket)."""

from __future__ import annotations

import errno

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.exc import OperationalError

from service.api.error_handlers import install_handlers
from service.app.errors import ApiError, NotWatched, StorageFailing, error_body


def make_app() -> FastAPI:
    app = FastAPI()
    install_handlers(app)

    @app.get("/watched")
    def watched() -> None:
        raise NotWatched("not watched: r://a", field="uri")

    @app.get("/extra")
    def extra() -> None:
        raise ApiError("bad", hint="do better", extra={"after": 7})

    @app.get("/number")
    def number(n: int) -> int:
        return n

    @app.get("/both")
    def both_get() -> int:
        return 1

    @app.post("/both")
    def both_post() -> int:
        return 2

    @app.get("/items/{item}")
    def item(item: str) -> str:
        return item

    @app.put("/items/{item}")
    def put_item(item: str) -> str:
        return item

    @app.get("/disk-full")
    def disk_full() -> None:
        raise OperationalError("INSERT", {}, OSError(errno.ENOSPC, "database or disk is full"))

    @app.get("/sql-bug")
    def sql_bug() -> None:
        raise OperationalError("SELECT", {}, Exception("no such column: secret_token"))

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("token=abc123 leaked?")

    return app


@pytest.fixture
def client() -> TestClient:
    return TestClient(make_app(), raise_server_exceptions=False)


def test_error_body_omits_unknown_field_and_hint() -> None:
    assert error_body("X", "m") == {"errorCode": "X", "message": "m"}
    assert error_body("X", "m", field="f", hint="h") == {
        "errorCode": "X",
        "message": "m",
        "field": "f",
        "hint": "h",
    }


def test_domain_error_has_its_status_code_and_default_hint(client: TestClient) -> None:
    response = client.get("/watched")
    assert response.status_code == 404
    assert response.json() == {
        "errorCode": "NOT_WATCHED",
        "message": "not watched: r://a",
        "field": "uri",
        "hint": NotWatched.default_hint,
    }


def test_explicit_hint_and_extra_keys(client: TestClient) -> None:
    response = client.get("/extra")
    assert response.status_code == 400
    assert response.json() == {
        "errorCode": "BAD_REQUEST",
        "message": "bad",
        "hint": "do better",
        "after": 7,
    }


def test_validation_error_names_the_field(client: TestClient) -> None:
    response = client.get("/number", params={"n": "seven"})
    assert response.status_code == 400
    body = response.json()
    assert body["errorCode"] == "INVALID_PARAMETER"
    assert body["field"] == "n"
    assert body["message"].startswith("n: ")


def test_unknown_path_is_not_found_with_a_hint(client: TestClient) -> None:
    response = client.get("/nowhere")
    assert response.status_code == 404
    assert response.json()["errorCode"] == "NOT_FOUND"
    assert "openapi" in response.json()["hint"]


def test_405_allow_names_every_method_of_the_path(client: TestClient) -> None:
    response = client.delete("/both")
    assert response.status_code == 405
    assert response.json()["errorCode"] == "METHOD_NOT_ALLOWED"
    assert response.headers["allow"] == "GET, POST"
    templated = client.delete("/items/x")
    assert templated.status_code == 405
    assert templated.headers["allow"] == "GET, PUT"


def test_refused_write_is_storage_failing_503(client: TestClient) -> None:
    response = client.get("/disk-full")
    assert response.status_code == 503
    body = response.json()
    assert body["errorCode"] == "STORAGE_FAILING"
    assert body["hint"] == StorageFailing.default_hint
    assert "disk is full" in body["message"]


def test_other_database_errors_and_crashes_are_opaque_500s(client: TestClient) -> None:
    for path in ("/sql-bug", "/boom"):
        response = client.get(path)
        assert response.status_code == 500
        assert response.json() == {
            "errorCode": "INTERNAL_ERROR",
            "message": "internal error",
            "hint": "see the daemon log",
        }
        assert "secret" not in response.text and "abc123" not in response.text
