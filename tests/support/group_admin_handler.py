"""An in-test broker for the group admin client and ``tiered-consumer-groups``: one listener that
is every partition's leader and every group's coordinator, answering Metadata, FindCoordinator,
ListGroups, DescribeGroups, OffsetFetch, OffsetCommit, ListOffsets, DeleteGroups and
OffsetDelete from plain dictionaries a test sets up, as Kafka's coordinator would answer."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from broker.listener.api_versions import ApiVersionRegistry
from broker.listener.handler import RequestContext
from tests.support.group_requests import assignment
from tests.support.kafka_wire import NO_THROTTLE, UNKNOWN_OPERATIONS
from tiered.kafka.messages import build, nested, response_type_for

NODE_ID = 1
EARLIEST, LATEST = -2, -1
REGISTRY = ApiVersionRegistry(
    {
        18: (0, 4),  # ApiVersions
        3: (0, 12),  # Metadata
        2: (1, 8),  # ListOffsets
        8: (2, 9),  # OffsetCommit
        9: (1, 7),  # OffsetFetch
        10: (0, 6),  # FindCoordinator
        15: (0, 5),  # DescribeGroups
        16: (0, 5),  # ListGroups
        17: (1, 1),  # SaslHandshake
        36: (0, 2),  # SaslAuthenticate
        42: (0, 2),  # DeleteGroups
        47: (0, 0),  # OffsetDelete
    }
)


@dataclass
class Member:
    member_id: str
    client_id: str
    host: str
    partitions: dict[str, list[int]]
    group_instance_id: str | None = None


@dataclass
class Group:
    state: str = "Empty"
    protocol_type: str = "consumer"
    protocol: str = ""
    members: list[Member] = field(default_factory=list)
    offsets: dict[tuple[str, int], int] = field(default_factory=dict)


class GroupAdminHandler:
    def __init__(self, topics: dict[str, int]) -> None:
        self.port = 0
        self.lock = threading.Lock()
        self.topics = topics  # name -> partition count
        self.log: dict[tuple[str, int], tuple[int, int]] = {}  # (log start, log end)
        self.first_offset_at: dict[tuple[str, int], list[tuple[int, int]]] = {}  # (ms, offset)
        self.groups: dict[str, Group] = {}
        self.not_coordinator_answers = 0  # DescribeGroups answers NOT_COORDINATOR this often
        self.gone_coordinators: list[int] = []  # ports FindCoordinator names first, one a call
        self.commits: list[dict[tuple[str, int], int]] = []
        self.requests: list[str] = []

    def _seen(self, name: str) -> None:
        with self.lock:
            self.requests.append(name)

    # ------------------------------------------------------------------------ cluster

    def metadata(self, request: Any, context: RequestContext) -> Any:
        self._seen("metadata")
        response_type = response_type_for(request)
        broker = build(
            nested(response_type, "MetadataResponseBroker"),
            node_id=NODE_ID,
            host="127.0.0.1",
            port=self.port,
            rack=None,
        )
        names = list(self.topics) if request.topics is None else [t.name for t in request.topics]
        topics = []
        for name in names:
            count = self.topics.get(name)
            partitions = tuple(
                build(
                    nested(response_type, "MetadataResponsePartition"),
                    error_code=ErrorCode.none,
                    partition_index=i,
                    leader_id=NODE_ID,
                    leader_epoch=0,
                    replica_nodes=(NODE_ID,),
                    isr_nodes=(NODE_ID,),
                    offline_replicas=(),
                )
                for i in range(count or 0)
            )
            topics.append(
                build(
                    nested(response_type, "MetadataResponseTopic"),
                    error_code=ErrorCode.none
                    if count is not None
                    else ErrorCode.unknown_topic_or_partition,
                    name=name,
                    topic_id=None,
                    is_internal=False,
                    partitions=partitions,
                    topic_authorized_operations=UNKNOWN_OPERATIONS,
                )
            )
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            brokers=(broker,),
            cluster_id="group-admin-test",
            controller_id=NODE_ID,
            topics=tuple(topics),
            cluster_authorized_operations=UNKNOWN_OPERATIONS,
        )

    def find_coordinator(self, request: Any, context: RequestContext) -> Any:
        self._seen("find_coordinator")
        response_type = response_type_for(request)
        with self.lock:
            port = self.gone_coordinators.pop(0) if self.gone_coordinators else self.port
        answer = {"node_id": NODE_ID, "host": "127.0.0.1", "port": port}
        answer |= {"error_code": ErrorCode.none, "error_message": None}
        if not hasattr(request, "coordinator_keys"):
            return build(response_type, throttle_time=NO_THROTTLE, **answer)
        coordinator = nested(response_type, "Coordinator")
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            coordinators=tuple(
                build(coordinator, key=k, **answer) for k in request.coordinator_keys
            ),
        )

    def list_offsets(self, request: Any, context: RequestContext) -> Any:
        self._seen("list_offsets")
        response_type = response_type_for(request)
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                tp = (topic.name, int(p.partition_index))
                found = self.log.get(tp)
                error, offset = ErrorCode.none, -1
                if found is None:
                    error = ErrorCode.unknown_topic_or_partition
                elif p.timestamp == EARLIEST:
                    offset = found[0]
                elif p.timestamp == LATEST:
                    offset = found[1]
                else:
                    later = [o for ms, o in self.first_offset_at.get(tp, []) if ms >= p.timestamp]
                    offset = min(later) if later else -1
                partitions.append(
                    build(
                        nested(response_type, "ListOffsetsPartitionResponse"),
                        partition_index=p.partition_index,
                        error_code=error,
                        timestamp=-1,
                        offset=offset,
                        leader_epoch=0,
                    )
                )
            topics.append(
                build(
                    nested(response_type, "ListOffsetsTopicResponse"),
                    name=topic.name,
                    partitions=tuple(partitions),
                )
            )
        return build(response_type, throttle_time=NO_THROTTLE, topics=tuple(topics))

    # ------------------------------------------------------------------------ groups

    def list_groups(self, request: Any, context: RequestContext) -> Any:
        self._seen("list_groups")
        response_type = response_type_for(request)
        wanted = set(getattr(request, "states_filter", ()))
        listed = nested(response_type, "ListedGroup")
        return build(
            response_type,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.none,
            groups=tuple(
                build(
                    listed,
                    group_id=name,
                    protocol_type=g.protocol_type,
                    group_state=g.state,
                    group_type="classic",
                )
                for name, g in sorted(self.groups.items())
                if not wanted or g.state in wanted
            ),
        )

    def describe_groups(self, request: Any, context: RequestContext) -> Any:
        self._seen("describe_groups")
        response_type = response_type_for(request)
        with self.lock:
            moved = self.not_coordinator_answers > 0
            self.not_coordinator_answers -= int(moved)
        described = []
        for name in request.groups:
            group = self.groups.get(name) or Group(state="Dead", protocol_type="")
            described.append(
                build(
                    nested(response_type, "DescribedGroup"),
                    error_code=ErrorCode.not_coordinator if moved else ErrorCode.none,
                    group_id=name,
                    group_state=group.state,
                    protocol_type=group.protocol_type,
                    protocol_data=group.protocol,
                    members=tuple(
                        build(
                            nested(response_type, "DescribedGroupMember"),
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            client_id=m.client_id,
                            client_host=m.host,
                            member_metadata=b"",
                            member_assignment=assignment(m.partitions),
                        )
                        for m in group.members
                    ),
                    authorized_operations=UNKNOWN_OPERATIONS,
                )
            )
        return build(response_type, throttle_time=NO_THROTTLE, groups=tuple(described))

    def offset_fetch(self, request: Any, context: RequestContext) -> Any:
        self._seen("offset_fetch")
        response_type = response_type_for(request)
        group = self.groups.get(request.group_id, Group())
        if request.topics is None:
            wanted: dict[str, list[int]] = {}
            for topic, partition in sorted(group.offsets):
                wanted.setdefault(topic, []).append(partition)
        else:
            wanted = {t.name: list(t.partition_indexes) for t in request.topics}
        topics = tuple(
            build(
                nested(response_type, "OffsetFetchResponseTopic"),
                name=name,
                partitions=tuple(
                    build(
                        nested(response_type, "OffsetFetchResponsePartition"),
                        partition_index=i,
                        committed_offset=group.offsets.get((name, i), -1),
                        committed_leader_epoch=-1,
                        metadata="",
                        error_code=ErrorCode.none,
                    )
                    for i in indexes
                ),
            )
            for name, indexes in wanted.items()
        )
        return build(
            response_type, throttle_time=NO_THROTTLE, topics=topics, error_code=ErrorCode.none
        )

    def offset_commit(self, request: Any, context: RequestContext) -> Any:
        self._seen("offset_commit")
        response_type = response_type_for(request)
        group = self.groups.setdefault(request.group_id, Group())
        committed = {}
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                committed[(topic.name, int(p.partition_index))] = int(p.committed_offset)
                partitions.append(
                    build(
                        nested(response_type, "OffsetCommitResponsePartition"),
                        partition_index=p.partition_index,
                        error_code=ErrorCode.none,
                    )
                )
            topics.append(
                build(
                    nested(response_type, "OffsetCommitResponseTopic"),
                    name=topic.name,
                    partitions=tuple(partitions),
                )
            )
        group.offsets.update(committed)
        self.commits.append(committed)
        return build(response_type, throttle_time=NO_THROTTLE, topics=tuple(topics))

    def delete_groups(self, request: Any, context: RequestContext) -> Any:
        self._seen("delete_groups")
        response_type = response_type_for(request)
        results = []
        for name in request.groups_names:
            group = self.groups.get(name)
            if group is None:
                error = ErrorCode.group_id_not_found
            elif group.members:
                error = ErrorCode.non_empty_group
            else:
                error = ErrorCode.none
                del self.groups[name]
            results.append(
                build(
                    nested(response_type, "DeletableGroupResult"), group_id=name, error_code=error
                )
            )
        return build(response_type, throttle_time=NO_THROTTLE, results=tuple(results))

    def offset_delete(self, request: Any, context: RequestContext) -> Any:
        self._seen("offset_delete")
        response_type = response_type_for(request)
        group = self.groups.get(request.group_id)
        top = ErrorCode.none if group is not None else ErrorCode.group_id_not_found
        topics = []
        for topic in request.topics:
            partitions = []
            for p in topic.partitions:
                tp = (topic.name, int(p.partition_index))
                error = ErrorCode.none
                if (
                    group is not None
                    and group.members
                    and any(topic.name in m.partitions for m in group.members)
                ):
                    error = ErrorCode.group_subscribed_to_topic
                elif group is not None:
                    group.offsets.pop(tp, None)
                partitions.append(
                    build(
                        nested(response_type, "OffsetDeleteResponsePartition"),
                        partition_index=p.partition_index,
                        error_code=error,
                    )
                )
            topics.append(
                build(
                    nested(response_type, "OffsetDeleteResponseTopic"),
                    name=topic.name,
                    partitions=tuple(partitions),
                )
            )
        return build(response_type, error_code=top, throttle_time=NO_THROTTLE, topics=tuple(topics))
