"""A moto S3 server in a process of its own, its bucket seeded before it serves: for
``bench/bulk_delete.py``, which needs hundreds of thousands of objects in place in seconds.

Writing them over HTTP takes about 19 minutes for 400,000 objects on a 2-CPU machine; writing them
straight into moto's in-memory backend, in the process that then serves them, takes seconds. The
timed phases still reach the objects over HTTP, in another process, as they would a real store.

The process reads the keys from ``--keys-file`` (one a line, each a key of ``--bucket``), stores
``--object-bytes`` bytes under each, serves moto's S3 API on ``127.0.0.1:--port`` (0: a free port)
and prints one line ``ready PORT OBJECTS SEED_SECONDS``. It stops when its standard input closes,
so it never outlives the benchmark that started it (a killed parent closes the pipe too).

``--index-listings`` answers ListObjects from a sorted index of the bucket's keys (a bisection to
the prefix, then its keys only) instead of moto's scan of every key of the bucket per request: on
moto a page of a 400,000-object bucket costs the whole bucket, on S3 it costs the page. It also
writes ListObjectsV2's XML directly instead of through moto's model-driven serializer (about 1 ms
of CPU a key: a page of 1,000 keys took a second to answer). The index
is rebuilt whenever the bucket's key count changed, so it suits a bucket the benchmark only reads
(or only deletes from): one that gains and loses as many keys between two listings is listed from
a stale index.

Usage: ``python bench/moto_seeded.py --bucket B --keys-file F [--port 0] [--object-bytes 32]
[--index-listings]``.
"""

from __future__ import annotations

import argparse
import bisect
import logging
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

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


def index_listings() -> None:
    """Makes moto's ``S3Backend.list_objects`` (which ``list_objects_v2`` calls too) find a
    prefix's keys by bisecting a sorted index of the bucket's keys; what it answers is moto's
    (same delimiter folding, delete markers left out, markers and truncation by moto's own
    helpers)."""
    from moto.s3.models import FakeDeleteMarker, S3Backend

    original = S3Backend.list_objects
    indexes: dict[str, tuple[int, list[str]]] = {}
    lock = threading.Lock()

    def names_of(bucket: Any) -> list[str]:
        with lock:
            count = len(bucket.keys)
            index = indexes.get(bucket.name)
            if index is None or index[0] != count:
                index = indexes[bucket.name] = (count, sorted(bucket.keys.keys()))
            return index[1]

    def list_objects(
        self: Any,
        bucket: Any,
        prefix: str | None,
        delimiter: str | None,
        marker: str | None,
        max_keys: int | None,
    ) -> Any:
        if type(bucket).__name__ == "FakeTableStorageBucket":
            return original(self, bucket, prefix, delimiter, marker, max_keys)
        prefix = prefix or ""
        names = names_of(bucket)
        keys: list[Any] = []
        folders: set[str] = set()
        for i in range(bisect.bisect_left(names, prefix), len(names)):
            name = names[i]
            if not name.startswith(prefix):
                break
            rest = name[len(prefix) :]
            if delimiter and delimiter in rest:
                folders.add(f"{prefix}{rest.split(delimiter)[0]}{delimiter}")
                continue
            key = bucket.keys.get(name)
            if key is not None and not isinstance(key, FakeDeleteMarker):
                keys.append(key)
        key_results: Any = keys  # sorted: the index is
        if marker:
            limit = self._pagination_tokens.get(marker) or marker
            key_results = self._get_results_from_token(key_results, limit)
        is_truncated, next_marker = False, None
        if max_keys is not None:
            key_results, is_truncated, next_marker = self._truncate_result(key_results, max_keys)
        return key_results, sorted(folders), is_truncated, next_marker

    S3Backend.list_objects = list_objects  # type: ignore[method-assign]
    _write_list_objects_v2_directly()


def _write_list_objects_v2_directly() -> None:
    """ListObjectsV2's answer written as S3 writes it from the result moto's handler built, the
    other actions' by moto's serializer."""
    from xml.sax.saxutils import escape

    from moto.s3.responses import S3Response

    original = S3Response.serialized

    def text(name: str, value: object) -> str:
        if isinstance(value, bool):
            value = "true" if value else "false"
        return f"<{name}>{escape(str(value))}</{name}>"

    def serialized(self: Any, action_result: Any) -> Any:
        result = action_result.result
        if self.data.get("Action") != "ListObjectsV2" or not isinstance(result, dict):
            return original(self, action_result)
        parts = ['<?xml version="1.0" encoding="UTF-8"?>\n']
        parts.append('<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">')
        for name in ("Name", "Prefix", "MaxKeys", "KeyCount", "IsTruncated"):
            parts.append(text(name, result[name]))
        for item in result["Contents"]:
            parts.append("<Contents>")
            for name in ("Key", "LastModified", "ETag", "Size", "StorageClass"):
                parts.append(text(name, item[name]))
            parts.extend(text("ChecksumAlgorithm", a) for a in item.get("ChecksumAlgorithm", ()))
            parts.append("</Contents>")
        for name in ("Delimiter", "EncodingType", "NextContinuationToken", "StartAfter"):
            if name in result:
                parts.append(text(name, result[name]))
        for common in result.get("CommonPrefixes", ()):
            parts.append(f"<CommonPrefixes>{text('Prefix', common['Prefix'])}</CommonPrefixes>")
        parts.append("</ListBucketResult>")
        headers = {"Content-Type": "application/xml", **self.response_headers}
        return 200, headers, "".join(parts)

    S3Response.serialized = serialized  # type: ignore[method-assign]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--keys-file", required=True, type=Path)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--object-bytes", type=int, default=32)
    parser.add_argument("--index-listings", action="store_true")
    args = parser.parse_args(argv)
    if args.index_listings:
        index_listings()
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
