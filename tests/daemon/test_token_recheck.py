"""A link's token re-check (spec gap 14: a listen is authorised once, so a refreshed token
means a re-listen) wakes the link only when a token could have changed."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from service.daemon.config import Settings
from service.daemon.link import ServerLink
from service.daemon.linkstatus import LinkState
from service.daemon.supervisor import Supervisor
from service.daemon.wiring import supervisor_collaborators
from tests.api.fakes import migrated_store


async def _no_token(_url: str) -> str | None:
    return None


def test_a_link_is_woken_for_its_token_only_when_a_token_could_have_changed(
    tmp_path: Path,
) -> None:
    async def run() -> None:
        store = migrated_store(tmp_path / "mcpsub.db")
        settings = Settings(state_dir=tmp_path, replica_id="test")
        supervisor = Supervisor(store, settings, *supervisor_collaborators(store, settings))
        link = ServerLink(
            1,
            "http://127.0.0.1:1/mcp",
            store,
            settings,
            supervisor._new_transport,
            asyncio.Semaphore(1),
            {},
            token_provider=_no_token,
        )
        link.state = LinkState.OPEN
        due = link._token_checked + settings.token_check_s + 1

        link.tick(due, tokens_available=False)  # no store, no token: nothing can change
        assert not link._changed.is_set()

        link.tick(due, tokens_available=True)  # a store appeared (a login): look
        assert link._changed.is_set()

        link._changed.clear()
        link._session_token = "was-logged-in"
        link.tick(due, tokens_available=False)  # the store is gone (a logout): look too
        assert link._changed.is_set()

        link._changed.clear()
        link.tick(link._token_checked + 1, tokens_available=True)  # not due yet
        assert not link._changed.is_set()
        await store.close()

    asyncio.run(run())


def test_links_of_one_origin_share_one_token_lookup_until_the_store_changes(
    tmp_path: Path,
) -> None:
    """A token store on disk: 1,000 links re-checking every minute opened it 1,000 times a
    minute. Links of one origin now share one look-up while the file is unchanged; a login or
    refresh (any write) is seen at the next re-check, as before."""
    from service.auth.resolve import resolve_token
    from service.auth.store import TokenStore, now_ms, store_signature
    from service.daemon.tokens import SharedTokens

    path = tmp_path / "tokens.db"
    opened: list[str] = []

    async def provider(url: str) -> str | None:
        opened.append(url)
        token, _source = await resolve_token(url, 5.0, store_path=path)
        return token

    def save(token: str) -> None:
        with TokenStore.create(path) as store:
            store.save(
                "http://127.0.0.1:8000",
                client_id=None,
                access_token=token,
                refresh_token=None,
                expires_at=now_ms() + 3_600_000,
            )

    async def run() -> None:
        shared = SharedTokens(provider, lambda: store_signature(path), 60.0)
        urls = [f"http://127.0.0.1:8000/mcp?link={n}" for n in range(50)]
        assert await asyncio.gather(*(shared(u) for u in urls)) == [None] * 50
        assert opened == []  # no store: no token to find, the provider is not asked

        save("first")
        shared = SharedTokens(provider, lambda: store_signature(path), 60.0)
        assert await asyncio.gather(*(shared(u) for u in urls)) == ["first"] * 50
        assert await shared("http://127.0.0.1:9000/mcp") is None  # another origin: its own
        assert len(opened) == 2

        save("second")  # same length, same size: the change counter tells them apart
        assert await asyncio.gather(*(shared(u) for u in urls)) == ["second"] * 50
        assert len(opened) == 3

        expired = SharedTokens(provider, lambda: store_signature(path), 0.0)
        await expired(urls[0])
        await expired(urls[0])  # answers older than the interval are asked again
        assert len(opened) == 5

    asyncio.run(run())


def test_a_missing_store_is_looked_for_once_a_while_and_a_login_is_seen_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cold start of 10,000 links with no token store failed to open it once per link (and
    the provider checked again): 2.5 % of the start's event loop. The absence is now kept for
    ``NO_STORE_KEEP_S``; a store made after that is seen by the next look-up."""
    from service.auth.resolve import resolve_token
    from service.auth.store import TokenStore, now_ms, store_signature
    from service.daemon import tokens

    monkeypatch.setattr(tokens, "NO_STORE_KEEP_S", 0.2)
    path = tmp_path / "tokens.db"
    checks = 0

    def signature() -> object:
        nonlocal checks
        checks += 1
        return store_signature(path)

    async def provider(url: str) -> str | None:
        return (await resolve_token(url, 5.0, store_path=path))[0]

    async def run() -> None:
        shared = tokens.SharedTokens(provider, signature, 60.0)
        urls = [f"http://127.0.0.1:{8000 + n}/mcp" for n in range(1000)]  # 1,000 origins
        assert await asyncio.gather(*(shared(u) for u in urls)) == [None] * 1000
        assert checks == 1  # one look at the disk for every link of the start
        assert shared.lookups == 0

        with TokenStore.create(path) as store:  # a login
            store.save(
                "http://127.0.0.1:8000",
                client_id=None,
                access_token="logged-in",
                refresh_token=None,
                expires_at=now_ms() + 3_600_000,
            )
        await asyncio.sleep(0.25)
        assert await shared(urls[0]) == "logged-in"
        assert await shared(urls[1]) is None  # another origin: no row for it

        path.unlink()  # a logout: the store is gone, and so is its kept answer
        assert await shared(urls[0]) is None

    asyncio.run(run())


def test_a_failed_token_lookup_is_not_kept(tmp_path: Path) -> None:
    from service.auth.errors import AuthLoginRequired
    from service.daemon.tokens import SharedTokens

    calls = 0

    async def provider(url: str) -> str | None:
        nonlocal calls
        calls += 1
        raise AuthLoginRequired("expired", url=url)

    async def run() -> None:
        shared = SharedTokens(provider, lambda: ("a store",), 60.0)
        for _ in range(2):
            results = await asyncio.gather(
                shared("http://127.0.0.1:1/a"),
                shared("http://127.0.0.1:1/b"),
                return_exceptions=True,
            )
            assert all(isinstance(r, AuthLoginRequired) for r in results), results
        assert calls == 2  # one look-up per round for both links, none kept

    asyncio.run(run())
