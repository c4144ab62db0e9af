"""The lab's OAuth gateway over plain HTTP (no CLI)."""

from __future__ import annotations

from tests.auth.conftest import AuthHarness

DEVICE = "urn:ietf:params:oauth:grant-type:device_code"


def test_challenge_and_metadata(auth: AuthHarness) -> None:
    lab = auth.lab()
    http = lab.http
    denied = http.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "server/discover"})
    assert denied.status_code == 401
    expected = f'Bearer resource_metadata="{lab.base_url}/.well-known/oauth-protected-resource/mcp"'
    assert denied.headers["www-authenticate"] == expected
    bad = http.post("/mcp", headers={"Authorization": "Bearer at-nope"}, json={})
    assert 'error="invalid_token"' in bad.headers["www-authenticate"]
    for path in (
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ):
        prm = http.get(path).json()
        assert prm == {
            "resource": lab.url,
            "authorization_servers": [lab.base_url],
            "bearer_methods_supported": ["header"],
        }
    meta = http.get("/.well-known/oauth-authorization-server").json()
    assert meta["issuer"] == lab.base_url
    assert meta["token_endpoint"] == f"{lab.base_url}/token"


def test_token_endpoint_rules(auth: AuthHarness) -> None:
    lab = auth.lab()
    http = lab.http
    reg = http.post("/register", json={"client_name": "t", "grant_types": [DEVICE]})
    assert reg.status_code == 201
    client_id = reg.json()["client_id"]
    unknown = http.post("/device_authorization", data={"client_id": "nope"})
    assert (unknown.status_code, unknown.json()["error"]) == (401, "invalid_client")
    device = http.post("/device_authorization", data={"client_id": client_id}).json()
    assert device["expires_in"] == 900 and device["interval"] == 0
    form = {"grant_type": DEVICE, "device_code": device["device_code"], "client_id": client_id}
    assert http.post("/token", data=form).json()["error"] == "authorization_pending"
    auth.oauth(lab, "slow-down", {"count": 1})
    assert http.post("/token", data=form).json()["error"] == "slow_down"
    auth.oauth(lab, "approve", {"user_code": device["user_code"]})
    tokens = http.post("/token", data=form).json()
    assert tokens["access_token"].startswith("at-") and tokens["refresh_token"].startswith("rt-")
    assert tokens["token_type"] == "Bearer" and tokens["expires_in"] == 3600
    refresh = {"grant_type": "refresh_token", "refresh_token": tokens["refresh_token"]}
    rotated = http.post("/token", data=refresh).json()
    assert rotated["refresh_token"] != tokens["refresh_token"]
    ok = http.post("/mcp", headers={"Authorization": f"Bearer {rotated['access_token']}"}, json={})
    assert ok.status_code != 401
    reused = http.post("/token", data=refresh).json()
    assert reused["error"] == "invalid_grant"
    newest = {"grant_type": "refresh_token", "refresh_token": rotated["refresh_token"]}
    assert http.post("/token", data=newest).json()["error"] == "invalid_grant"
    gone = http.post(
        "/mcp", headers={"Authorization": f"Bearer {rotated['access_token']}"}, json={}
    )
    assert gone.status_code == 401
    assert http.post("/token", data={"grant_type": "password"}).json()["error"] == (
        "unsupported_grant_type"
    )
    auth.oauth(lab, "token-unavailable", {"enabled": True})
    down = http.post("/token", data=newest)
    assert (down.status_code, down.json()["error"]) == (503, "temporarily_unavailable")


def test_denied_and_unknown_codes(auth: AuthHarness) -> None:
    lab = auth.lab()
    assert (
        lab.control("POST", "/lab/oauth/approve", json={"user_code": "NOPE-0000"}).status_code
        == 404
    )
    page = lab.http.post("/activate", data={"user_code": "NOPE-0000", "action": "approve"})
    assert page.status_code == 404


def test_gateway_is_off_by_default(lab_server_factory) -> None:  # type: ignore[no-untyped-def]
    lab = lab_server_factory()
    assert lab.http.get("/.well-known/oauth-authorization-server").status_code == 404
    assert lab.http.post("/lab/oauth/state").status_code in (404, 405)
