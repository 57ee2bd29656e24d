"""Consumer group administration over the Kafka protocol, as Kafka's AdminClient does it:
ListGroups on every broker, and on a group's coordinator DescribeGroups, OffsetFetch,
OffsetCommit (resetting offsets), DeleteGroups and OffsetDelete.

Only consumer groups are listed and described (protocol type ``consumer``, or empty for a group
that only holds offsets), as Kafka's ``listConsumerGroups`` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode as KafkaErrorCode

from cli.kafka_client.client import COORDINATOR_ERRORS, Broker, KafkaClient, by_topic
from cli.kafka_client.connection import KafkaConnection, kafka_error
from tiered.errors import ErrorCode, TieredError
from tiered.kafka.consumer_protocol import (
    CONSUMER_PROTOCOL_TYPE,
    TopicPartition,
    decode_assignment,
)
from tiered.kafka.messages import build, nested

__all__ = [
    "GROUP_STATES",
    "GroupAdmin",
    "GroupDescription",
    "GroupListing",
    "MemberDescription",
]

OFFSET_COMMIT, OFFSET_FETCH, DESCRIBE_GROUPS, LIST_GROUPS = 8, 9, 15, 16
DELETE_GROUPS, OFFSET_DELETE = 42, 47
GROUP_STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")
"""The classic group states, as Kafka spells them (its ConsumerGroupState)."""
NO_OFFSET = -1


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str | None  # None: the broker does not say (ListGroups before v4)


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    group_instance_id: str | None
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...]


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    assignor: str
    coordinator: Broker
    members: tuple[MemberDescription, ...] = field(default=())


class GroupAdmin:
    def __init__(self, client: KafkaClient) -> None:
        self.client = client

    # ------------------------------------------------------------------------ listing

    def list_groups(self, states: Sequence[str] = ()) -> list[GroupListing]:
        """Every broker's consumer groups (in ``states``, when given), by group id."""
        found: dict[str, GroupListing] = {}
        for broker in self.client.brokers():
            connection = self.client.connection(broker.host, broker.port)
            if states and connection.versions.get(LIST_GROUPS, 0) < 4:
                raise TieredError(
                    ErrorCode.UNSUPPORTED_VERSION,
                    f"broker {broker} cannot filter groups by state (ListGroups v4)",
                )
            answer = connection.request(LIST_GROUPS, states_filter=tuple(states), types_filter=())
            if answer.error_code != KafkaErrorCode.none:
                raise kafka_error(answer.error_code, f"ListGroups on broker {broker} failed")
            for group in answer.groups:
                if group.protocol_type in (CONSUMER_PROTOCOL_TYPE, ""):
                    state = getattr(group, "group_state", None)
                    found[group.group_id] = GroupListing(
                        group.group_id, group.protocol_type, state or None
                    )
        return [found[g] for g in sorted(found)]

    # ------------------------------------------------------------------------ describing

    def describe_group(self, group: str) -> GroupDescription:
        """The group as its coordinator holds it; state ``Dead`` for a group it does not
        know, as Kafka answers. INVALID_GROUP_ID for a group of another protocol type."""

        def describe(connection: KafkaConnection) -> Any:
            answer = connection.request(
                DESCRIBE_GROUPS, groups=(group,), include_authorized_operations=False
            )
            (described,) = answer.groups
            if described.error_code != KafkaErrorCode.none:
                raise kafka_error(
                    described.error_code,
                    f"cannot describe group {group!r}: {described.error_code.name.upper()}",
                )
            return described

        described = self.client.with_coordinator(group, describe)
        if described.protocol_type not in (CONSUMER_PROTOCOL_TYPE, ""):
            raise TieredError(
                ErrorCode.INVALID_GROUP_ID,
                f"group {group!r} is not a consumer group (protocol type "
                f"{described.protocol_type!r})",
            )
        members = tuple(
            MemberDescription(
                member_id=m.member_id,
                group_instance_id=getattr(m, "group_instance_id", None),
                client_id=m.client_id,
                host=m.client_host,
                assignment=tuple(_assignment(group, m.member_id, m.member_assignment)),
            )
            for m in described.members
        )
        return GroupDescription(
            group_id=group,
            state=described.group_state,
            protocol_type=described.protocol_type,
            assignor=described.protocol_data,
            coordinator=self.client.coordinator(group),
            members=members,
        )

    # ------------------------------------------------------------------------ offsets

    def committed_offsets(
        self, group: str, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, int]:
        """The group's committed offsets (of ``partitions``, or all); a partition without one
        is left out, as Kafka's AdminClient leaves it null."""
        wanted = None if partitions is None else by_topic(partitions)

        def fetch(connection: KafkaConnection) -> dict[TopicPartition, int]:
            request_type = connection.request_type(OFFSET_FETCH)
            topic_type = nested(request_type, "OffsetFetchRequestTopic")
            topics = None
            if wanted is not None:
                topics = tuple(
                    build(topic_type, name=t, partition_indexes=tuple(p)) for t, p in wanted.items()
                )
            answer = connection.request(
                OFFSET_FETCH, group_id=group, topics=topics, require_stable=True
            )
            top = getattr(answer, "error_code", KafkaErrorCode.none)
            if top != KafkaErrorCode.none:
                raise kafka_error(top, f"cannot fetch the offsets of group {group!r}")
            offsets = {}
            for topic in answer.topics:
                for partition in topic.partitions:
                    if partition.error_code != KafkaErrorCode.none:
                        raise kafka_error(
                            partition.error_code,
                            f"cannot fetch the offset of {topic.name}-"
                            f"{partition.partition_index} for group {group!r}",
                        )
                    if int(partition.committed_offset) != NO_OFFSET:
                        offsets[(topic.name, int(partition.partition_index))] = int(
                            partition.committed_offset
                        )
            return offsets

        return self.client.with_coordinator(group, fetch)

    def commit_offsets(
        self, group: str, offsets: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, TieredError | None]:
        """Commits ``offsets`` as an admin does (no generation, no member): each partition's
        error, or None."""

        def commit(connection: KafkaConnection) -> dict[TopicPartition, TieredError | None]:
            request_type = connection.request_type(OFFSET_COMMIT)
            topic_type = nested(request_type, "OffsetCommitRequestTopic")
            partition_type = nested(request_type, "OffsetCommitRequestPartition")
            topics = tuple(
                build(
                    topic_type,
                    name=topic,
                    partitions=tuple(
                        build(
                            partition_type,
                            partition_index=index,
                            committed_offset=offsets[(topic, index)],
                            committed_leader_epoch=-1,
                            committed_metadata="",
                        )
                        for index in indexes
                    ),
                )
                for topic, indexes in by_topic(offsets).items()
            )
            answer = connection.request(
                OFFSET_COMMIT,
                group_id=group,
                generation_id_or_member_epoch=-1,
                member_id="",
                group_instance_id=None,
                retention_time_ms=-1,
                topics=topics,
            )
            results = _partition_errors(answer.topics, f"commit to group {group!r}")
            _raise_coordinator_error(results)
            return results

        return self.client.with_coordinator(group, commit)

    def delete_offsets(
        self, group: str, partitions: Iterable[TopicPartition]
    ) -> tuple[TieredError | None, dict[TopicPartition, TieredError | None]]:
        """OffsetDelete: the group's error (None: none), and each partition's."""

        def delete(
            connection: KafkaConnection,
        ) -> tuple[TieredError | None, dict[TopicPartition, TieredError | None]]:
            request_type = connection.request_type(OFFSET_DELETE)
            topic_type = nested(request_type, "OffsetDeleteRequestTopic")
            partition_type = nested(request_type, "OffsetDeleteRequestPartition")
            topics = tuple(
                build(
                    topic_type,
                    name=topic,
                    partitions=tuple(build(partition_type, partition_index=i) for i in indexes),
                )
                for topic, indexes in by_topic(partitions).items()
            )
            answer = connection.request(OFFSET_DELETE, group_id=group, topics=topics)
            top = None
            if answer.error_code != KafkaErrorCode.none:
                top = kafka_error(answer.error_code)
                if top.code in COORDINATOR_ERRORS:
                    raise top
            return top, _partition_errors(answer.topics, f"delete offsets of group {group!r}")

        return self.client.with_coordinator(group, delete)

    # ------------------------------------------------------------------------ deleting

    def delete_groups(self, groups: Sequence[str]) -> dict[str, TieredError | None]:
        """DeleteGroups on each group's coordinator: each group's error, or None."""
        results: dict[str, TieredError | None] = {}
        for group in groups:

            def delete(connection: KafkaConnection, group: str = group) -> TieredError | None:
                answer = connection.request(DELETE_GROUPS, groups_names=(group,))
                (result,) = answer.results
                if result.error_code == KafkaErrorCode.none:
                    return None
                error = kafka_error(result.error_code)
                if error.code in COORDINATOR_ERRORS:
                    raise error
                return error

            try:
                results[group] = self.client.with_coordinator(group, delete)
            except TieredError as e:
                results[group] = e
        return results


def _assignment(group: str, member: str, data: bytes) -> list[TopicPartition]:
    try:
        return decode_assignment(data)
    except ValueError as e:
        raise TieredError(
            ErrorCode.INVALID_REQUEST, f"group {group!r} member {member!r}: {e}"
        ) from None


def _partition_errors(topics: Any, what: str) -> dict[TopicPartition, TieredError | None]:
    results: dict[TopicPartition, TieredError | None] = {}
    for topic in topics:
        for partition in topic.partitions:
            tp = (topic.name, int(partition.partition_index))
            code = partition.error_code
            results[tp] = (
                None
                if code == KafkaErrorCode.none
                else kafka_error(
                    code, f"cannot {what} for {tp[0]}-{tp[1]}: {kafka_error(code).message}"
                )
            )
    return results


def _raise_coordinator_error(results: Mapping[TopicPartition, TieredError | None]) -> None:
    """A coordinator error on any partition is the whole request's: retried elsewhere."""
    for error in results.values():
        if error is not None and error.code in COORDINATOR_ERRORS:
            raise error
