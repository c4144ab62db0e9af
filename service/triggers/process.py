"""One attempt of a trigger: the program started with no shell, in its own process group,
fed the change on stdin, its output kept to a bounded tail, ended at its timeout.

The timeout ends the whole process group (SIGTERM, then SIGKILL after a grace), so a
program's children do not outlive the attempt. A program that exits while something it
started still holds its stdout or stderr open is given :data:`LINGER_S`; then that group is
ended the same way, so an attempt always ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

LINGER_S = 2.0
"""After the program exited: how long what it left behind may keep its output open."""
READ_CHUNK = 65536


@dataclass(frozen=True, slots=True)
class Finished:
    """How an attempt ended. ``exit_code`` None: ended by ``signal`` (or never started)."""

    started_at: float
    ended_at: float
    exit_code: int | None
    signal: str | None
    timed_out: bool
    error: str | None
    stdout: bytes
    stderr: bytes
    stdout_bytes: int
    stderr_bytes: int

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and self.error is None

    @property
    def duration_ms(self) -> float:
        return round((self.ended_at - self.started_at) * 1000, 1)

    def describe(self) -> str:
        """One line for ``last_error``: why the attempt failed."""
        if self.error:
            return self.error
        if self.timed_out:
            return f"TIMEOUT: ended after its timeout ({self.signal or 'exit'})"
        if self.signal:
            return f"ended by {self.signal}"
        return f"exit status {self.exit_code}"


class Tail:
    """The last ``limit`` bytes of a stream, and how many bytes it carried in all."""

    def __init__(self, limit: int) -> None:
        self.limit = max(0, limit)
        self.buffer = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self.buffer += chunk
        if len(self.buffer) > 2 * self.limit + READ_CHUNK:
            del self.buffer[: len(self.buffer) - self.limit]

    def value(self) -> bytes:
        return bytes(self.buffer[-self.limit :]) if self.limit else b""


async def _drain(stream: asyncio.StreamReader | None, tail: Tail) -> None:
    if stream is None:
        return
    while chunk := await stream.read(READ_CHUNK):
        tail.add(chunk)


async def _feed(stdin: asyncio.StreamWriter | None, data: bytes) -> None:
    """Write the change and close stdin; a program that does not read it is not a failure."""
    if stdin is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        stdin.write(data)
        await stdin.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError, OSError):
        stdin.close()
        await stdin.wait_closed()


def _signal_group(pgid: int, signum: int) -> bool:
    """Send ``signum`` to the group; False when nothing of it is left."""
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        return False
    except PermissionError:  # a member became another user's (setuid): not ours to end
        return False
    return True


async def end_group(proc: asyncio.subprocess.Process, grace_s: float) -> str | None:
    """SIGTERM to the process group, SIGKILL after ``grace_s``; the name of the signal that
    ended the leader (None when it was gone already)."""
    pgid = proc.pid
    used = None
    if _signal_group(pgid, signal.SIGTERM):
        used = "SIGTERM"
    if proc.returncode is None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(grace_s):
                await proc.wait()
    if _signal_group(pgid, signal.SIGKILL) and proc.returncode is None:
        used = "SIGKILL"
    await proc.wait()
    return used


def signal_name(returncode: int) -> str:
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


async def run_program(
    argv: Sequence[str],
    *,
    stdin: bytes,
    env: Mapping[str, str],
    cwd: str | None,
    timeout_s: float,
    grace_s: float,
    tail_bytes: int,
) -> Finished:
    """Run ``argv`` once (no shell: ``argv[0]`` is executed with ``argv[1:]`` as they are)."""
    started = time.time()
    out, err = Tail(tail_bytes), Tail(tail_bytes)
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,  # its own process group: the timeout ends all of it
        )
    except OSError as exc:
        reason = "PROGRAM_NOT_FOUND" if isinstance(exc, FileNotFoundError) else "SPAWN_FAILED"
        return Finished(started, time.time(), None, None, False, f"{reason}: {exc}", b"", b"", 0, 0)
    io = [
        asyncio.ensure_future(_feed(proc.stdin, stdin)),
        asyncio.ensure_future(_drain(proc.stdout, out)),
        asyncio.ensure_future(_drain(proc.stderr, err)),
    ]
    timed_out = False
    try:
        try:
            async with asyncio.timeout(timeout_s):
                await proc.wait()
        except TimeoutError:
            timed_out = True
            await end_group(proc, grace_s)
        # What it left behind may hold the pipes open: a bounded while, then end the group.
        done, _pending = await asyncio.wait(io, timeout=LINGER_S)
        if len(done) < len(io):
            await end_group(proc, grace_s)
            await asyncio.wait(io, timeout=LINGER_S)
    except asyncio.CancelledError:
        # The daemon stops, or the trigger was removed: nothing of the run may outlive it.
        await asyncio.shield(end_group(proc, min(grace_s, 2.0)))
        raise
    finally:
        for task in io:
            task.cancel()
        await asyncio.gather(*io, return_exceptions=True)
    code = proc.returncode
    assert code is not None
    if code < 0:
        exit_code, sig = None, signal_name(code)
    else:
        exit_code, sig = code, None
    return Finished(
        started_at=started,
        ended_at=time.time(),
        exit_code=exit_code,
        signal=sig,
        timed_out=timed_out,
        error=None,
        stdout=out.value(),
        stderr=err.value(),
        stdout_bytes=out.total,
        stderr_bytes=err.total,
    )
