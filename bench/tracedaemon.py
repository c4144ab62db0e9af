"""``mcpsubd`` under tracemalloc, for ``bench.daemonscale --heap``: where a link's bytes go.

Run as ``python -m bench.tracedaemon [mcpsubd arguments]``: tracing starts before the daemon's
first import (so every allocation has its traceback, up to :data:`FRAMES` frames), then
``mcpsubd`` runs as usual. On SIGUSR2 the current snapshot is dumped to the path in
``MCPSUB_BENCH_HEAP_DUMP`` (written to a temporary name, then renamed: a reader never sees
half a file). Tracing costs the daemon 2-3x its CPU and a third more memory, so a traced
run's times and RSS are not figures; only the snapshots' differences between link counts are.
"""

from __future__ import annotations

import os
import signal
import sys
import tracemalloc
from types import FrameType

FRAMES = 8
DUMP_ENV = "MCPSUB_BENCH_HEAP_DUMP"


def _dump(_sig: int, _frame: FrameType | None) -> None:
    path = os.environ.get(DUMP_ENV)
    if not path:
        return
    snapshot = tracemalloc.take_snapshot()
    snapshot.dump(path + ".part")
    os.replace(path + ".part", path)


def main() -> None:
    tracemalloc.start(FRAMES)
    signal.signal(signal.SIGUSR2, _dump)
    sys.argv = ["mcpsubd", *sys.argv[1:]]
    from mcpsub import mcpsubd

    sys.exit(mcpsubd())


if __name__ == "__main__":
    main()
