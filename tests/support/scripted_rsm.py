"""A RemoteStorageManager for broker-process tests, loaded through
``remote.log.storage.manager.class.name=tests.support.scripted_rsm.ScriptedRsm``. It delegates to
the fsspec RSM and misbehaves on request:

- ``test.bloat.topics``: copies of these topics return 200 bytes of custom metadata (KIP-917);
- ``test.hang.topics`` with ``test.marker.dir``: copies of these topics upload everything, write
  ``{marker.dir}/{segment id}.uploaded`` and then never return, so that a test can kill the broker
  between the upload and COPY_SEGMENT_FINISHED.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from pathlib import Path

from tiered.api import (
    CustomMetadata,
    IndexType,
    LogSegmentData,
    RemoteLogSegmentMetadata,
    RemoteStorageManager,
    TopicIdPartition,
)
from tiered.rsm.fsspec_rsm import create_from_config


def _topics(config: Mapping[str, object], key: str) -> set[str]:
    return {t.strip() for t in str(config.get(key, "")).split(",") if t.strip()}


class ScriptedRsm(RemoteStorageManager):
    def __init__(self, config: Mapping[str, object]) -> None:
        self.inner = create_from_config(config)
        self.bloat = _topics(config, "test.bloat.topics")
        self.hang = _topics(config, "test.hang.topics")
        self.marker_dir = Path(str(config.get("test.marker.dir", ".")))

    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, segment_data: LogSegmentData
    ) -> CustomMetadata | None:
        custom = self.inner.copy_log_segment_data(metadata, segment_data)
        topic = metadata.topic_id_partition.topic
        if topic in self.hang:
            marker = self.marker_dir / f"{metadata.remote_log_segment_id.id}.uploaded"
            marker.write_text("uploaded")
            threading.Event().wait()  # until the process is killed
        if topic in self.bloat:
            return CustomMetadata(b"x" * 200)
        return custom

    def fetch_log_segment(
        self,
        metadata: RemoteLogSegmentMetadata,
        start_position: int,
        end_position: int | None = None,
    ) -> bytes:
        return self.inner.fetch_log_segment(metadata, start_position, end_position)

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        return self.inner.fetch_index(metadata, index_type)

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        self.inner.delete_log_segment_data(metadata)

    def object_keys(self, tp: TopicIdPartition) -> list[str]:
        return self.inner.object_keys(tp)
