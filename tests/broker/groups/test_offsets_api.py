"""OffsetCommit, OffsetFetch, OffsetDelete and DeleteGroups on the wire's messages, on a real
offsets log: Kafka's per-partition errors, the group and topic ACLs, the coordinator's own
errors, and what membership refuses."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any, cast

import pytest
from kio.schema.delete_groups.v2 import request as delete_v2
from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v8 import request as commit_v8
from kio.schema.offset_delete.v0 import request as offset_delete_v0
from kio.schema.offset_fetch.v1 import request as fetch_v1
from kio.schema.offset_fetch.v8 import request as fetch_v8
from kio.schema.request_header.v2.header import RequestHeader
from kio.static.primitive import i16, i32
from kio.static.protocol import RequestPayload

from broker.cluster_view import ClusterView, KafkaCluster, TopicPlacement
from broker.groups.group_state import GroupState
from broker.groups.offset_store import OffsetStore
from broker.groups.offsets_config import OffsetsConfig
from broker.groups.placement import OffsetsTopic
from broker.kafka.offsets_commit_api import OffsetsApi
from broker.listener.handler import RequestContext
from broker.log import Log
from tests.broker.kafka.test_cluster_view import FakeController
from tests.support.group_fakes import NoMembers
from tiered.errors import ErrorCode as TieredCode
from tiered.errors import TieredError
from tiered.security.access import AccessControl
from tiered.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    ResourcePattern,
    ResourceType,
)
from tiered.security.acl_index import AclIndex
from tiered.security.authorizer import AuthorizerConfig, StandardAuthorizer
from tiered.security.principal import KafkaPrincipal

TOPIC, SECRET = "orders", "secret"


class _Coordinator:
    """Every group maps to partition 0, which ``error`` says this broker serves or not."""

    def __init__(self) -> None:
        self.error = ErrorCode.none

    def coordinates(self, group_id: str) -> ErrorCode:
        return self.error

    def partition_of(self, group_id: str) -> int:
        return 0


class _Topics:
    """Two topics; ``ids`` says each one's id (a new id: deleted and created again)."""

    def __init__(self) -> None:
        self.ids = {TOPIC: uuid.uuid4(), SECRET: uuid.uuid4()}

    def topics(self, names: Sequence[str]) -> KafkaCluster:
        partitions = {TOPIC: 2, SECRET: 1}
        known = {n: TopicPlacement(n, i, (1,) * partitions[n]) for n, i in self.ids.items()}
        missing = TieredError(TieredCode.UNKNOWN_TOPIC_OR_PARTITION, "no such topic")
        return KafkaCluster("", {}, {n: known.get(n, missing) for n in names})

    current = topics  # always the controller's present answer


class _GroupWithMembers(NoMembers):
    """A Stable group whose members subscribe to ``subscribed``, or (None) of a protocol type
    other than ``consumer``."""

    def __init__(self, subscribed: frozenset[str] | None = None) -> None:
        self.subscribed = subscribed

    def delete_group_error(self, group_id: str) -> ErrorCode:
        return ErrorCode.non_empty_group

    def subscribed_topics(
        self, group_id: str, topics: Collection[str]
    ) -> frozenset[str] | ErrorCode:
        if self.subscribed is None:
            return ErrorCode.non_empty_group
        return self.subscribed & frozenset(topics)

    def state_of(self, group_id: str) -> GroupState | None:
        return GroupState.STABLE


def _access(*grants: tuple[ResourceType, str, AclOperation]) -> AccessControl:
    bindings = {
        uuid.uuid4(): AclBinding(
            ResourcePattern(resource_type, name),
            AccessControlEntry("User:alice", "*", operation, AclPermissionType.ALLOW),
        )
        for resource_type, name, operation in grants
    }
    index = AclIndex(bindings)
    return AccessControl(StandardAuthorizer(AuthorizerConfig(enabled=True), lambda: index))


ALL = (
    (ResourceType.GROUP, "g", AclOperation.ALL),
    (ResourceType.TOPIC, TOPIC, AclOperation.ALL),
)


class Harness:
    def __init__(self, root: Path) -> None:
        self.log = Log.open(root / "__consumer_offsets-0")
        self.store = OffsetStore(
            lambda index: self.log if index == 0 else None,
            lambda: [0],
            OffsetsConfig(metadata_max_bytes=8),
            NoMembers(),
            lambda: None,
        )
        self.store.start()
        self.coordinator = _Coordinator()
        self.topics = _Topics()

    def api(self, access: AccessControl, membership: NoMembers | None = None) -> OffsetsApi:
        return OffsetsApi(
            cast(OffsetsTopic, self.coordinator),
            self.store,
            membership or NoMembers(),
            cast(ClusterView, self.topics),
            access,
            metadata_max_bytes=8,
        )

    def close(self) -> None:
        self.store.close()
        self.log.close()


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    h = Harness(tmp_path)
    yield h
    h.close()


def call(method: Any, request: RequestPayload) -> Any:
    header = RequestHeader(
        request_api_key=i16(request.__api_key__),
        request_api_version=i16(request.__version__),
        correlation_id=i32(1),
        client_id="test",
    )
    principal = KafkaPrincipal("User", "alice")
    return method(request, RequestContext(header, "10.0.0.1:5", principal))


def commit(
    offsets: dict[tuple[str, int], int], metadata: str = "", generation: int = -1
) -> commit_v8.OffsetCommitRequest:
    topics: dict[str, list[commit_v8.OffsetCommitRequestPartition]] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(
            commit_v8.OffsetCommitRequestPartition(
                partition_index=i32(partition),
                committed_offset=offset,  # type: ignore[arg-type]
                committed_metadata=metadata,
            )
        )
    return commit_v8.OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=i32(generation),
        member_id="",
        topics=tuple(
            commit_v8.OffsetCommitRequestTopic(name=t, partitions=tuple(ps))
            for t, ps in topics.items()
        ),
    )


def errors_of(response: Any) -> dict[tuple[str, int], ErrorCode]:
    return {
        (t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions
    }


def fetched(api: OffsetsApi, topics: tuple[Any, ...] | None = None) -> Any:
    request = fetch_v8.OffsetFetchRequest(
        groups=(fetch_v8.OffsetFetchRequestGroup(group_id="g", topics=topics),)
    )
    [group] = call(api.offset_fetch, request).groups
    return group


def test_commits_answer_kafkas_errors_per_partition(harness: Harness) -> None:
    api = harness.api(_access(*ALL))
    answer = call(api.offset_commit, commit({(TOPIC, 0): 5, (TOPIC, 2): 6, ("nope", 0): 7}))
    assert errors_of(answer) == {
        (TOPIC, 0): ErrorCode.none,
        (TOPIC, 2): ErrorCode.unknown_topic_or_partition,
        ("nope", 0): ErrorCode.topic_authorization_failed,  # no ACL on it: existence not told
    }
    too_large = call(api.offset_commit, commit({(TOPIC, 1): 1}, metadata="x" * 9))
    assert errors_of(too_large) == {(TOPIC, 1): ErrorCode.offset_metadata_too_large}
    generation = call(api.offset_commit, commit({(TOPIC, 1): 1}, generation=3))
    assert errors_of(generation) == {(TOPIC, 1): ErrorCode.illegal_generation}
    group = fetched(api)
    assert [
        (t.name, p.partition_index, p.committed_offset) for t in group.topics for p in t.partitions
    ] == [(TOPIC, 0, 5)]


def _offsets(group: Any) -> list[tuple[str, int, int]]:
    return [
        (t.name, p.partition_index, p.committed_offset) for t in group.topics for p in t.partitions
    ]


def test_a_deleted_topics_offsets_are_not_answered_even_under_a_new_topic_of_its_name(
    harness: Harness,
) -> None:
    """As in Kafka, where a topic's deletion removes its committed offsets: a group must not
    resume a topic created again under the same name from the old topic's offsets."""
    api = harness.api(_access(*ALL))
    call(api.offset_commit, commit({(TOPIC, 0): 500, (TOPIC, 1): 700}))
    assert _offsets(fetched(api)) == [(TOPIC, 0, 500), (TOPIC, 1, 700)]
    harness.topics.ids[TOPIC] = uuid.uuid4()  # deleted, and created again
    assert _offsets(fetched(api)) == []
    asked = (fetch_v8.OffsetFetchRequestTopics(name=TOPIC, partition_indexes=(i32(0),)),)
    assert _offsets(fetched(api, asked)) == [(TOPIC, 0, -1)]
    call(api.offset_commit, commit({(TOPIC, 0): 3}))  # the new topic's
    assert _offsets(fetched(api)) == [(TOPIC, 0, 3)]
    del harness.topics.ids[TOPIC]  # deleted, not created again
    assert _offsets(fetched(api)) == []


def test_the_coordinators_errors_come_first(harness: Harness) -> None:
    api = harness.api(_access(*ALL))
    for error in (
        ErrorCode.not_coordinator,
        ErrorCode.coordinator_load_in_progress,
        ErrorCode.coordinator_not_available,
    ):
        harness.coordinator.error = error
        assert errors_of(call(api.offset_commit, commit({(TOPIC, 0): 5}))) == {(TOPIC, 0): error}
        assert fetched(api).error_code is error
        v1 = fetch_v1.OffsetFetchRequest(
            group_id="g",
            topics=(fetch_v1.OffsetFetchRequestTopic(name=TOPIC, partition_indexes=(i32(0),)),),
        )
        [topic] = call(api.offset_fetch, v1).topics  # v1: the error is each partition's
        assert topic.partitions[0].error_code is error


def test_group_and_topic_acls(harness: Harness) -> None:
    call(harness.api(_access(*ALL)).offset_commit, commit({(TOPIC, 0): 5}))
    call(
        harness.api(_access(*ALL, (ResourceType.TOPIC, SECRET, AclOperation.READ))).offset_commit,
        commit({(SECRET, 0): 9}),
    )
    no_group = harness.api(_access((ResourceType.TOPIC, TOPIC, AclOperation.ALL)))
    assert errors_of(call(no_group.offset_commit, commit({(TOPIC, 0): 6}))) == {
        (TOPIC, 0): ErrorCode.group_authorization_failed
    }
    assert fetched(no_group).error_code is ErrorCode.group_authorization_failed
    describe_only = harness.api(
        _access(
            (ResourceType.GROUP, "g", AclOperation.DESCRIBE),
            (ResourceType.TOPIC, TOPIC, AclOperation.DESCRIBE),
        )
    )
    # Read on the group to commit; Describe is enough to fetch, and a topic the principal may
    # not describe is left out of a fetch of everything, refused when named.
    assert errors_of(call(describe_only.offset_commit, commit({(TOPIC, 0): 6}))) == {
        (TOPIC, 0): ErrorCode.group_authorization_failed
    }
    everything = fetched(describe_only)
    assert [(t.name, p.committed_offset) for t in everything.topics for p in t.partitions] == [
        (TOPIC, 5)
    ]
    named = fetched(
        describe_only,
        (fetch_v8.OffsetFetchRequestTopics(name=SECRET, partition_indexes=(i32(0),)),),
    )
    [partition] = named.topics[0].partitions
    assert (partition.error_code, partition.committed_offset) == (
        ErrorCode.topic_authorization_failed,
        -1,
    )
    delete = delete_v2.DeleteGroupsRequest(groups_names=("g",))
    [refused] = call(describe_only.delete_groups, delete).results
    assert refused.error_code is ErrorCode.group_authorization_failed


def test_offset_delete_and_delete_groups(harness: Harness) -> None:
    api = harness.api(_access(*ALL))
    call(api.offset_commit, commit({(TOPIC, 0): 5, (TOPIC, 1): 6}))
    request = offset_delete_v0.OffsetDeleteRequest(
        group_id="g",
        topics=(
            offset_delete_v0.OffsetDeleteRequestTopic(
                name=TOPIC,
                partitions=(offset_delete_v0.OffsetDeleteRequestPartition(partition_index=i32(1)),),
            ),
        ),
    )
    in_use = harness.api(_access(*ALL), _GroupWithMembers())
    refused = call(in_use.offset_delete, request)
    assert (refused.error_code, refused.topics) == (ErrorCode.non_empty_group, ())
    [busy] = call(in_use.delete_groups, delete_v2.DeleteGroupsRequest(groups_names=("g",))).results
    assert busy.error_code is ErrorCode.non_empty_group
    answer = call(api.offset_delete, request)
    assert answer.error_code is ErrorCode.none and errors_of(answer) == {(TOPIC, 1): ErrorCode.none}
    assert [p.partition_index for t in fetched(api).topics for p in t.partitions] == [0]
    delete = delete_v2.DeleteGroupsRequest(groups_names=("g", "g"))
    assert [r.error_code for r in call(api.delete_groups, delete).results] == [ErrorCode.none]
    assert fetched(api).topics == ()
    [again] = call(api.delete_groups, delete).results
    assert again.error_code is ErrorCode.group_id_not_found
    assert call(api.offset_delete, request).error_code is ErrorCode.group_id_not_found


def _offset_delete(partitions: dict[str, list[int]]) -> offset_delete_v0.OffsetDeleteRequest:
    return offset_delete_v0.OffsetDeleteRequest(
        group_id="g",
        topics=tuple(
            offset_delete_v0.OffsetDeleteRequestTopic(
                name=topic,
                partitions=tuple(
                    offset_delete_v0.OffsetDeleteRequestPartition(partition_index=i32(i))
                    for i in indexes
                ),
            )
            for topic, indexes in partitions.items()
        ),
    )


def test_offset_delete_of_a_consumer_group_with_members(harness: Harness) -> None:
    """Kafka deletes the offsets of the topics no member subscribes to, and answers
    GROUP_SUBSCRIBED_TO_TOPIC for the others; the topics' own errors come first."""
    grants = (*ALL, (ResourceType.TOPIC, SECRET, AclOperation.ALL))
    call(harness.api(_access(*grants)).offset_commit, commit({(TOPIC, 0): 5, (SECRET, 0): 7}))
    consuming = harness.api(_access(*grants), _GroupWithMembers(frozenset({TOPIC})))
    answer = call(consuming.offset_delete, _offset_delete({TOPIC: [0, 5], SECRET: [0]}))
    assert answer.error_code is ErrorCode.none
    assert errors_of(answer) == {
        (TOPIC, 0): ErrorCode.group_subscribed_to_topic,
        (TOPIC, 5): ErrorCode.unknown_topic_or_partition,
        (SECRET, 0): ErrorCode.none,
    }
    kept = fetched(harness.api(_access(*grants)))
    assert [(t.name, p.partition_index) for t in kept.topics for p in t.partitions] == [(TOPIC, 0)]


def test_a_commit_right_after_a_delete_and_re_create_elsewhere_is_of_the_new_topic(
    harness: Harness,
) -> None:
    """The broker's cached view still has the deleted topic's id when a client, told the topic
    was deleted and created again (through another broker), commits: the commit is stamped with
    the new topic's id, so OffsetFetch answers it, before and after the view is refreshed."""
    controller = FakeController()
    controller.create(TOPIC, 1, 1)
    now = [100.0]
    view = ClusterView(controller, max_age_s=1.0, clock=lambda: now[0])  # type: ignore[arg-type]
    api = OffsetsApi(
        cast(OffsetsTopic, harness.coordinator),
        harness.store,
        NoMembers(),
        view,
        _access(*ALL),
        metadata_max_bytes=8,
    )
    call(api.offset_commit, commit({(TOPIC, 0): 5}))
    assert _offsets(fetched(api)) == [(TOPIC, 0, 5)]
    # a Metadata request of every topic: the listing, kept, has the old id
    assert view.everything().topic_ids() == {TOPIC: controller.ids[TOPIC]}

    controller.create(TOPIC, 1, 1)  # deleted and created again elsewhere: the view is fresh
    assert errors_of(call(api.offset_commit, commit({(TOPIC, 0): 11}))) == {
        (TOPIC, 0): ErrorCode.none
    }
    assert _offsets(fetched(api)) == [(TOPIC, 0, 11)]
    now[0] += 2.0  # the view learns of the new topic by itself
    assert _offsets(fetched(api)) == [(TOPIC, 0, 11)]
