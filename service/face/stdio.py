"""The face on stdio: newline-delimited JSON-RPC, as agent CLIs spawn MCP servers.

Each request runs in its own task (a pending ``wait_for_change`` must not stall the
connection); at most ``MAX_IN_FLIGHT`` run at once, and one more is answered with an error
at once (the reader never stops, so ``notifications/cancelled`` still gets through). Everything written goes through one
bounded queue: answers wait for room, notifications are dropped (and counted) when it is
full. A line longer than ``MAX_MESSAGE_BYTES`` is answered with a parse error and skipped.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
from typing import IO, Any, Final

from service.face import protocol as p
from service.face.handlers import Face
from service.face.session import Session, progress_reporter
from service.jsonencode import json_bytes

MAX_MESSAGE_BYTES: Final = 1024 * 1024
MAX_IN_FLIGHT: Final = 32
MAX_QUEUED: Final = 1024
EOF_GRACE_S: Final = 5.0


class StdioServer:
    def __init__(self, face: Face, *, channel: bool = False, max_queued: int = MAX_QUEUED) -> None:
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue(max_queued)
        self.session = Session(face, self._try_send, channel=channel)
        self.tasks: dict[Any, asyncio.Task[None]] = {}
        self.max_in_flight = MAX_IN_FLIGHT

    def _try_send(self, message: dict[str, Any]) -> bool:
        try:
            self.queue.put_nowait(json_bytes(message) + b"\n")
        except asyncio.QueueFull:
            return False
        return True

    async def _send(self, message: dict[str, Any]) -> None:
        await self.queue.put(json_bytes(message) + b"\n")

    async def _writer(self, out: IO[bytes]) -> None:
        loop = asyncio.get_running_loop()
        fd = out.fileno()
        while (data := await self.queue.get()) is not None:
            view = memoryview(data)
            while view:
                written = await loop.run_in_executor(None, os.write, fd, view)
                view = view[written:]

    async def serve(self, stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None) -> None:
        stdin = stdin or sys.stdin.buffer
        stdout = stdout or sys.stdout.buffer
        loop = asyncio.get_running_loop()
        reader = asyncio.StreamReader(limit=MAX_MESSAGE_BYTES)
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), stdin)
        writer = asyncio.create_task(self._writer(stdout), name="face-stdout")
        if self.session.channel:
            await self.session.start_following()
        try:
            await self._read_loop(reader)
            # stdin closed: answer what is in flight (a piped script reads its answers), but
            # a pending wait is not worth more than EOF_GRACE_S.
            if self.tasks:
                await asyncio.wait(list(self.tasks.values()), timeout=EOF_GRACE_S)
        finally:
            for task in list(self.tasks.values()):
                task.cancel()
            await self.session.close()
            await self.queue.put(None)
            with contextlib.suppress(OSError):
                await writer

    async def _read_loop(self, reader: asyncio.StreamReader) -> None:
        while True:
            try:
                line = await reader.readuntil(b"\n")
            except asyncio.IncompleteReadError as exc:
                line = exc.partial
                if not line.strip():
                    return
            except asyncio.LimitOverrunError:
                await self._skip_long_line(reader)
                err = p.RpcError(p.PARSE_ERROR, f"message larger than {MAX_MESSAGE_BYTES} bytes")
                await self._send(p.error(None, err))
                continue
            if line.strip():
                await self._dispatch(line)

    @staticmethod
    async def _skip_long_line(reader: asyncio.StreamReader) -> None:
        while True:
            try:
                await reader.readuntil(b"\n")
                return
            except asyncio.LimitOverrunError as exc:
                await reader.readexactly(exc.consumed)
            except asyncio.IncompleteReadError:
                return

    async def _dispatch(self, line: bytes) -> None:
        try:
            msg = p.decode(line)
        except p.RpcError as exc:
            await self._send(p.error(p.request_id_of(line), exc))
            return
        if msg.is_response:
            return
        if msg.method == "notifications/cancelled":
            self._cancel(msg.params.get("requestId"))
            return
        if not msg.has_id:
            return
        if msg.id in self.tasks:
            err = p.RpcError(p.INVALID_REQUEST, "a request with this id is still in flight")
            await self._send(p.error(msg.id, err))
            return
        if len(self.tasks) >= self.max_in_flight:
            err = p.RpcError(
                p.INTERNAL_ERROR,
                f"{len(self.tasks)} requests in flight (limit {self.max_in_flight}); "
                "wait for an answer or cancel one",
            )
            await self._send(p.error(msg.id, err))
            return
        task = asyncio.create_task(self._run(msg), name=f"face-request-{msg.id}")
        self.tasks[msg.id] = task

    def _cancel(self, request_id: Any) -> None:
        closed = self.session.cancel_listen(request_id)
        if closed is not None:
            self._try_send(closed)
            return
        task = self.tasks.pop(request_id, None)  # its slot is free at once
        if task is not None:
            task.cancel()

    async def _run(self, msg: p.Incoming) -> None:
        token = p.progress_token(msg.params)
        progress = progress_reporter(token, self._try_send) if token is not None else None
        try:
            answer = await self.session.handle(msg, progress)
            if answer is not None:
                await self._send(answer)
        except asyncio.CancelledError:
            pass
        finally:
            if self.tasks.get(msg.id) is asyncio.current_task():
                del self.tasks[msg.id]
