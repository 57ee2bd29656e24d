"""The active controller's own verify (``remote.storage.verify.interval.ms``): every interval, a
pass checks a bounded share of the finished segments, resuming where the last pass stopped, so
that a cluster of a million segments never holds the controller up; a round is the passes that
cover every partition once.

What it tells: the gauges (segments checked in the last complete round, or in the current one
until a round completes; segments known missing now), and one warning per missing segment, the
first time it is found (again only after it was found whole, or gone from the metadata).
Runs on the active controller only (started by ``serve``, stopped by ``stand_down``); a pass that
fails is logged and the next one runs as planned.
"""

from __future__ import annotations

import bisect
import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from controller.remote_verify import SegmentVerifier, VerifyUnsupportedError
from tiered.api import RemoteLogSegmentMetadata, TopicIdPartition
from tiered.cluster.model import MissingRemoteSegment

log = logging.getLogger(__name__)

__all__ = ["VERIFY_WORK_PER_PASS", "PeriodicVerify", "VerifyGauges", "periodic_verify"]

VERIFY_WORK_PER_PASS = 1000
"""A pass's share: segments checked plus partitions listed (a partition's listing counts one,
so that many empty partitions bound a pass too)."""


@dataclass(frozen=True)
class VerifyGauges:
    segments_checked: int = 0
    segments_missing: int = 0


# Where the next pass starts: a partition (by its sort key) and the start offset within it.
_Cursor = tuple[tuple[str, str, int], int]


def _key(tp: TopicIdPartition) -> tuple[str, str, int]:
    return (tp.topic, str(tp.topic_id), tp.partition)


def periodic_verify(
    verifier: SegmentVerifier | None,
    partitions: Callable[[], list[TopicIdPartition]],
    interval_ms: int,
) -> PeriodicVerify | None:
    """The periodic verify ``remote.storage.verify.interval.ms`` asks for, or None: when it is
    0, when the controller has no remote storage settings (``verifier`` None), or when the
    storage plugin can not be inspected (said once, as a warning, rather than at every pass)."""
    if interval_ms <= 0:
        return None
    if verifier is None:
        log.warning(
            "remote.storage.verify.interval.ms=%d but the controller has no remote storage "
            "settings: no periodic verify",
            interval_ms,
        )
        return None
    try:
        verifier.inspector()
    except VerifyUnsupportedError as e:
        log.warning(
            "remote.storage.verify.interval.ms=%d, but no periodic verify: %s", interval_ms, e
        )
        return None
    return PeriodicVerify(verifier, partitions, interval_ms)


class PeriodicVerify:
    """One controller process's periodic verify, across its terms as active controller."""

    def __init__(
        self,
        verifier: SegmentVerifier,
        partitions: Callable[[], list[TopicIdPartition]],
        interval_ms: int,
        work_per_pass: int = VERIFY_WORK_PER_PASS,
    ) -> None:
        """``partitions``: every partition of the active term's image, in any order."""
        if interval_ms <= 0:
            raise ValueError(f"interval_ms must be > 0, got {interval_ms}")
        if work_per_pass < 1:
            raise ValueError(f"work_per_pass must be >= 1, got {work_per_pass}")
        self._verifier = verifier
        self._partitions = partitions
        self._interval_s = interval_ms / 1000
        self._work_per_pass = work_per_pass
        self._lock = threading.Lock()
        self._cursor: _Cursor | None = None
        self._round_checked = 0
        self._last_round_checked: int | None = None
        self._missing: dict[uuid.UUID, MissingRemoteSegment] = {}
        self._round_missing: set[uuid.UUID] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def gauges(self) -> VerifyGauges:
        with self._lock:
            checked = (
                self._round_checked
                if self._last_round_checked is None
                else self._last_round_checked
            )
            return VerifyGauges(checked, len(self._missing))

    def start(self) -> None:
        """Starts the passes (the first after one interval). Idempotent while running."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, args=(self._stop,), name="remote-verify", daemon=True
        )
        self._thread.start()

    def stop(self, timeout_s: float = 30.0) -> None:
        """Stops after the current check."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    def _run(self, stop: threading.Event) -> None:
        while not stop.wait(self._interval_s):
            try:
                self.run_pass(stop)
            except Exception:
                log.exception("Remote storage verify pass failed; the next runs as planned")

    def run_pass(self, stop: threading.Event | None = None) -> None:
        """Checks up to the pass's share of segments from the cursor on, and moves the cursor;
        the pass that reaches the last partition ends the round."""
        partitions = sorted(self._partitions(), key=_key)
        keys = [_key(tp) for tp in partitions]
        index, after = 0, -1
        if self._cursor is not None:
            index = bisect.bisect_left(keys, self._cursor[0])
            if index < len(keys) and keys[index] == self._cursor[0]:
                after = self._cursor[1]
        work = 0
        while index < len(partitions):
            if work >= self._work_per_pass or (stop is not None and stop.is_set()):
                self._cursor = (keys[index], after)
                return
            tp = partitions[index]
            work += 1
            segments = [s for s in self._verifier.finished_segments(tp) if s.start_offset > after]
            # At least one segment per partition visited, so that every pass makes progress.
            share = segments[: max(1, self._work_per_pass - work)]
            work += len(share)
            self._observe(share, self._verifier.check(tp, share))
            if len(share) < len(segments):
                after = share[-1].start_offset
                continue  # the budget check above stops here, with the cursor in this partition
            index, after = index + 1, -1
        self._end_round()

    def _observe(
        self, checked: list[RemoteLogSegmentMetadata], found: list[MissingRemoteSegment]
    ) -> None:
        with self._lock:
            self._round_checked += len(checked)
            found_ids = {m.segment_id for m in found}
            for segment in checked:
                segment_id = segment.remote_log_segment_id.id
                if segment_id not in found_ids:
                    self._missing.pop(segment_id, None)
                    self._round_missing.discard(segment_id)
            for missing in found:
                if missing.segment_id not in self._missing:
                    log.warning(
                        "Remote storage verify: segment %s of %s-%d (tiered epoch %d, offsets "
                        "%d..%d) is COPY_SEGMENT_FINISHED but remote storage lacks %s",
                        missing.segment_id,
                        missing.topic,
                        missing.partition,
                        missing.tiered_epoch,
                        missing.start_offset,
                        missing.end_offset,
                        ", ".join(missing.objects),
                    )
                self._missing[missing.segment_id] = missing
                self._round_missing.add(missing.segment_id)

    def _end_round(self) -> None:
        """A round covered every partition: its count becomes the gauge, and a segment not
        found missing in it (gone from the metadata since) is no longer missing."""
        with self._lock:
            self._last_round_checked = self._round_checked
            self._round_checked = 0
            self._missing = {k: m for k, m in self._missing.items() if k in self._round_missing}
            self._round_missing = set()
            self._cursor = None
