"""A topic as ``tiered-topics --describe --json`` shows it, for the demo's checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from demo_output import human_bytes


@dataclass(frozen=True)
class Partition:
    partition: int
    log_start_offset: int
    local_log_start_offset: int
    log_end_offset: int
    remote_segment_count: int
    remote_log_size_bytes: int
    remote_delete_state: str


@dataclass(frozen=True)
class Topic:
    tiered_state: str
    tiered_epoch: int
    partitions: tuple[Partition, ...]

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Topic:
        return cls(
            tiered_state=raw["tiered_state"],
            tiered_epoch=raw["tiered_epoch"],
            partitions=tuple(
                Partition(
                    partition=p["partition"],
                    log_start_offset=p["log_start_offset"],
                    local_log_start_offset=p["local_log_start_offset"],
                    log_end_offset=p["log_end_offset"],
                    remote_segment_count=p["remote_segment_count"],
                    remote_log_size_bytes=p["remote_log_size_bytes"],
                    remote_delete_state=p["remote_delete_state"] or "",
                )
                for p in sorted(raw["partitions"], key=lambda p: p["partition"])
            ),
        )

    def progress(self) -> str:
        """One compact line: per partition remote segments/bytes and the local log start."""
        return " | ".join(
            f"p{p.partition} {p.remote_segment_count:>3} seg/{human_bytes(p.remote_log_size_bytes)}"
            f" local from {p.local_log_start_offset}"
            for p in self.partitions
        )
