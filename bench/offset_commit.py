"""What ``bench/kafka_protocol.py`` measures committed offsets by: the latency of one OffsetCommit
against one ``write`` + ``fdatasync`` of the same bytes (issue 24's goal: at most 2x).

*OffsetCommit*: a standalone commit (generation -1, no member) of one partition, sent on one
connection to the group's coordinator and answered once its record batch is fsynced there; one
request at a time, each committing the next offset. Every request is encoded before the clock
starts and its answer decoded after it stops, so the time is the broker's: the client is a send
of the frame and a read of the answer's. *fdatasync*: the record batch that commit
appends (Kafka's ``OffsetCommitKey`` / ``OffsetCommitValue`` in a batch v2), written to the end
of a file and ``fdatasync``ed, as many times, on the broker's log's file system.
Medians are compared (ratio = commit / fdatasync: lower is better). Verified: every commit is
answered without error, and the offset read back (OffsetFetch) is the last one committed.

Also measured, to show where a commit's time goes: *a no-op request's round trip*, a Heartbeat
of a member the coordinator does not know (answered UNKNOWN_MEMBER_ID from memory, no I/O) on
the same connection: the listener's request path alone, which every commit pays on top of its
fsync.

This module has no ``__main__``: ``bench/kafka_protocol.py`` runs it in its own run.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v4 import request as find_v4
from kio.schema.heartbeat.v4 import request as heartbeat_v4
from kio.schema.offset_commit.v8 import request as commit_v8
from kio.schema.offset_fetch.v8 import request as fetch_v8
from kio.static.primitive import i32, i64
from kio.static.protocol import RequestPayload

from bench.common import summarize, summary_row
from broker.groups.offset_records import CommittedOffset, OffsetKey, encode_offset_key, encode_value
from cli.kafka_client.connection import decode_response, encode_request
from tests.support.kafka_wire import WireClient
from tests.support.polling import poll_until
from tiered.kafka.messages import response_type_for
from tiered.kafka.records import Record, build_batch

__all__ = ["GOAL", "measure", "summary_rows"]

GOAL = 2.0  # OffsetCommit latency / one fdatasync of the same bytes


def _commit(group: str, topic: str, offset: int) -> commit_v8.OffsetCommitRequest:
    return commit_v8.OffsetCommitRequest(
        group_id=group,
        member_id="",
        topics=(
            commit_v8.OffsetCommitRequestTopic(
                name=topic,
                partitions=(
                    commit_v8.OffsetCommitRequestPartition(
                        partition_index=i32(0), committed_offset=i64(offset), committed_metadata=""
                    ),
                ),
            ),
        ),
    )


def _commit_latencies(
    address: tuple[str, int], group: str, topic: str, commits: int
) -> tuple[list[float], list[float], list[str]]:
    """The commits' latencies, the no-op requests' round trips, and what went wrong."""
    samples: list[float] = []
    no_ops: list[float] = []
    problems: list[str] = []
    client = WireClient(address, timeout=30.0)  # one broker: the coordinator
    try:
        find = find_v4.FindCoordinatorRequest(key_type=0, coordinator_keys=(group,))
        poll_until(  # the first one creates __consumer_offsets
            lambda: client.call(find).coordinators[0].error_code is ErrorCode.none,
            timeout=60,
            what="the group's coordinator",
        )
        poll_until(
            lambda: _commit_error(client, _commit(group, topic, 0)) is ErrorCode.none,
            timeout=60,
            what="the coordinator to load",
        )
        # Requests are encoded before the clock starts and answers decoded after it stops: a
        # client in C or Java costs next to nothing per request, and what is timed is the
        # broker's answer, not this Python client's codec.
        commits_sent = [_commit(group, topic, offset) for offset in range(1, commits + 1)]
        answers = _timed_round_trips(client, commits_sent, samples)
        for offset, answer in enumerate(answers, start=1):
            error = answer.topics[0].partitions[0].error_code
            if error is not ErrorCode.none:
                problems.append(f"commit of offset {offset}: {error.name}")
        no_op = heartbeat_v4.HeartbeatRequest(
            group_id=group, generation_id=i32(1), member_id="bench-unknown-member"
        )
        for answer in _timed_round_trips(client, [no_op] * commits, no_ops):
            if answer.error_code is not ErrorCode.unknown_member_id:
                problems.append(f"the no-op Heartbeat answered {answer.error_code.name}")
                break
        fetch = fetch_v8.OffsetFetchRequest(
            groups=(fetch_v8.OffsetFetchRequestGroup(group_id=group, topics=None),)
        )
        [answer] = client.call(fetch).groups
        found = [p.committed_offset for t in answer.topics for p in t.partitions]
        if found != [commits]:
            problems.append(f"OffsetFetch read {found}, not [{commits}]")
    finally:
        client.close()
    return samples, no_ops, problems


def _timed_round_trips(
    client: WireClient, requests: Sequence[RequestPayload], samples: list[float]
) -> list[Any]:
    """Each request's frame sent and its answer's frame read, one at a time, each round trip
    appended to ``samples``; then the answers, decoded (a wrong correlation id raises)."""
    first = client.next_correlation_ids(len(requests))
    frames = [
        encode_request(request, first + i, client.client_id) for i, request in enumerate(requests)
    ]
    answers = []
    for frame in frames:
        started = time.perf_counter()
        client.sock.sendall(frame)
        answers.append(client.receive_frame())
        samples.append(time.perf_counter() - started)
    decoded = []
    for i, (request, answer) in enumerate(zip(requests, answers, strict=True)):
        correlation_id, response = decode_response(answer, response_type_for(request))
        if correlation_id != first + i:
            raise ConnectionError(f"answer {correlation_id} to request {first + i}")
        decoded.append(response)
    return decoded


def _commit_error(client: WireClient, request: commit_v8.OffsetCommitRequest) -> ErrorCode:
    [topic] = client.call(request).topics
    error: ErrorCode = topic.partitions[0].error_code
    return error


def _fdatasync_latencies(path: Path, group: str, topic: str, count: int) -> list[float]:
    """Each: the record batch of one commit appended to ``path`` and fdatasynced."""
    samples: list[float] = []
    key = encode_offset_key(OffsetKey(group, topic, 0))
    topic_id = uuid.uuid4()  # the broker's records carry the topic's id
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        for offset in range(1, count + 1):
            now = int(time.time() * 1000)
            value = encode_value(CommittedOffset(offset, -1, "", now, topic_id))
            batch = build_batch([Record(key, value, timestamp=now)])
            started = time.perf_counter()
            os.write(fd, batch)
            os.fdatasync(fd)
            samples.append(time.perf_counter() - started)
    finally:
        os.close(fd)
        path.unlink()
    return samples


def measure(kafka_address: str, topic: str, log_dir: Path, commits: int) -> dict[str, Any]:
    """Both latencies (``kafka_address``: the one broker's Kafka listener; ``topic``: an existing
    topic; ``log_dir``: where the fdatasync file goes, on the broker's log's file system)."""
    host, _, port = kafka_address.rpartition(":")
    group = f"bench-{uuid.uuid4().hex[:8]}"
    commit_s, no_op_s, problems = _commit_latencies((host, int(port)), group, topic, commits)
    fsync_s = _fdatasync_latencies(log_dir / "offset-commit-fdatasync.bin", group, topic, commits)
    commit, fsync = summarize(commit_s), summarize(fsync_s)
    return {
        "commits": commits,
        "offset_commit": commit,
        "fdatasync": fsync,
        "no_op_request": summarize(no_op_s),
        "ratio": commit["median_s"] / fsync["median_s"] if fsync["median_s"] else None,
        "goal": f"<= {GOAL}",
        "problems": problems,
    }


def summary_rows(result: dict[str, Any] | None, scenario: str) -> list[dict[str, Any]]:
    if not result or "offset_commit" not in result:
        return []
    return [
        summary_row(
            scenario,
            f"OffsetCommit latency, median (ratio: of one fdatasync, goal <= {GOAL:g})",
            result["offset_commit"]["median_s"],
            "s",
            "one write + fdatasync of the commit's record batch",
            result["fdatasync"]["median_s"],
        ),
        summary_row(
            scenario,
            "a no-op request's round trip on the same connection, median (the request path "
            "alone: a Heartbeat answered from memory)",
            result["no_op_request"]["median_s"],
            "s",
            "one write + fdatasync of the commit's record batch",
            result["fdatasync"]["median_s"],
        ),
    ]
