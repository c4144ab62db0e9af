"""The links of one daemon keep their idle plain-http connections in one pool, shared per
origin: at a cold start of thousands of links on a few origins (a gateway's servers under
distinct paths), a link's read takes the connection another link's read left instead of
connecting (a connect was a third of such a start's CPU), and the pool is sized to the
descriptor limit so idle connections never crowd out the listen streams."""

from __future__ import annotations

import asyncio
from pathlib import Path

from service.daemon.config import Settings
from service.daemon.refresher import READS_PER_LINK
from service.daemon.supervisor import DEFAULT_IDLE, Supervisor, idle_budget
from service.daemon.wiring import supervisor_collaborators
from tests.api.fakes import migrated_store

OK_BODY = b'{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","contents":[]}}'


def test_the_links_of_one_origin_read_on_one_connection(tmp_path: Path) -> None:
    async def run() -> list[int]:
        connections: list[int] = []

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            connections.append(len(connections) + 1)
            try:
                while True:
                    head = await reader.readuntil(b"\r\n\r\n")
                    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
                    await reader.readexactly(length)
                    writer.write(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                        + str(len(OK_BODY)).encode() + b"\r\n\r\n" + OK_BODY
                    )  # fmt: skip
                    await writer.drain()
            except (asyncio.IncompleteReadError, ConnectionError):
                writer.close()

        server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        store = migrated_store(tmp_path / "mcpsub.db")
        settings = Settings(state_dir=tmp_path, replica_id="test")
        supervisor = Supervisor(store, settings, *supervisor_collaborators(store, settings))
        try:
            transports = [
                supervisor._new_transport(f"http://127.0.0.1:{port}/s/{n}/mcp") for n in range(3)
            ]
            for transport in transports:
                assert (await transport.post(b"{}", {})).body == OK_BODY
            for transport in transports:
                await transport.aclose()
            return connections
        finally:
            supervisor.idle_pool.close_all()
            server.close()
            await store.close()

    assert asyncio.run(run()) == [1]


def test_the_pool_is_an_eighth_of_the_descriptor_limit() -> None:
    assert idle_budget(20_000) == 2_500
    assert idle_budget(65_536) == 8_192
    assert idle_budget(8) == READS_PER_LINK  # a link's own reads still find theirs
    assert idle_budget(0) == DEFAULT_IDLE  # limit unknown
