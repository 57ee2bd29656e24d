"""OffsetCommit, OffsetFetch, OffsetDelete and DeleteGroups: committed offsets on the wire, as
Kafka's KafkaApis and group coordinator answer them.

Every group API first checks the group ACL (Read to commit, Describe to fetch, Delete to delete:
GROUP_AUTHORIZATION_FAILED), then the topics (Read to commit or delete offsets, Describe to
fetch: TOPIC_AUTHORIZATION_FAILED; a fetch of all a group's offsets leaves those topics out;
a commit for a topic or partition that does not exist is UNKNOWN_TOPIC_OR_PARTITION), then that
this broker is the group's coordinator now (``OffsetsTopic.coordinates``: NOT_COORDINATOR,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE), then membership (``GroupMembership``:
the member's generation; for OffsetDelete, the topics the group's members subscribe to, whose
offsets stay: GROUP_SUBSCRIBED_TO_TOPIC). A commit is answered once fsynced on the coordinator.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode
from kio.static.protocol import ResponsePayload

from broker.cluster_view import ClusterView, KafkaCluster, TopicPlacement
from broker.groups.membership import GroupMembership
from broker.groups.offset_records import CommittedOffset
from broker.groups.offset_store import OffsetStore
from broker.groups.offsets_partition import OffsetsPartition, TopicPartition
from broker.groups.placement import OffsetsTopic
from broker.kafka.convert import NO_THROTTLE
from broker.listener.handler import RequestContext
from tiered.errors import TieredError
from tiered.kafka.messages import build, has_field, nested, response_type_for
from tiered.security.access import AccessControl
from tiered.security.acl import AclOperation, ResourceType
from tiered.security.principal import RequestContext as Requester

__all__ = ["OffsetsApi"]

_log = logging.getLogger(__name__)

_NO_OFFSET = -1  # Kafka's INVALID_OFFSET: nothing committed
_NO_EPOCH = -1


class OffsetsApi:
    def __init__(
        self,
        offsets_topic: OffsetsTopic,
        store: OffsetStore,
        membership: GroupMembership,
        view: ClusterView,
        access: AccessControl,
        metadata_max_bytes: int,
    ) -> None:
        self._topic = offsets_topic
        self._store = store
        self._membership = membership
        self._view = view
        self._access = access
        self._metadata_max_bytes = metadata_max_bytes

    # --------------------------------------------------------------------------- shared checks

    def _partition(self, group_id: str) -> OffsetsPartition | ErrorCode:
        """The loaded ``__consumer_offsets`` partition of ``group_id`` if this broker is its
        coordinator now, else the error every group API answers."""
        error = self._topic.coordinates(group_id)
        if error is not ErrorCode.none:
            return error
        index = self._topic.partition_of(group_id)
        if index is None:  # the topic is gone since
            return ErrorCode.coordinator_not_available
        return self._store.partition(index)

    def _topic_errors(
        self,
        requester: Requester,
        operation: AclOperation,
        wanted: Sequence[TopicPartition],
        *,
        must_exist: bool,
        current: bool = False,
    ) -> tuple[dict[TopicPartition, ErrorCode], dict[str, uuid.UUID]]:
        """Kafka's per-partition refusals: topics the requester may not use so, and (when
        ``must_exist``) topics or partitions that do not exist; and the ids of the topics found
        to exist: when ``current``, as the controller has them after the request arrived (see
        ``ClusterView.current``), else as the broker's view has them."""
        errors: dict[TopicPartition, ErrorCode] = {}
        names = list(dict.fromkeys(t for t, _ in wanted))
        refused = {
            n
            for n in names
            if not self._access.allowed(requester, operation, ResourceType.TOPIC, n)
        }
        cluster = None
        unreachable = False
        if must_exist and set(names) - refused:
            try:
                lookup = self._view.current if current else self._view.topics
                cluster = lookup([n for n in names if n not in refused])
            except TieredError as e:
                _log.warning("Cannot check the topics of an offsets request: %s", e)
                unreachable = True
        for topic, partition in wanted:
            if topic in refused:
                errors[(topic, partition)] = ErrorCode.topic_authorization_failed
            elif unreachable:
                errors[(topic, partition)] = ErrorCode.coordinator_not_available
            elif must_exist:
                found = None if cluster is None else cluster.topics.get(topic)
                if not isinstance(found, TopicPlacement) or not (
                    0 <= partition < len(found.replicas)
                ):
                    errors[(topic, partition)] = ErrorCode.unknown_topic_or_partition
        return errors, {} if cluster is None else cluster.topic_ids()

    # ----------------------------------------------------------------------------- OffsetCommit

    def offset_commit(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        group_id = str(request.group_id)
        asked: list[tuple[TopicPartition, Any]] = [
            ((t.name, int(p.partition_index)), p) for t in request.topics for p in t.partitions
        ]
        wanted = [tp for tp, _ in asked]
        errors: dict[TopicPartition, ErrorCode]
        if not self._access.allowed(
            context.requester, AclOperation.READ, ResourceType.GROUP, group_id
        ):
            errors = dict.fromkeys(wanted, ErrorCode.group_authorization_failed)
        else:
            # The ids stamp the offsets: as the controller has them now, not as cached, or a
            # commit right after a delete and re-create would be of the deleted topic.
            errors, topic_ids = self._topic_errors(
                context.requester, AclOperation.READ, wanted, must_exist=True, current=True
            )
            valid = [(tp, p) for tp, p in asked if tp not in errors]
            if valid:
                errors.update(self._commit(request, group_id, valid, topic_ids))
        return _partition_answers(response_type, wanted, errors)

    def _commit(
        self,
        request: Any,
        group_id: str,
        valid: list[tuple[TopicPartition, Any]],
        topic_ids: Mapping[str, uuid.UUID],
    ) -> dict[TopicPartition, ErrorCode]:
        """Commits the offsets of existing topics, each stamped with its topic's id."""
        found = self._partition(group_id)
        if isinstance(found, ErrorCode):
            return dict.fromkeys((tp for tp, _ in valid), found)
        refused = self._membership.offset_commit_error(
            group_id,
            str(request.member_id),
            int(request.generation_id_or_member_epoch),
            getattr(request, "group_instance_id", None),
        )
        if refused is not ErrorCode.none:
            return dict.fromkeys((tp for tp, _ in valid), refused)
        errors: dict[TopicPartition, ErrorCode] = {}
        offsets = {}
        for tp, p in valid:
            metadata = p.committed_metadata or ""
            if len(metadata) > self._metadata_max_bytes:
                errors[tp] = ErrorCode.offset_metadata_too_large
                continue
            offsets[tp] = self._store.committed_at(
                int(p.committed_offset),
                int(getattr(p, "committed_leader_epoch", _NO_EPOCH)),
                metadata,
                topic_ids[tp[0]],
            )
        try:
            found.commit(group_id, offsets)
        except (OSError, ValueError) as e:
            # Kafka's mapping of a failed append: the client finds the coordinator again.
            _log.error("Could not append an offset commit of group %r: %s", group_id, e)
            return {**errors, **dict.fromkeys(offsets, ErrorCode.not_coordinator)}
        self._store.written(found)
        return errors

    # ------------------------------------------------------------------------------ OffsetFetch

    def offset_fetch(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        if hasattr(request, "groups"):  # v8+: many groups
            group_type = nested(response_type, "OffsetFetchResponseGroup")
            groups = []
            for group in request.groups:
                error, topics = self._fetch(response_type, group, context)
                groups.append(
                    build(group_type, group_id=group.group_id, topics=topics, error_code=error)
                )
            return build(response_type, throttle_time=NO_THROTTLE, groups=tuple(groups))
        error, topics = self._fetch(response_type, request, context)
        if not has_field(response_type, "error_code"):  # v1: errors per partition
            topics = _with_partition_error(response_type, request, topics, error)
        return build(response_type, throttle_time=NO_THROTTLE, topics=topics, error_code=error)

    def _fetch(
        self, response_type: type[Any], group: Any, context: RequestContext
    ) -> tuple[ErrorCode, tuple[Any, ...]]:
        group_id = str(group.group_id)
        requester = context.requester
        if not self._access.allowed(requester, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            return ErrorCode.group_authorization_failed, ()
        found = self._partition(group_id)
        if isinstance(found, ErrorCode):
            return found, ()
        refused = self._membership.offset_fetch_error(
            group_id, getattr(group, "member_id", None), int(getattr(group, "member_epoch", -1))
        )
        if refused is not ErrorCode.none:
            return refused, ()
        committed = self._of_existing_topics(found.committed(group_id))
        if group.topics is None:  # every partition the group has offsets for
            wanted = sorted(committed)
            errors, _ = self._topic_errors(
                requester, AclOperation.DESCRIBE, wanted, must_exist=False
            )
            wanted = [tp for tp in wanted if tp not in errors]  # left out, as Kafka does
        else:
            wanted = [(t.name, int(p)) for t in group.topics for p in t.partition_indexes]
            errors, _ = self._topic_errors(
                requester, AclOperation.DESCRIBE, wanted, must_exist=False
            )
        return ErrorCode.none, _fetched(response_type, wanted, committed, errors)

    def _of_existing_topics(
        self, committed: dict[TopicPartition, CommittedOffset]
    ) -> dict[TopicPartition, CommittedOffset]:
        """``committed`` without the offsets of a topic since deleted, whether or not a new
        topic has its name (their records go at the next retention check); those of a topic
        the controller cannot say about stay. An offset the cached view calls gone is left out
        only if a lookup made now agrees: a commit is stamped from such a lookup, so its id may
        be newer than the cached view's."""
        stamped = sorted({t for (t, _), c in committed.items() if c.topic_id is not None})
        if not stamped:
            return committed
        try:
            gone = _of_topics_gone(committed, self._view.topics(stamped))
            if gone:
                gone = _of_topics_gone(committed, self._view.current(sorted({t for t, _ in gone})))
        except TieredError as e:
            _log.warning("Cannot check the topics of an offset fetch: %s", e)
            return committed
        return {tp: c for tp, c in committed.items() if tp not in gone}

    # ----------------------------------------------------------------------------- OffsetDelete

    def offset_delete(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        group_id = str(request.group_id)
        wanted = [(t.name, int(p.partition_index)) for t in request.topics for p in t.partitions]

        def answer(error: ErrorCode, errors: dict[TopicPartition, ErrorCode]) -> ResponsePayload:
            topics = () if error is not ErrorCode.none else _topics(response_type, wanted, errors)
            return build(response_type, error_code=error, throttle_time=NO_THROTTLE, topics=topics)

        requester = context.requester
        if not self._access.allowed(requester, AclOperation.DELETE, ResourceType.GROUP, group_id):
            return answer(ErrorCode.group_authorization_failed, {})
        errors, _ = self._topic_errors(requester, AclOperation.READ, wanted, must_exist=True)
        found = self._partition(group_id)
        if isinstance(found, ErrorCode):
            return answer(found, {})
        if not found.has_group(group_id) and self._membership.state_of(group_id) is None:
            return answer(ErrorCode.group_id_not_found, {})
        subscribed = self._membership.subscribed_topics(
            group_id, {t for t, p in wanted if (t, p) not in errors}
        )
        if isinstance(subscribed, ErrorCode):
            return answer(subscribed, {})
        for tp in wanted:
            if tp not in errors and tp[0] in subscribed:
                errors[tp] = ErrorCode.group_subscribed_to_topic
        try:
            found.offsets_deleted(group_id, [tp for tp in wanted if tp not in errors])
        except (OSError, ValueError) as e:
            _log.error("Could not delete offsets of group %r: %s", group_id, e)
            return answer(ErrorCode.not_coordinator, {})
        self._store.written(found)
        return answer(ErrorCode.none, errors)

    # ----------------------------------------------------------------------------- DeleteGroups

    def delete_groups(self, request: Any, context: RequestContext) -> ResponsePayload:
        response_type = response_type_for(request)
        result_type = nested(response_type, "DeletableGroupResult")
        results = [
            build(result_type, group_id=g, error_code=self._delete_group(str(g), context))
            for g in dict.fromkeys(request.groups_names)
        ]
        return build(response_type, throttle_time=NO_THROTTLE, results=tuple(results))

    def _delete_group(self, group_id: str, context: RequestContext) -> ErrorCode:
        if not self._access.allowed(
            context.requester, AclOperation.DELETE, ResourceType.GROUP, group_id
        ):
            return ErrorCode.group_authorization_failed
        found = self._partition(group_id)
        if isinstance(found, ErrorCode):
            return found
        known = self._membership.state_of(group_id) is not None
        if not known and not found.has_group(group_id):
            return ErrorCode.group_id_not_found
        refused = self._membership.delete_group_error(group_id)
        if refused is not ErrorCode.none:
            return refused
        try:
            found.group_deleted(group_id)
        except (OSError, ValueError) as e:
            _log.error("Could not delete group %r: %s", group_id, e)
            return ErrorCode.not_coordinator
        self._store.written(found)
        return ErrorCode.none


def _of_topics_gone(
    committed: Mapping[TopicPartition, CommittedOffset], found: KafkaCluster
) -> set[TopicPartition]:
    """The offsets of ``committed`` whose stamped topic ``found`` says is gone (deleted, or its
    name now another topic's); the topics ``found`` does not name are not."""
    current, missing = found.topic_ids(), found.missing_topics()

    def of_a_topic_gone(topic: str, offset: CommittedOffset) -> bool:
        if topic in current:
            return offset.of_another_topic(current[topic])
        return topic in missing and offset.of_another_topic(None)

    return {tp for tp, c in committed.items() if of_a_topic_gone(tp[0], c)}


# ------------------------------------------------------------------------------------ answers


def _topics(
    response_type: type[Any], wanted: Iterable[TopicPartition], errors: dict[TopicPartition, Any]
) -> tuple[Any, ...]:
    """OffsetCommit's or OffsetDelete's answers: per topic, per partition, ``partition_index``
    and ``error_code`` (NONE unless in ``errors``), in the order asked."""
    api = (
        "OffsetCommit"
        if _has_nested(response_type, "OffsetCommitResponseTopic")
        else "OffsetDelete"
    )
    topic_type = nested(response_type, f"{api}ResponseTopic")
    partition_type = nested(response_type, f"{api}ResponsePartition")
    by_topic: dict[str, list[Any]] = {}
    for topic, partition in wanted:
        by_topic.setdefault(topic, []).append(
            build(
                partition_type,
                partition_index=partition,
                error_code=errors.get((topic, partition), ErrorCode.none),
            )
        )
    return tuple(build(topic_type, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())


def _partition_answers(
    response_type: type[Any],
    wanted: Iterable[TopicPartition],
    errors: dict[TopicPartition, ErrorCode],
) -> ResponsePayload:
    answer: ResponsePayload = build(
        response_type, throttle_time=NO_THROTTLE, topics=_topics(response_type, wanted, errors)
    )
    return answer


def _has_nested(message_type: type[Any], name: str) -> bool:
    try:
        nested(message_type, name)
    except AttributeError:
        return False
    return True


def _fetch_types(response_type: type[Any]) -> tuple[type[Any], type[Any]]:
    for topic_name, partition_name in (
        ("OffsetFetchResponseTopics", "OffsetFetchResponsePartitions"),
        ("OffsetFetchResponseTopic", "OffsetFetchResponsePartition"),
    ):
        if _has_nested(response_type, topic_name):
            return nested(response_type, topic_name), nested(response_type, partition_name)
    raise AssertionError(f"{response_type} has no OffsetFetch topics")


def _fetched(
    response_type: type[Any],
    wanted: Iterable[TopicPartition],
    committed: dict[TopicPartition, Any],
    errors: dict[TopicPartition, ErrorCode],
) -> tuple[Any, ...]:
    topic_type, partition_type = _fetch_types(response_type)
    by_topic: dict[str, list[Any]] = {}
    for tp in wanted:
        found = committed.get(tp)
        error = errors.get(tp, ErrorCode.none)
        by_topic.setdefault(tp[0], []).append(
            build(
                partition_type,
                partition_index=tp[1],
                committed_offset=_NO_OFFSET
                if found is None or error is not ErrorCode.none
                else found.offset,
                committed_leader_epoch=_NO_EPOCH if found is None else found.leader_epoch,
                metadata="" if found is None else found.metadata,
                error_code=error,
            )
        )
    return tuple(build(topic_type, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())


def _with_partition_error(
    response_type: type[Any], request: Any, topics: tuple[Any, ...], error: ErrorCode
) -> tuple[Any, ...]:
    """v1 has no group error: a group-level error is every asked partition's."""
    if error is ErrorCode.none or request.topics is None:
        return topics
    wanted = [(t.name, int(p)) for t in request.topics for p in t.partition_indexes]
    return _fetched(response_type, wanted, {}, dict.fromkeys(wanted, error))
