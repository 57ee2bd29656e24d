"""A moto S3 server in a process of its own, its bucket seeded before it serves: for
``bench/bulk_delete.py``, which needs hundreds of thousands of objects in place in seconds.

Writing them over HTTP takes about 19 minutes for 400,000 objects on a 2-CPU machine; writing them
straight into moto's in-memory backend, in the process that then serves them, takes seconds. The
timed phases still reach the objects over HTTP, in another process, as they would a real store.

The process reads the keys from ``--keys-file`` (one a line, each a key of ``--bucket``), stores
``--object-bytes`` bytes under each, serves moto's S3 API on ``127.0.0.1:--port`` (0: a free port)
and prints one line ``ready PORT OBJECTS SEED_SECONDS``. It stops when its standard input closes,
so it never outlives the benchmark that started it (a killed parent closes the pipe too).

Usage: ``python bench/moto_seeded.py --bucket B --keys-file F [--port 0] [--object-bytes 32]``.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ACCOUNT_ID = "123456789012"  # moto's default account: what any credentials map to
REGION = "us-east-1"


def seed(bucket: str, keys_file: Path, object_bytes: int) -> int:
    """Creates ``bucket`` in moto's backend of this process and one object per key; returns how
    many."""
    from moto.s3.models import s3_backends

    backend = s3_backends[ACCOUNT_ID]["aws"]
    backend.create_bucket(bucket, REGION)
    value = b"x" * object_bytes
    count = 0
    with keys_file.open(encoding="utf-8") as lines:
        for line in lines:
            key = line.rstrip("\n")
            if key:
                backend.put_object(bucket, key, value)
                count += 1
    return count


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--keys-file", required=True, type=Path)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--object-bytes", type=int, default=32)
    args = parser.parse_args(argv)
    from moto.server import ThreadedMotoServer

    started = time.perf_counter()
    objects = seed(args.bucket, args.keys_file, args.object_bytes)
    seed_s = time.perf_counter() - started
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=args.port, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    print(f"ready {port} {objects} {seed_s:.3f}", flush=True)
    try:
        sys.stdin.read()  # until the parent closes the pipe or dies
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
