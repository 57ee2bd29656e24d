"""A separate process writing one partition's remote log metadata, for the concurrency tests.

Usage: ``python -m tests.support.rlmm_worker MODE CONFIG_JSON`` where MODE is

- ``lead``: claim leadership of the partition, then add and finish segments until fenced or
  ``count`` are written;
- ``churn``: without leading, move each given segment through every later state, tolerating what
  the other churner already did.

Prints one JSON line: what was acknowledged and how it ended.
"""

from __future__ import annotations

import json
import sys
import time
import uuid

from tiered import rlmm
from tiered.api import (
    RemoteLogSegmentId,
    RemoteLogSegmentMetadata,
    RemoteLogSegmentMetadataUpdate,
    RemoteLogSegmentState,
    RemoteResourceNotFoundException,
    TopicIdPartition,
)


def _tp(spec: dict[str, object]) -> TopicIdPartition:
    return TopicIdPartition(
        uuid.UUID(str(spec["topic_id"])), str(spec["topic"]), int(str(spec["partition"]))
    )


def lead(spec: dict[str, object]) -> dict[str, object]:
    tp = _tp(spec)
    manager = rlmm.create({**spec["config"], "broker.id": str(spec["broker_id"])})  # type: ignore[dict-item]
    manager.on_partition_leadership_changes({tp}, set())
    acked: list[str] = []
    error = ""
    start = int(str(spec["first_offset"]))
    try:
        for i in range(int(str(spec["count"]))):
            offset = start + i * 10
            metadata = RemoteLogSegmentMetadata(
                RemoteLogSegmentId.generate_new(tp),
                offset,
                offset + 9,
                -1,
                int(str(spec["broker_id"])),
                int(time.time() * 1000),
                100,
                {0: offset},
            )
            manager.add_remote_log_segment_metadata(metadata)
            manager.update_remote_log_segment_metadata(
                RemoteLogSegmentMetadataUpdate(
                    metadata.remote_log_segment_id,
                    int(time.time() * 1000),
                    None,
                    RemoteLogSegmentState.COPY_SEGMENT_FINISHED,
                    int(str(spec["broker_id"])),
                )
            )
            acked.append(metadata.remote_log_segment_id.id.hex)
    except rlmm.RemoteLogMetadataFencedException as e:
        error = f"fenced: {e}"
    finally:
        manager.close()
    return {"acked": acked, "error": error}


def churn(spec: dict[str, object]) -> dict[str, object]:
    tp = _tp(spec)
    manager = rlmm.create(dict(spec["config"]))  # type: ignore[call-overload]
    applied = not_found = 0
    try:
        for hex_id in spec["segments"]:  # type: ignore[attr-defined]
            segment_id = RemoteLogSegmentId(tp, uuid.UUID(hex=hex_id))
            for state in list(RemoteLogSegmentState)[1:]:
                try:
                    manager.update_remote_log_segment_metadata(
                        RemoteLogSegmentMetadataUpdate(segment_id, 1, None, state, 0)
                    )
                    applied += 1
                except RemoteResourceNotFoundException:
                    not_found += 1  # the other churner already finished it
                    break
    finally:
        manager.close()
    return {"applied": applied, "not_found": not_found}


def main() -> None:
    mode, raw = sys.argv[1], sys.argv[2]
    spec = json.loads(raw)
    result = lead(spec) if mode == "lead" else churn(spec)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
