"""A RemoteStorageManager for broker-process tests, loaded through
``remote.log.storage.manager.class.name=tests.support.scripted_rsm.ScriptedRsm``. It delegates to
the fsspec RSM and misbehaves on request:

- ``test.bloat.topics``: copies of these topics return 200 bytes of custom metadata (KIP-917);
- ``test.hang.topics`` with ``test.marker.dir``: copies of these topics upload everything, write
  ``{marker.dir}/{segment id}.uploaded`` and then never return, so that a test can kill the broker
  between the upload and COPY_SEGMENT_FINISHED;
- ``test.gate.topics`` with ``test.gate.dir``: copies and remote fetches of these topics write
  ``{gate.dir}/copy-started`` or ``fetch-started`` and wait until the test creates
  ``{gate.dir}/open``, so that a test can act while they are in flight (``test.gate.calls``:
  ``copy``, ``fetch`` or both, the default).
"""

from __future__ import annotations

import threading
import time
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
        self.gated = _topics(config, "test.gate.topics")
        self.gated_calls = _topics(config, "test.gate.calls") or {"copy", "fetch"}
        self.gate_dir = Path(str(config.get("test.gate.dir", ".")))

    def _wait_at_gate(self, topic: str, what: str) -> None:
        if topic not in self.gated or what not in self.gated_calls:
            return
        (self.gate_dir / f"{what}-started").write_text(what)
        deadline = time.monotonic() + 60
        while not (self.gate_dir / "open").exists() and time.monotonic() < deadline:
            time.sleep(0.01)  # simulated slowness inside the plugin, not test synchronisation

    def copy_log_segment_data(
        self, metadata: RemoteLogSegmentMetadata, segment_data: LogSegmentData
    ) -> CustomMetadata | None:
        topic = metadata.topic_id_partition.topic
        self._wait_at_gate(topic, "copy")
        custom = self.inner.copy_log_segment_data(metadata, segment_data)
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
        self._wait_at_gate(metadata.topic_id_partition.topic, "fetch")
        return self.inner.fetch_log_segment(metadata, start_position, end_position)

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> bytes:
        return self.inner.fetch_index(metadata, index_type)

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        self.inner.delete_log_segment_data(metadata)

    def object_keys(self, tp: TopicIdPartition) -> list[str]:
        return self.inner.object_keys(tp)
