"""The listing of everything under an fsspec root, for the scrub (:class:`~tiered.api.
RemoteStorageScanner`).

An object store lists a page of keys per request, so one listing of a bucket costs its pages one
after another. The root is therefore listed two levels deep by delimiter (topics, then their
partitions: one request each) and every prefix found there is then listed whole on its own
thread. Topics and partitions are what the layout (:mod:`tiered.rsm.layout`) fans out by, so a
bucket of many partitions lists as fast as its largest partition.
"""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from tiered.api import RemoteResourceNotFoundException, RemoteStoredObject
from tiered.rsm import layout

__all__ = ["PREFIX_DEPTH", "scan_objects"]

PREFIX_DEPTH = 2
"""How many levels below the root are listed by delimiter before each prefix is listed whole:
``{topic}-{topic_id}/`` then ``{partition}/``."""

R = TypeVar("R")
# ``call(what, path, operation)``: the plugin's remote call, retried while transient, its error
# raised as RemoteStorageException (RemoteResourceNotFoundException for a missing path).
RemoteCall = Callable[[str, str, Callable[[], Any]], Any]


def scan_objects(
    fs: Any, root: str, call: RemoteCall, parallelism: int
) -> Iterator[list[RemoteStoredObject]]:
    """Every object under ``root`` (an fsspec path of ``fs``, without a trailing ``/``), in
    batches: the objects found while descending, then those of each prefix listed whole."""
    if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
        raise ValueError(f"parallelism must be an int >= 1, got {parallelism!r}")
    with ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix="rsm-scan") as pool:
        prefixes = [root]
        for _ in range(PREFIX_DEPTH):
            found: list[RemoteStoredObject] = []
            below: list[str] = []
            for entries in pool.map(lambda p: _list_level(fs, p, call), prefixes):
                for entry in entries:
                    if entry.get("type") == "directory":
                        below.append(str(entry["name"]).rstrip("/"))
                    else:
                        found.append(_stored_object(root, str(entry["name"]), entry))
            if found:
                yield found
            prefixes = below
        for batch in pool.map(lambda p: _list_whole(fs, root, p, call), prefixes):
            if batch:
                yield batch


def _list_level(fs: Any, path: str, call: RemoteCall) -> list[dict[str, Any]]:
    try:
        entries: list[dict[str, Any]] = call(
            f"listing of {path}", path, lambda: fs.ls(path, detail=True)
        )
    except RemoteResourceNotFoundException:
        return []  # removed since its parent was listed, or an empty root
    return entries


def _list_whole(fs: Any, root: str, path: str, call: RemoteCall) -> list[RemoteStoredObject]:
    try:
        found: dict[str, dict[str, Any]] = call(
            f"listing of {path}", path, lambda: fs.find(path, detail=True)
        )
    except RemoteResourceNotFoundException:
        return []
    return [
        _stored_object(root, name, info)
        for name, info in found.items()
        if info.get("type") != "directory"
    ]


def _stored_object(root: str, path: str, info: dict[str, Any]) -> RemoteStoredObject:
    key = _relative(root, path)
    parsed = layout.parse_object_key(key)
    topic, topic_id, segment = parsed if parsed is not None else (None, None, None)
    return RemoteStoredObject(
        handle=key,
        size_bytes=int(info.get("size") or 0),
        last_modified_ms=_modified_ms(info),
        topic=topic,
        topic_id=topic_id,
        segment=segment,
    )


def _relative(root: str, path: str) -> str:
    path = path.lstrip("/") if not root else path
    prefix = root + "/" if root else ""
    return path[len(prefix) :] if path.startswith(prefix) else path


def _modified_ms(info: dict[str, Any]) -> int:
    """When the object was last written: S3's ``LastModified``, a local file's ``mtime``, a
    ``memory://`` file's ``created``; now when the filesystem does not say (such an object is
    never old enough for the scrub to take it for an orphan)."""
    for field in ("LastModified", "mtime", "created"):
        value = info.get(field)
        if isinstance(value, datetime.datetime):
            return int(value.timestamp() * 1000)
        if isinstance(value, int | float):
            return int(value * 1000)
    return int(time.time() * 1000)
