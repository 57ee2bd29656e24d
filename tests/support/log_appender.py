"""A separate process appending to a ``broker.log.Log`` until it is killed, for the kill -9 test.

Usage: ``python -m tests.support.log_appender DIR SEGMENT_BYTES``. Record ``i`` has key
``k{i}``, value ``value-{i}``, timestamp ``1000 + i`` and leader epoch ``i // 50``, each in a
batch of its own. After each append returns (durable: ``flush_every_append`` is on) the offset is
printed and stdout flushed, so every printed offset is an acknowledged record.
"""

from __future__ import annotations

import sys
from pathlib import Path

from broker.log import Log, LogConfig
from tests.support.batches import batch


def main() -> None:
    directory, segment_bytes = Path(sys.argv[1]), int(sys.argv[2])
    log = Log.open(directory, LogConfig(segment_bytes=segment_bytes, index_interval_bytes=256))
    i = log.log_end_offset
    while True:
        info = log.append_batches(batch(f"k{i}".encode(), f"value-{i}".encode(), 1000 + i), i // 50)
        print(info.first_offset, flush=True)
        i += 1


if __name__ == "__main__":
    main()
