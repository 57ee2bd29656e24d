"""What ``tiered-configs --alter --dry-run`` prints: each topic's change as validated by the
active controller (nothing changed), and for a delete-policy disable what its bulk delete would
remove, per partition and in total (text by default, or the JSON of ``--format json``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cli.common import print_json
from tiered.admin import AlterResult
from tiered.cluster.model import DeletionEstimate

__all__ = ["dry_run_json", "dry_run_text", "print_dry_runs"]


def dry_run_json(topic: str, result: AlterResult) -> dict[str, Any]:
    """``{"topic", "valid": true, "tiered_epoch_after", "would_delete"}``; ``would_delete`` is
    null unless the change would disable tiering with the delete policy (and the controller
    could read the RLMM)."""
    estimate = result.would_delete
    return {
        "topic": topic,
        "valid": True,
        "tiered_epoch_after": result.tiered_epoch,
        "would_delete": None
        if estimate is None
        else {
            "objects": estimate.objects,
            "bytes": estimate.bytes,
            "segments": estimate.segments,
            "partitions": [
                {
                    "partition": p.partition,
                    "objects": p.objects,
                    "bytes": p.bytes,
                    "segments": p.segments,
                }
                for p in estimate.partitions
            ],
        },
    }


def _counts(objects: int, size: int, segments: int) -> str:
    return f"{objects} objects, {size} bytes, {segments} segments"


def _estimate_lines(estimate: DeletionEstimate) -> list[str]:
    lines = [
        f"  would delete below tiered epoch {estimate.tiered_epoch}: "
        + _counts(estimate.objects, estimate.bytes, estimate.segments)
    ]
    lines.extend(
        f"    partition {p.partition}: {_counts(p.objects, p.bytes, p.segments)}"
        for p in estimate.partitions
    )
    return lines


def dry_run_text(topic: str, result: AlterResult) -> list[str]:
    lines = [
        f"Dry run: the change of topic {topic} is valid; nothing was changed. "
        f"It would leave the topic {result.tiered_state.value} at tiered epoch "
        f"{result.tiered_epoch}."
    ]
    if result.would_delete is not None:
        lines.extend(_estimate_lines(result.would_delete))
    return lines


def print_dry_runs(answers: Sequence[tuple[str, AlterResult]], output_format: str) -> None:
    """One JSON object for one topic, a list of them for several; or the text of each."""
    if output_format == "json":
        documents = [dry_run_json(topic, result) for topic, result in answers]
        print_json(documents[0] if len(documents) == 1 else documents)
        return
    for topic, result in answers:
        for line in dry_run_text(topic, result):
            print(line)
