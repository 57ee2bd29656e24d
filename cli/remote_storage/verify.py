"""``tiered-remote-storage verify``: the metadata's promises checked against the bucket.

The active controller checks every segment the RLMM lists as COPY_SEGMENT_FINISHED (of
``--topic``, or of every topic): its data object and the indexes every copy writes exist, and
the data object has the segment's recorded size. Each segment found wanting is reported (topic,
partition, segment id, tiered epoch, offsets, and the objects: missing, or the data object of
another size); the exit status is 1 when there is any, 0 when there is none. It needs Describe
on the cluster (or on the topic, with ``--topic``).
"""

from __future__ import annotations

import argparse
from typing import Any

from cli.common import EXIT_ERROR, EXIT_OK, REMOTE_STORAGE_CALL_TIMEOUT_S, admin_client, print_json
from tiered.cluster.model import MissingRemoteSegment, RemoteStorageVerification

__all__ = ["add_arguments", "run", "verification_json", "verification_text"]

HELP = "report finished segments whose remote objects are missing (exit 1 if any)"
DESCRIPTION = (__doc__ or "").split("\n\n")[1].replace("\n", " ")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--topic", metavar="TOPIC", help="verify this topic only (default: every topic)"
    )


def verification_json(verification: RemoteStorageVerification) -> dict[str, Any]:
    """``{"segments_checked", "missing": [{"topic", "partition", "segment_id",
    "tiered_epoch", "start_offset", "end_offset", "objects"}]}``."""
    return {
        "segments_checked": verification.segments_checked,
        "missing": [
            {
                "topic": m.topic,
                "partition": m.partition,
                "segment_id": str(m.segment_id),
                "tiered_epoch": m.tiered_epoch,
                "start_offset": m.start_offset,
                "end_offset": m.end_offset,
                "objects": list(m.objects),
            }
            for m in verification.missing
        ],
    }


def _segment_line(m: MissingRemoteSegment) -> str:
    return (
        f"  {m.topic}-{m.partition} segment {m.segment_id} (tiered epoch {m.tiered_epoch}, "
        f"offsets {m.start_offset}..{m.end_offset}): {', '.join(m.objects)}"
    )


def verification_text(verification: RemoteStorageVerification) -> list[str]:
    count = len(verification.missing)
    if count == 0:
        return [
            f"Checked {verification.segments_checked} finished segments: none is missing "
            "anything in remote storage."
        ]
    return [
        f"Checked {verification.segments_checked} finished segments: {count} missing in "
        "remote storage (objects absent, or a data object of another size than recorded):",
        *(_segment_line(m) for m in verification.missing),
    ]


def run(args: argparse.Namespace) -> int:
    with admin_client(args, REMOTE_STORAGE_CALL_TIMEOUT_S) as admin:
        verification = admin.verify_remote_storage(args.topic)
    if args.format == "json":
        print_json(verification_json(verification))
    else:
        for line in verification_text(verification):
            print(line)
    return EXIT_ERROR if verification.missing else EXIT_OK
