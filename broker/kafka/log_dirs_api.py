"""DescribeLogDirs: this broker's one log directory and the partitions in it, with their local
sizes (what Kafka reports: the log on this broker's disk, remote segments not counted). It needs
Describe on the cluster, as in Kafka: without it the answer is CLUSTER_AUTHORIZATION_FAILED (v3+;
older versions can only say nothing)."""

from __future__ import annotations

import shutil
from collections import defaultdict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.static.protocol import ResponsePayload

from broker.kafka.convert import NO_THROTTLE
from broker.listener.handler import RequestContext
from tiered.kafka.messages import build, nested, response_type_for
from tiered.security.access import AccessControl
from tiered.security.acl import AclOperation, ResourceType

__all__ = ["LocalPartition", "LogDirsApi"]

LocalPartition = tuple[str, int, int]  # (topic, partition, local size in bytes)


class LogDirsApi:
    def __init__(
        self,
        log_dir: Path,
        partitions: Callable[[], Iterable[LocalPartition]],
        access: AccessControl,
    ) -> None:
        self._log_dir = log_dir
        self._partitions = partitions
        self._access = access

    def describe_log_dirs(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        if not self._access.allowed(context.requester, AclOperation.DESCRIBE, ResourceType.CLUSTER):
            return build(
                response_type,
                throttle_time=NO_THROTTLE,
                error_code=KafkaErrorCode.cluster_authorization_failed,
                results=(),
            )
        wanted: dict[str, set[int]] | None = None
        if request.topics is not None:
            wanted = defaultdict(set)
            for topic in request.topics:
                wanted[topic.topic].update(int(p) for p in topic.partitions)
        by_topic: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for topic, partition, size in self._partitions():
            if wanted is None or partition in wanted.get(topic, ()):
                by_topic[topic].append((partition, size))
        partition_type = nested(response_type, "DescribeLogDirsPartition")
        topics = tuple(
            build(
                nested(response_type, "DescribeLogDirsTopic"),
                name=topic,
                partitions=tuple(
                    build(
                        partition_type,
                        partition_index=p,
                        partition_size=size,
                        offset_lag=0,
                        is_future_key=False,
                    )
                    for p, size in sorted(partitions)
                ),
            )
            for topic, partitions in sorted(by_topic.items())
        )
        usage = shutil.disk_usage(self._log_dir)
        result = build(
            nested(response_type, "DescribeLogDirsResult"),
            error_code=KafkaErrorCode.none,
            log_dir=str(self._log_dir),
            topics=topics,
            total_bytes=usage.total,
            usable_bytes=usage.free,
        )
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            error_code=KafkaErrorCode.none,
            results=(result,),
        )
