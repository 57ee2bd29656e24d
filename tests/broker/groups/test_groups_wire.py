"""The group APIs on the wire (``broker.kafka.groups_api``): kio requests of every served version
through a real listener, the answers waiting as Kafka's do, and the group ACLs."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from typing import Any

import pytest
from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i32

from broker.groups.coordinator import GroupCoordinator
from broker.groups.group_config import GroupConfig
from broker.groups.group_state import GroupState
from broker.kafka.groups_api import GroupsApi
from broker.listener.api_versions import DEFAULT_API_VERSIONS, ApiVersionRegistry
from broker.listener.handler import RequestContext
from broker.listener.server import KafkaServer, ListenerSettings
from tests.support.group_requests import (
    DESCRIBE,
    GROUP_KEYS,
    HEARTBEAT,
    JOIN,
    LEAVE,
    LIST,
    SYNC,
    group_request,
    join_member,
)
from tests.support.kafka_wire import WireClient
from tests.support.polling import poll_until
from tiered.kafka.messages import build, nested
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

ALLOW_ALL = AccessControl(StandardAuthorizer(AuthorizerConfig(), AclIndex))
NO_DELAY = GroupConfig(initial_rebalance_delay_ms=0)


class GroupsHandler:
    """The broker's group APIs alone."""

    def __init__(self, access: AccessControl, config: GroupConfig) -> None:
        self.coordinator = GroupCoordinator(
            lambda group: ErrorCode.none, lambda: ("offsets-only",), config
        )
        api = GroupsApi(self.coordinator, access)
        self.join_group = api.join_group
        self.sync_group = api.sync_group
        self.heartbeat = api.heartbeat
        self.leave_group = api.leave_group
        self.describe_groups = api.describe_groups
        self.list_groups = api.list_groups


@contextlib.contextmanager
def listening(
    access: AccessControl = ALLOW_ALL,
    config: GroupConfig = NO_DELAY,
    handler_threads: int = 4,
) -> Iterator[tuple[GroupsHandler, tuple[str, int]]]:
    handler = GroupsHandler(access, config)
    registry = ApiVersionRegistry({k: DEFAULT_API_VERSIONS[k] for k in (18, *GROUP_KEYS)})
    settings = ListenerSettings(name="PLAINTEXT", handler_threads=handler_threads)
    server = KafkaServer(handler, settings, registry)
    server.start()
    try:
        yield handler, server.address
    finally:
        server.stop()
        handler.coordinator.close()


@pytest.fixture(scope="module")
def address() -> Iterator[tuple[str, int]]:
    with listening() as (_, a):
        yield a


@contextlib.contextmanager
def client(address: tuple[str, int]) -> Iterator[WireClient]:
    wire = WireClient(address)
    try:
        yield wire
    finally:
        wire.close()


@pytest.mark.parametrize("join_version", range(10))
def test_one_member_through_every_join_version(address: tuple[str, int], join_version: int) -> None:
    group = f"g-join-{join_version}"
    sync_version = min(join_version, 5)
    with client(address) as wire:
        if join_version >= 4:
            first = wire.call(group_request(JOIN, join_version, group_id=group))
            assert first.error_code == ErrorCode.member_id_required and first.member_id
        joined = join_member(wire, join_version, group)
        assert joined.error_code == ErrorCode.none
        assert joined.leader == joined.member_id and joined.generation_id == 1
        assert joined.protocol_name == "range"
        assert [m.metadata for m in joined.members] == [b"sub"]
        synced = wire.call(
            group_request(
                SYNC,
                sync_version,
                group_id=group,
                generation_id=joined.generation_id,
                member_id=joined.member_id,
                protocol_type="consumer",
                protocol_name="range",
                assignments=((joined.member_id, b"all-partitions"),),
            )
        )
        assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"all-partitions")
        beat = wire.call(
            group_request(
                HEARTBEAT,
                min(join_version, 4),
                group_id=group,
                generation_id=joined.generation_id,
                member_id=joined.member_id,
            )
        )
        assert beat.error_code == ErrorCode.none


def test_join_waits_for_the_others_without_holding_the_connection_pool(
    address: tuple[str, int],
) -> None:
    group = "g-two"
    with client(address) as first, client(address) as second:
        a = join_member(first, 5, group)  # alone: the group completes at once (no initial delay)
        assert a.error_code == ErrorCode.none
        # A second member: the first must rejoin before the second gets its answer.
        b_first = second.call(group_request(JOIN, 5, group_id=group))
        second.send(group_request(JOIN, 5, group_id=group, member_id=b_first.member_id), 7)
        # The second join is on another connection: the rebalance starts once it is handled.
        poll_until(
            lambda: (
                first.call(
                    group_request(
                        HEARTBEAT,
                        4,
                        group_id=group,
                        generation_id=a.generation_id,
                        member_id=a.member_id,
                    )
                ).error_code
                == ErrorCode.rebalance_in_progress
            ),
            what="the first member's heartbeat answered REBALANCE_IN_PROGRESS",
        )
        again = first.call(group_request(JOIN, 5, group_id=group, member_id=a.member_id))
        _, b = second.receive(type(again))
        assert again.generation_id == b.generation_id == a.generation_id + 1
        assert {m.member_id for m in again.members} == {a.member_id, b.member_id}
        # The follower's SyncGroup waits for the leader's plan.
        second.send(
            group_request(
                SYNC,
                5,
                group_id=group,
                generation_id=b.generation_id,
                member_id=b.member_id,
                protocol_type="consumer",
                protocol_name="range",
            ),
            8,
        )
        first.call(
            group_request(
                SYNC,
                5,
                group_id=group,
                generation_id=again.generation_id,
                member_id=a.member_id,
                protocol_type="consumer",
                protocol_name="range",
                assignments=((a.member_id, b"p0"), (b.member_id, b"p1")),
            )
        )
        _, b_sync = second.receive(load_response_schema(SYNC, 5))
        assert b_sync.assignment == b"p1"
        # A leaver: the group rebalances at once (v3+ batched answer per member).
        left = second.call(
            group_request(
                LEAVE,
                5,
                group_id=group,
                members=(build(_identity_type(), member_id=b.member_id, reason="done"),),
            )
        )
        assert [m.error_code for m in left.members] == [ErrorCode.none]
        beat = first.call(
            group_request(
                HEARTBEAT,
                4,
                group_id=group,
                generation_id=again.generation_id,
                member_id=a.member_id,
            )
        )
        assert beat.error_code == ErrorCode.rebalance_in_progress


def _identity_type() -> Any:
    return nested(load_request_schema(LEAVE, 5), "MemberIdentity")


@pytest.mark.parametrize("version", [0, 1, 2])
def test_leave_before_v3_names_one_member(address: tuple[str, int], version: int) -> None:
    group = f"g-leave-{version}"
    with client(address) as wire:
        joined = join_member(wire, 3, group)
        unknown = wire.call(group_request(LEAVE, version, group_id=group, member_id="ghost"))
        assert unknown.error_code == ErrorCode.unknown_member_id
        left = wire.call(group_request(LEAVE, version, group_id=group, member_id=joined.member_id))
        assert left.error_code == ErrorCode.none
        listed = wire.call(group_request(LIST, 4, states_filter=("empty",)))
        assert group in {g.group_id for g in listed.groups}


def test_static_member_v5_and_fencing(address: tuple[str, int]) -> None:
    group = "g-static"
    with client(address) as wire:
        first = join_member(wire, 5, group, group_instance_id="i-1")
        wire.call(
            group_request(
                SYNC,
                3,
                group_id=group,
                generation_id=first.generation_id,
                member_id=first.member_id,
                group_instance_id="i-1",
                assignments=((first.member_id, b"mine"),),
            )
        )
        back = join_member(wire, 5, group, group_instance_id="i-1")
        assert back.member_id != first.member_id
        assert back.generation_id == first.generation_id  # no rebalance
        fenced = wire.call(
            group_request(
                HEARTBEAT,
                3,
                group_id=group,
                generation_id=first.generation_id,
                member_id=first.member_id,
                group_instance_id="i-1",
            )
        )
        assert fenced.error_code == ErrorCode.fenced_instance_id


def test_sync_v5_must_name_the_protocol(address: tuple[str, int]) -> None:
    with client(address) as wire:
        answer = wire.call(
            group_request(
                SYNC, 5, group_id="g-x", generation_id=1, member_id="m", protocol_type=None
            )
        )
        assert answer.error_code == ErrorCode.inconsistent_group_protocol


def test_describe_and_list_every_version(address: tuple[str, int]) -> None:
    group = "g-described"
    with client(address) as wire:
        joined = join_member(wire, 5, group)
        wire.call(
            group_request(
                SYNC,
                3,
                group_id=group,
                generation_id=joined.generation_id,
                member_id=joined.member_id,
                assignments=((joined.member_id, b"a"),),
            )
        )
        for version in range(6):
            described = wire.call(
                group_request(
                    DESCRIBE,
                    version,
                    groups=(group, "offsets-only", "nobody"),
                    include_authorized_operations=True,
                )
            )
            by_id = {g.group_id: g for g in described.groups}
            assert by_id[group].group_state == "Stable"
            assert by_id[group].protocol_data == "range"
            (member,) = by_id[group].members
            assert (member.member_id, member.member_assignment) == (joined.member_id, b"a")
            assert member.client_id == "wire-test" and member.client_host == "/127.0.0.1"
            assert by_id["offsets-only"].group_state == "Empty"
            assert by_id["nobody"].group_state == "Dead"
            if version >= 3:
                assert by_id[group].authorized_operations == sum(1 << op for op in (3, 6, 8))
        for version in range(6):
            listed = wire.call(group_request(LIST, version))
            states = {g.group_id: getattr(g, "group_state", None) for g in listed.groups}
            assert group in states and "offsets-only" in states
            if version >= 4:
                assert states[group] == "Stable"
        stable = wire.call(group_request(LIST, 4, states_filter=("STABLE",)))
        assert "offsets-only" not in {g.group_id for g in stable.groups}
        assert not wire.call(group_request(LIST, 4, states_filter=("bogus",))).groups
        assert not wire.call(group_request(LIST, 5, types_filter=("consumer",))).groups


def _acl(operation: AclOperation, resource_type: ResourceType, name: str) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource_type, name),
        AccessControlEntry("User:ANONYMOUS", "*", operation, AclPermissionType.ALLOW),
    )


def test_group_acls() -> None:
    index = AclIndex(
        {
            uuid.uuid4(): b
            for b in (
                _acl(AclOperation.READ, ResourceType.GROUP, "allowed"),
                _acl(AclOperation.DESCRIBE, ResourceType.GROUP, "seen"),
            )
        }
    )
    access = AccessControl(StandardAuthorizer(AuthorizerConfig(enabled=True), lambda: index))
    with listening(access) as (handler, address), client(address) as wire:
        assert join_member(wire, 5, "allowed").error_code == ErrorCode.none
        assert join_member(wire, 5, "denied").error_code == ErrorCode.group_authorization_failed
        assert join_member(wire, 5, "seen").error_code == ErrorCode.group_authorization_failed
        assert handler.coordinator.state_of("denied") is None
        denied = wire.call(
            group_request(HEARTBEAT, 4, group_id="denied", generation_id=1, member_id="m")
        )
        assert denied.error_code == ErrorCode.group_authorization_failed
        left = wire.call(group_request(LEAVE, 1, group_id="denied", member_id="m"))
        assert left.error_code == ErrorCode.group_authorization_failed
        described = wire.call(
            group_request(
                DESCRIBE,
                5,
                groups=("allowed", "denied", "seen"),
                include_authorized_operations=False,
            )
        )
        codes = {g.group_id: g.error_code for g in described.groups}
        assert codes == {
            "allowed": ErrorCode.none,  # Read implies Describe
            "denied": ErrorCode.group_authorization_failed,
            "seen": ErrorCode.none,
        }
        # Without Describe on the cluster, only the groups it may describe are listed.
        listed = wire.call(group_request(LIST, 4))
        assert {g.group_id for g in listed.groups} == {"allowed"}


def test_waiting_joins_hold_no_worker_thread() -> None:
    # One worker thread, and every JoinGroup waits out a long first-rebalance delay: the others
    # are still answered, so the waiting joins hold no thread.
    waiting_delay = GroupConfig(initial_rebalance_delay_ms=600_000)
    with (
        listening(config=waiting_delay, handler_threads=1) as (handler, address),
        client(address) as a,
        client(address) as b,
        client(address) as lister,
    ):
        for wire in (a, b):
            new = wire.call(group_request(JOIN, 5, group_id="g-wait"))
            wire.send(group_request(JOIN, 5, group_id="g-wait", member_id=new.member_id), 9)
        poll_until(
            lambda: len(handler.coordinator.describe(["g-wait"])[0].members) == 2,
            what="both joins to wait",
        )
        listed = lister.call(group_request(LIST, 4))
        states = {g.group_id: g.group_state for g in listed.groups}
        assert states["g-wait"] == "PreparingRebalance"
        assert handler.coordinator.state_of("g-wait") is GroupState.PREPARING_REBALANCE


def test_an_answer_cancelled_by_a_stopping_listener_is_dropped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handler = GroupsHandler(ALLOW_ALL, GroupConfig(initial_rebalance_delay_ms=600_000))
    join = group_request(JOIN, 3, group_id="g-cancel")
    header = load_request_schema(JOIN, 3).__header_schema__(
        request_api_key=i16(JOIN),
        request_api_version=i16(3),
        correlation_id=i32(1),
        client_id="c",
    )
    answer = handler.join_group(join, RequestContext(header, "127.0.0.1:1"))
    assert isinstance(answer, Future) and not answer.done()
    assert answer.cancel()  # the listener stops with the join still waiting
    handler.coordinator.close()  # completes the waiting join: nothing to send it to
    assert "Traceback" not in caplog.text and "exception calling callback" not in caplog.text
