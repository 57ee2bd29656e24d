"""Bad input against a real running cluster, in both metadata modes: over the CLIs (real
subprocesses), over raw gRPC to the controllers' AdminService and the brokers' BrokerService, and
as garbage bytes on the gRPC ports.

Every rejected request must come back as a clear error (the CLIs exit non-zero with ``NAME: message``
on stderr naming the key and the valid values, never a traceback; gRPC answers an error in the
response or an error status), change nothing (the controller's topics, configs, tiered states and
epochs, and each broker's hosted partitions and their persisted assignments, are compared before
and after), and leave every process alive and serving.

One cluster per mode serves the whole module. It fails over once before the topics are created,
so that brokers have seen controller epoch 2 and epoch 1 is a genuinely stale (zombie) epoch.

The tests that change a broker's state work on a topic of their own and put it back afterwards.
"""

from __future__ import annotations

import contextlib
import functools
import os
import random
import socket
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import grpc
import pytest

from broker.assignment_journal import read_entries
from controller.main import MAX_MESSAGE_BYTES as CONTROLLER_MAX_MESSAGE_BYTES
from system_tests.conftest import MODES
from system_tests.harness import TIERED, SystemCluster
from tests.support.batches import batch
from tests.support.cluster import grpc_address
from tests.support.polling import poll_until
from tests.support.processes import DaemonProcess
from tiered.admin import TopicDescription
from tiered.cluster.model import TieredState
from tiered.config import MAX_CONFIG_VALUE_LENGTH, MAX_PARTITIONS, MAX_TOPIC_NAME_LENGTH
from tiered.errors import ErrorCode
from tiered.rpc.v1 import broker_pb2 as pb
from tiered.rpc.v1 import broker_pb2_grpc as pb_grpc
from tiered.rpc.v1 import controller_pb2 as cpb
from tiered.rpc.v1 import controller_pb2_grpc as cpb_grpc
from tiered.rpc.v1 import records_pb2

REPO = Path(__file__).resolve().parents[1]
RPC_TIMEOUT_S = 30.0
CLI_TIMEOUT_S = 60.0
CLI_PARALLELISM = 4
RECORDS_PER_PARTITION = 10
ORDERS = "orders"  # tiered, 2 partitions (one per broker), a few records each
PLAIN = "plain"  # never tiered
EPOCH_VICTIM = "victim-epoch"  # tiered; only the non-positive tiered epoch test touches it
ASSIGN_VICTIM = "victim-assign"  # tiered; only the AssignPartitions config test touches it
TOPICS: dict[str, tuple[int, dict[str, str]]] = {
    ORDERS: (2, dict(TIERED)),
    PLAIN: (1, {}),
    EPOCH_VICTIM: (1, dict(TIERED)),
    ASSIGN_VICTIM: (1, dict(TIERED)),
}
POLICY_KEY = "remote.log.disable.policy"
ENABLE_KEY = "remote.storage.enable"


# ----------------------------------------------------------------------------- the cluster


def _fail_over(cluster: SystemCluster) -> None:
    """The first controller resigns (SIGTERM), the standby takes over with controller epoch 2,
    and the first one comes back as the standby."""
    first, second = cluster.controllers
    assert first.terminate() == 0
    second.wait_for_line("Active as controller")
    first.start()
    cluster.wait_for_live_brokers(set(cluster.brokers))


def _wait_hosted(cluster: SystemCluster, name: str) -> TopicDescription:
    """Waits until each partition's leader hosts it as the controller has the topic: the same
    configs and tiered epoch persisted, copying exactly when tiering is enabled. Then nothing the
    controller still owes the brokers can change their state during a later comparison."""
    topic = cluster.admin.describe_topic(name, include_partition_state=False)
    copying = topic.configs.get(ENABLE_KEY) == "true"
    for p in topic.partitions:

        def settled(p: int = p.partition, leader: int = p.leader) -> bool:
            d = cluster.log_dirs(leader).get((topic.topic_id, p))
            persisted = _assignments(cluster, leader).get((str(topic.topic_id), p), {})
            return (
                d is not None
                and d.copying == copying
                and persisted.get("configs") == topic.configs
                and persisted.get("tiered_epoch") == topic.tiered_epoch
            )

        poll_until(settled, timeout=30, what=f"{name}-{p.partition} to be hosted as configured")
    return topic


@pytest.fixture(scope="module", params=MODES)
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SystemCluster]:
    mode = request.param
    c = SystemCluster(tmp_path_factory.mktemp(f"bad-input-{mode}"), mode)
    try:
        c.start()
        _fail_over(c)
        for name, (partitions, configs) in TOPICS.items():
            c.admin.create_topic(name, partitions, dict(configs))
        epoch = c.admin.describe_cluster().controller_epoch
        assert epoch == 2, epoch
        orders = _wait_hosted(c, ORDERS)
        assert {p.leader for p in orders.partitions} == set(c.brokers)
        for name in TOPICS:
            _wait_hosted(c, name)
        for broker in c.brokers.values():  # each has heard from the new controller
            broker.wait_for_line(f"Controller epoch is now {epoch}")
        for p in range(len(orders.partitions)):
            assert c.produce_acked(orders, p, RECORDS_PER_PARTITION)
    except BaseException:
        print(c.dump_logs())
        c.close()
        raise
    try:
        yield c
    finally:
        c.close()


@pytest.fixture(autouse=True)
def _logs_on_failure(request: pytest.FixtureRequest, cluster: SystemCluster) -> Iterator[None]:
    yield
    report = getattr(request.node, "report_call", None)
    if report is not None and report.failed:
        print(cluster.dump_logs())


# ----------------------------------------------------------------------------- nothing changed


@dataclass(frozen=True)
class ClusterState:
    """What a rejected request must not change."""

    # name -> (topic id, tiered state, tiered epoch, configs), as the active controller has them
    topics: dict[str, tuple[uuid.UUID, TieredState, int, dict[str, str]]]
    # broker -> (topic id, partition) -> (tiered epoch, copying, remote fetch, log start, log end)
    log_dirs: dict[int, dict[tuple[uuid.UUID, int], tuple[int, bool, bool, int, int]]] = field(
        default_factory=dict
    )
    # broker -> (topic id, partition) -> what it persisted (broker.assignment_journal)
    assignments: dict[int, dict[tuple[str, int], dict[str, Any]]] = field(default_factory=dict)


def _assignments(cluster: SystemCluster, broker_id: int) -> dict[tuple[str, int], dict[str, Any]]:
    entries = read_entries(Path(cluster.brokers[broker_id].properties["log.dirs"]))
    return {(e["topic_id"], e["partition"]): e for e in entries}


def cluster_state(cluster: SystemCluster, *, brokers: bool = True) -> ClusterState:
    topics = {
        t.name: (t.topic_id, t.tiered_state, t.tiered_epoch, dict(t.configs))
        for t in cluster.admin.describe_topics(include_partition_state=False)
    }
    if not brokers:
        return ClusterState(topics)
    log_dirs = {
        b: {
            key: (
                d.tiered_epoch,
                d.copying,
                d.remote_fetch_enabled,
                d.offsets.log_start_offset,
                d.offsets.log_end_offset,
            )
            for key, d in cluster.log_dirs(b).items()
        }
        for b in cluster.brokers
    }
    return ClusterState(topics, log_dirs, {b: _assignments(cluster, b) for b in cluster.brokers})


def assert_alive(cluster: SystemCluster) -> None:
    dead = [p.config.name for p in [*cluster.controllers, *cluster.brokers.values()] if not p.alive]
    assert not dead, f"processes died: {dead}"


@contextlib.contextmanager
def nothing_changes(cluster: SystemCluster, *, brokers: bool = True) -> Iterator[ClusterState]:
    before = cluster_state(cluster, brokers=brokers)
    yield before
    assert_alive(cluster)
    assert cluster_state(cluster, brokers=brokers) == before


# ----------------------------------------------------------------------------- CLI


@dataclass(frozen=True)
class CliCase:
    """One CLI run: ``error`` is the error name(s) expected on stderr (exit 1), or None for a
    usage error (argparse, exit 2); every fragment must be in that error's line."""

    id: str
    tool: str  # a module of cli
    args: tuple[str, ...]
    error: str | tuple[str, ...] | None
    fragments: tuple[str, ...] = ()
    stdin: str | None = None
    via_broker: bool = False  # --bootstrap-server names a broker (which forwards to the controller)


def run_cli(
    tool: str, bootstrap: str, *args: str, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", f"cli.{tool}", "--bootstrap-server", bootstrap, *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=CLI_TIMEOUT_S,
        check=False,
    )


def cli_problem(case: CliCase, result: subprocess.CompletedProcess[str]) -> str | None:
    """What is wrong with a run that should have failed cleanly, or None."""
    shown = f"exit {result.returncode}, stdout {result.stdout!r}, stderr {result.stderr!r}"
    if "Traceback" in result.stderr:
        return f"a traceback: {shown}"
    if case.error is None:
        if result.returncode != 2 or "usage:" not in result.stderr:
            return f"expected a usage error (exit 2): {shown}"
        lines = [line for line in result.stderr.splitlines() if ": error: " in line]
    else:
        names = (case.error,) if isinstance(case.error, str) else case.error
        if result.returncode != 1:
            return f"expected exit 1 with one of {names}: {shown}"
        lines = [line for line in result.stderr.splitlines() if line.split(": ", 1)[0] in names]
        if result.stdout:
            return f"printed on stdout although it failed: {shown}"
    if len(lines) != 1:
        return f"expected one error line: {shown}"
    missing = [f for f in case.fragments if f not in lines[0]]
    if missing:
        return f"the error does not name {missing}: {lines[0]!r}"
    return None


def broker_address(cluster: SystemCluster, broker_id: int) -> str:
    return grpc_address(cluster.brokers[broker_id].properties)


def run_cli_cases(cluster: SystemCluster, cases: Sequence[CliCase]) -> None:
    """Runs the cases (a few at a time), then reports every case that did not fail cleanly."""

    def run(case: CliCase) -> subprocess.CompletedProcess[str]:
        bootstrap = broker_address(cluster, 1) if case.via_broker else cluster.bootstrap
        return run_cli(case.tool, bootstrap, *case.args, stdin=case.stdin)

    with ThreadPoolExecutor(CLI_PARALLELISM) as pool:
        results = list(pool.map(run, cases))
    problems = [
        f"{case.id}: {problem}"
        for case, result in zip(cases, results, strict=True)
        if (problem := cli_problem(case, result)) is not None
    ]
    assert not problems, "\n".join(problems)


def alter(topic: str, *args: str) -> tuple[str, ...]:
    return ("--alter", "--entity-type", "topics", "--entity-name", topic, *args)


def test_configs_cli_rejects_bad_values_and_applies_nothing(cluster: SystemCluster) -> None:
    too_long = MAX_CONFIG_VALUE_LENGTH + 1
    cases = [
        CliCase(
            "policy-erase",
            "configs",
            alter(ORDERS, "--add-config", f"{POLICY_KEY}=erase"),
            "INVALID_REQUEST",
            (POLICY_KEY, "'erase'", "valid values: retain, delete"),
        ),
        CliCase(
            "policy-erase-through-a-broker",
            "configs",
            alter(ORDERS, "--add-config", f"{POLICY_KEY}=erase"),
            "INVALID_REQUEST",
            (POLICY_KEY, "'erase'", "valid values: retain, delete"),
            via_broker=True,
        ),
        CliCase(
            "enable-yes-please",
            "configs",
            alter(ORDERS, "--add-config", f"{ENABLE_KEY}=yes please"),
            "INVALID_REQUEST",
            (ENABLE_KEY, "'yes please'", "valid values: true, false"),
        ),
        CliCase(
            "unknown-key",
            "configs",
            alter(ORDERS, "--add-config", "no.such.config=1"),
            "INVALID_CONFIG",
            ("unknown topic config 'no.such.config'", "known: ", POLICY_KEY),
        ),
        CliCase(
            "value-one-over-the-limit",
            "configs",
            alter(ORDERS, "--add-config", f"retention.ms={'9' * too_long}"),
            "INVALID_CONFIG",
            (f"retention.ms is {too_long} characters long", f"limit is {MAX_CONFIG_VALUE_LENGTH}"),
        ),
        CliCase(
            # the valid half is a disable: it must not start one
            "valid-disable-with-an-invalid-key",
            "configs",
            alter(ORDERS, "--add-config", f"{ENABLE_KEY}=false,segment.bytes=abc"),
            "INVALID_CONFIG",
            ("segment.bytes='abc'", "an integer from 14 to"),
        ),
        CliCase(
            "valid-retention-with-an-invalid-policy",
            "configs",
            alter(ORDERS, "--add-config", f"retention.ms=1000,{POLICY_KEY}=erase"),
            "INVALID_REQUEST",
            (POLICY_KEY, "valid values: retain, delete"),
        ),
        CliCase(
            "compact-a-tiered-topic",
            "configs",
            alter(ORDERS, "--add-config", "cleanup.policy=compact"),
            "INVALID_CONFIG",
            ("cleanup.policy='compact'", "compacted"),
        ),
        CliCase(
            "entry-without-a-value",
            "configs",
            alter(ORDERS, "--add-config", "retention.ms"),
            "INVALID_REQUEST",
            ("'retention.ms'", "key=value"),
        ),
        CliCase(
            "alter-an-unknown-topic",
            "configs",
            alter("no-such-topic", "--add-config", "retention.ms=1000"),
            "UNKNOWN_TOPIC_OR_PARTITION",
            ("'no-such-topic'",),
        ),
        CliCase(
            "describe-an-unknown-topic",
            "configs",
            ("--describe", "--entity-type", "topics", "--entity-name", "no-such-topic"),
            "UNKNOWN_TOPIC_OR_PARTITION",
            ("'no-such-topic'",),
        ),
        CliCase(
            "describe-an-unknown-topic-with-tiered-topics",
            "topics",
            ("--describe", "--topic", "no-such-topic"),
            "UNKNOWN_TOPIC_OR_PARTITION",
            ("'no-such-topic'",),
        ),
    ]
    with nothing_changes(cluster):
        run_cli_cases(cluster, cases)


def test_topics_cli_rejects_bad_names_counts_and_configs(cluster: SystemCluster) -> None:
    def create(topic: str, partitions: str, *configs: str) -> tuple[str, ...]:
        return ("--create", "--topic", topic, "--partitions", partitions, *configs)

    too_long = "t" * (MAX_TOPIC_NAME_LENGTH + 1)
    cases = [
        CliCase(
            "illegal-characters",
            "topics",
            create("bad name!", "1"),
            "INVALID_TOPIC_EXCEPTION",
            ("'bad name!'", "illegal characters", "valid characters"),
        ),
        CliCase(
            "dot-dot",
            "topics",
            create("..", "1"),
            "INVALID_TOPIC_EXCEPTION",
            ("'..'", "not allowed"),
        ),
        CliCase(
            "name-too-long",
            "topics",
            create(too_long, "1"),
            "INVALID_TOPIC_EXCEPTION",
            (f"{MAX_TOPIC_NAME_LENGTH + 1} characters long", f"limit is {MAX_TOPIC_NAME_LENGTH}"),
        ),
        CliCase(
            "zero-partitions",
            "topics",
            create("fresh", "0"),
            ("INVALID_REQUEST", "INVALID_PARTITIONS"),
            ("--partitions", "at least 1"),
        ),
        CliCase(
            "too-many-partitions",
            "topics",
            create("fresh", str(MAX_PARTITIONS + 1)),
            "INVALID_PARTITIONS",
            (str(MAX_PARTITIONS + 1), f"from 1 to {MAX_PARTITIONS}"),
        ),
        CliCase(
            "partitions-not-a-number",
            "topics",
            create("fresh", "abc"),
            None,
            ("--partitions", "'abc'"),
        ),
        CliCase(
            "bad-policy",
            "topics",
            create("fresh", "1", "--config", f"{POLICY_KEY}=erase"),
            "INVALID_REQUEST",
            (POLICY_KEY, "valid values: retain, delete"),
        ),
        CliCase(
            "tiered-and-compacted",
            "topics",
            create(
                "fresh", "1", "--config", f"{ENABLE_KEY}=true", "--config", "cleanup.policy=compact"
            ),
            "INVALID_CONFIG",
            ("compacted",),
        ),
        CliCase(
            "already-exists",
            "topics",
            create(ORDERS, "1"),
            "TOPIC_ALREADY_EXISTS",
            (f"'{ORDERS}'",),
        ),
    ]
    with nothing_changes(cluster):
        run_cli_cases(cluster, cases)


@pytest.mark.parametrize("partitions", [2**31, 10**20])
def test_topics_cli_rejects_a_partition_count_beyond_int32_cleanly(
    cluster: SystemCluster, partitions: int
) -> None:
    case = CliCase(
        "partitions-beyond-int32",
        "topics",
        ("--create", "--topic", "fresh", "--partitions", str(partitions)),
        ("INVALID_PARTITIONS", "INVALID_REQUEST"),
        (str(partitions),),
    )
    with nothing_changes(cluster, brokers=False):
        run_cli_cases(cluster, [case])


def test_configs_cli_rejects_deleting_an_unknown_config_key(cluster: SystemCluster) -> None:
    case = CliCase(
        "delete-an-unknown-key",
        "configs",
        alter(ORDERS, "--delete-config", "no.such.config"),
        "INVALID_CONFIG",
        ("no.such.config",),
    )
    with nothing_changes(cluster, brokers=False):
        run_cli_cases(cluster, [case])


def test_console_clients_reject_bad_partitions_and_offsets(cluster: SystemCluster) -> None:
    def consume(partition: str, offset: str, topic: str = ORDERS) -> tuple[str, ...]:
        return ("--topic", topic, "--partition", partition, "--offset", offset)

    valid = f"valid: 0 to {TOPICS[ORDERS][0] - 1}"
    cases = [
        CliCase(
            "partition-beyond-the-topic",
            "consumer",
            consume("99", "0"),
            "UNKNOWN_TOPIC_OR_PARTITION",
            ("no partition 99", valid),
        ),
        CliCase(
            "negative-partition",
            "consumer",
            consume("-1", "0"),
            "UNKNOWN_TOPIC_OR_PARTITION",
            ("no partition -1", valid),
        ),
        CliCase(
            "negative-offset",
            "consumer",
            consume("0", "-5"),
            "INVALID_REQUEST",
            ("--offset", "negative"),
        ),
        CliCase(
            "offset-not-a-number",
            "consumer",
            consume("0", "abc"),
            "INVALID_REQUEST",
            ("'abc'", "'earliest' or 'latest'"),
        ),
        CliCase(
            "offset-beyond-the-log-end",
            "consumer",
            consume("0", "1000000"),
            "OFFSET_OUT_OF_RANGE",
            ("offset 1000000", f"0 (log start) to {RECORDS_PER_PARTITION} (log end)"),
        ),
        CliCase(
            "unknown-topic",
            "consumer",
            consume("0", "0", topic="no-such-topic"),
            "UNKNOWN_TOPIC_OR_PARTITION",
            ("'no-such-topic'",),
        ),
        CliCase(
            "produce-to-a-partition-beyond-the-topic",
            "producer",
            ("--topic", ORDERS, "--partition", "99"),
            "UNKNOWN_TOPIC_OR_PARTITION",
            ("no partition 99", valid),
            stdin="one\ntwo\n",
        ),
    ]
    with nothing_changes(cluster):
        run_cli_cases(cluster, cases)


def test_configs_cli_rejects_a_disable_or_enable_during_disabling(cluster: SystemCluster) -> None:
    name = "stuck"
    cluster.admin.create_topic(name, 1, dict(TIERED))
    topic = _wait_hosted(cluster, name)
    victim = cluster.brokers[topic.partitions[0].leader]
    victim.pause()  # it cannot ack: the topic stays DISABLING
    try:
        result = cluster.admin.incremental_alter_configs(name, {ENABLE_KEY: "false"})
        assert (result.tiered_state, result.tiered_epoch) == (TieredState.DISABLING, 1)
        in_progress = ("TIERED_STORAGE_DISABLEMENT_IN_PROGRESS", (f"'{name}'", "tiered epoch 1"))
        cases = [
            CliCase(case_id, "configs", alter(name, "--add-config", config), *in_progress)
            for case_id, config in [
                ("disable-again", f"{ENABLE_KEY}=false"),
                ("enable", f"{ENABLE_KEY}=true"),
                ("change-the-policy", f"{POLICY_KEY}=delete"),
            ]
        ]
        # The paused broker cannot answer DescribeLogDirs: compare the controller's view only.
        with nothing_changes(cluster, brokers=False):
            run_cli_cases(cluster, cases)
        stuck = cluster.admin.describe_topic(name, include_partition_state=False)
        assert stuck.tiered_state is TieredState.DISABLING and stuck.disable_acks_owed == 1
    finally:
        victim.resume()
    done = cluster.wait_for_state(name, TieredState.DISABLED)
    assert done.tiered_epoch == 1 and done.configs.get(POLICY_KEY) is None
    _wait_hosted(cluster, name)  # the broker also took the new configs: nothing left in flight


# ----------------------------------------------------------------------------- raw gRPC


def _error_problem(error: pb.Error, code: ErrorCode, fragments: Sequence[str]) -> str | None:
    if (error.code, error.name) != (int(code), code.name):
        return f"expected {code.name}, got {error.name or error.code}: {error.message!r}"
    missing = [f for f in fragments if f not in error.message]
    return f"the error does not name {missing}: {error.message!r}" if missing else None


def assert_error(error: pb.Error, code: ErrorCode, *fragments: str) -> None:
    problem = _error_problem(error, code, fragments)
    assert problem is None, problem


def assert_status(call: Callable[[], object], status: grpc.StatusCode, *fragments: str) -> str:
    """The call fails with ``status`` whose details name every fragment; returns the details."""
    with pytest.raises(grpc.RpcError) as raised:
        call()
    failed = cast(grpc.Call, raised.value)
    details = failed.details() or ""
    assert failed.code() == status, (failed.code(), details)
    for fragment in fragments:
        assert fragment in details, details
    return details


def _tp(topic: TopicDescription, partition: int) -> records_pb2.TopicIdPartition:
    return records_pb2.TopicIdPartition(
        topic_id=topic.topic_id.bytes, topic=topic.name, partition=partition
    )


def _disable_entry(
    partition: records_pb2.TopicIdPartition, tiered_epoch: int, policy: str
) -> pb.DisableRemoteTopicEntry:
    return pb.DisableRemoteTopicEntry(partition=partition, tiered_epoch=tiered_epoch, policy=policy)


def raw_call(channel: grpc.Channel, path: str) -> grpc.UnaryUnaryMultiCallable[bytes, bytes]:
    """A method that sends the request bytes as they are and returns the answer's bytes."""
    return channel.unary_unary(path, request_serializer=None, response_deserializer=None)


def admin_stub(channel: grpc.Channel) -> cpb_grpc.AdminServiceStub:
    return cpb_grpc.AdminServiceStub(channel)  # type: ignore[no-untyped-call]


def broker_stub(channel: grpc.Channel) -> pb_grpc.BrokerServiceStub:
    return pb_grpc.BrokerServiceStub(channel)  # type: ignore[no-untyped-call]


def _admin_address(cluster: SystemCluster, via: str) -> str:
    if via == "broker":
        return broker_address(cluster, 2)
    return cluster.admin.describe_cluster().controller_endpoint


@pytest.mark.parametrize("via", ["controller", "broker"])
def test_admin_service_rejects_invalid_config_requests(cluster: SystemCluster, via: str) -> None:
    huge = "1" * (1024 * 1024)
    with nothing_changes(cluster), grpc.insecure_channel(_admin_address(cluster, via)) as channel:
        admin = admin_stub(channel)

        def incremental(topic: str = ORDERS, **kwargs: Any) -> cpb.AlterConfigsResponse:
            request = cpb.IncrementalAlterConfigsRequest(topic=topic, **kwargs)
            response: cpb.AlterConfigsResponse = admin.IncrementalAlterConfigs(
                request, timeout=RPC_TIMEOUT_S
            )
            return response

        assert_error(
            incremental(set={POLICY_KEY: "bogus"}).error,
            ErrorCode.INVALID_REQUEST,
            POLICY_KEY,
            "'bogus'",
            "valid values: retain, delete",
        )
        assert_error(
            incremental(set={ENABLE_KEY: "false", "retention.ms": huge}).error,
            ErrorCode.INVALID_CONFIG,
            f"retention.ms is {len(huge)} characters long",
            f"limit is {MAX_CONFIG_VALUE_LENGTH}",
        )
        assert_error(  # a disable whose other half is invalid: no disable
            incremental(set={ENABLE_KEY: "false", "segment.bytes": "-1"}).error,
            ErrorCode.INVALID_CONFIG,
            "segment.bytes='-1'",
        )
        assert_error(
            incremental(set={ENABLE_KEY: "false", POLICY_KEY: "bogus"}, validate_only=True).error,
            ErrorCode.INVALID_REQUEST,
            POLICY_KEY,
        )
        assert_error(
            incremental(set={"": "x"}).error, ErrorCode.INVALID_CONFIG, "unknown topic config ''"
        )
        assert_error(
            incremental(topic="", set={"retention.ms": "1"}).error,
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        )
        assert_error(
            admin.AlterConfigs(
                cpb.AlterConfigsRequest(
                    topic=ORDERS, configs={ENABLE_KEY: "true", "cleanup.policy": "compact"}
                ),
                timeout=RPC_TIMEOUT_S,
            ).error,
            ErrorCode.INVALID_CONFIG,
            "compacted",
        )
        assert_error(
            admin.AlterConfigs(
                cpb.AlterConfigsRequest(topic=PLAIN, configs={"retention.ms": "soon"}),
                timeout=RPC_TIMEOUT_S,
            ).error,
            ErrorCode.INVALID_CONFIG,
            "retention.ms='soon'",
        )


@pytest.mark.parametrize("via", ["controller", "broker"])
def test_admin_service_rejects_invalid_topic_requests(cluster: SystemCluster, via: str) -> None:
    bad_topics = [
        (cpb.NewTopic(name="a/b", partitions=1), ErrorCode.INVALID_TOPIC_EXCEPTION, "'/'"),
        (cpb.NewTopic(name="", partitions=1), ErrorCode.INVALID_TOPIC_EXCEPTION, "empty"),
        (cpb.NewTopic(name="fresh-1", partitions=-4), ErrorCode.INVALID_PARTITIONS, "count -4"),
        (cpb.NewTopic(name="fresh-2", partitions=0), ErrorCode.INVALID_PARTITIONS, "count 0 "),
        (
            cpb.NewTopic(name="fresh-3", partitions=1, configs={POLICY_KEY: "bogus"}),
            ErrorCode.INVALID_REQUEST,
            "valid values: retain, delete",
        ),
        (
            cpb.NewTopic(name="fresh-4", partitions=1, configs={"x" * 10_000: "1"}),
            ErrorCode.INVALID_CONFIG,
            "unknown topic config",
        ),
        (cpb.NewTopic(name=ORDERS, partitions=1), ErrorCode.TOPIC_ALREADY_EXISTS, ORDERS),
    ]
    with nothing_changes(cluster), grpc.insecure_channel(_admin_address(cluster, via)) as channel:
        admin = admin_stub(channel)
        created = admin.CreateTopics(
            cpb.CreateTopicsRequest(topics=[t for t, _, _ in bad_topics]), timeout=RPC_TIMEOUT_S
        )
        assert len(created.results) == len(bad_topics)
        for result, (_, code, fragment) in zip(created.results, bad_topics, strict=True):
            assert_error(result.error, code, fragment)
        deleted = admin.DeleteTopics(
            cpb.DeleteTopicsRequest(names=["no-such-topic", ""]), timeout=RPC_TIMEOUT_S
        )
        assert [r.error.name for r in deleted.results] == ["UNKNOWN_TOPIC_OR_PARTITION"] * 2
        described = admin.DescribeTopics(
            cpb.DescribeTopicsRequest(names=["no-such-topic"], include_partition_state=True),
            timeout=RPC_TIMEOUT_S,
        )
        assert_error(
            described.topics[0].error, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "'no-such-topic'"
        )
        configs = admin.DescribeConfigs(
            cpb.DescribeConfigsRequest(topic="no-such-topic"), timeout=RPC_TIMEOUT_S
        )
        assert_error(configs.error, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "'no-such-topic'")


def test_broker_service_rejects_invalid_requests(cluster: SystemCluster) -> None:
    orders = cluster.admin.describe_topic(ORDERS, include_partition_state=False)
    leader = orders.partitions[0].leader
    tp = _tp(orders, 0)
    stub = cluster.broker_stub(leader)
    short_id = records_pb2.TopicIdPartition(topic_id=b"abc", topic=ORDERS, partition=0)
    random_id = records_pb2.TopicIdPartition(topic_id=os.urandom(16), topic=ORDERS, partition=0)
    with nothing_changes(cluster):
        # DisableRemoteTopic (controller epoch 0: a local call, not fenced)
        response = stub.DisableRemoteTopic(
            pb.DisableRemoteTopicRequest(
                entries=[_disable_entry(tp, 1, "bogus"), _disable_entry(random_id, 1, "bogus")]
            ),
            timeout=RPC_TIMEOUT_S,
        )
        assert_error(response.error, ErrorCode.NONE)
        assert len(response.errors) == 2
        for error in response.errors:
            assert_error(
                error, ErrorCode.INVALID_REQUEST, POLICY_KEY, "valid values: retain, delete"
            )
        # one entry's failure does not fail the others; a partition not hosted is acked as
        # having nothing to stop (docs/design.md §2)
        response = stub.DisableRemoteTopic(
            pb.DisableRemoteTopicRequest(
                entries=[_disable_entry(tp, 1, "erase"), _disable_entry(random_id, 1, "retain")]
            ),
            timeout=RPC_TIMEOUT_S,
        )
        assert [e.name for e in response.errors] == ["INVALID_REQUEST", "NONE"]
        response = stub.DisableRemoteTopic(pb.DisableRemoteTopicRequest(), timeout=RPC_TIMEOUT_S)
        assert_error(response.error, ErrorCode.NONE)
        assert not response.errors
        assert_status(
            lambda: stub.DisableRemoteTopic(
                pb.DisableRemoteTopicRequest(entries=[_disable_entry(short_id, 1, "retain")]),
                timeout=RPC_TIMEOUT_S,
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "INVALID_REQUEST",
            "16 bytes",
        )
        # AssignPartitions with garbage configs for a hosted partition: the codes the controller
        # gives the same configs (one topic-config definition)
        for configs, code, fragment in [
            ({"segment.bytes": "abc"}, ErrorCode.INVALID_CONFIG, "segment.bytes='abc'"),
            ({ENABLE_KEY: "yes please"}, ErrorCode.INVALID_REQUEST, "'yes please'"),
            (
                {ENABLE_KEY: "true", "retention.ms": "-7"},
                ErrorCode.INVALID_CONFIG,
                "retention.ms='-7'",
            ),
        ]:
            assigned = stub.AssignPartitions(
                pb.AssignPartitionsRequest(
                    partitions=[pb.PartitionAssignment(partition=tp, configs=configs)]
                ),
                timeout=RPC_TIMEOUT_S,
            )
            assert len(assigned.errors) == 1
            assert_error(assigned.errors[0], code, fragment)
        assert_status(
            lambda: stub.AssignPartitions(
                pb.AssignPartitionsRequest(
                    partitions=[
                        pb.PartitionAssignment(
                            partition=records_pb2.TopicIdPartition(
                                topic_id=orders.topic_id.bytes, topic=ORDERS, partition=-1
                            )
                        )
                    ]
                ),
                timeout=RPC_TIMEOUT_S,
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "partition must be >= 0",
        )
        # DisableRemoteTopic is the one way to stop tiering: no unfenced StopPartitions beside it
        with grpc.insecure_channel(broker_address(cluster, leader)) as channel:
            assert_status(
                functools.partial(
                    raw_call(channel, "/tiered.v1.BrokerService/StopPartitions"),
                    b"",
                    timeout=RPC_TIMEOUT_S,
                ),
                grpc.StatusCode.UNIMPLEMENTED,
            )
        # the data path
        negative = records_pb2.TopicIdPartition(
            topic_id=orders.topic_id.bytes, topic=ORDERS, partition=-1
        )
        produced = stub.Produce(
            pb.ProduceRequest(partition=negative, records=batch(None, b"x")),
            timeout=RPC_TIMEOUT_S,
        )
        assert_error(produced.error, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "partition -1")
        produced = stub.Produce(pb.ProduceRequest(partition=tp), timeout=RPC_TIMEOUT_S)
        assert_error(produced.error, ErrorCode.INVALID_REQUEST, "needs records")
        fetched = stub.Fetch(pb.FetchRequest(partition=tp, offset=-3), timeout=RPC_TIMEOUT_S)
        assert_error(fetched.error, ErrorCode.OFFSET_OUT_OF_RANGE, "offset -3")
        assert_status(
            lambda: stub.Fetch(
                pb.FetchRequest(partition=tp, offset=0, max_bytes=-1), timeout=RPC_TIMEOUT_S
            ),
            grpc.StatusCode.INVALID_ARGUMENT,
            "max_bytes",
        )
        listed = stub.ListOffsets(pb.ListOffsetsRequest(partition=random_id), timeout=RPC_TIMEOUT_S)
        assert_error(listed.error, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)


def test_a_stale_controller_epoch_is_rejected_and_nothing_applied(cluster: SystemCluster) -> None:
    epoch = cluster.admin.describe_cluster().controller_epoch
    orders = cluster.admin.describe_topic(ORDERS, include_partition_state=False)
    with nothing_changes(cluster):
        for p, partition in enumerate(orders.partitions):
            stub = cluster.broker_stub(partition.leader)
            tp = _tp(orders, p)
            for stale in (epoch - 1, -1):  # the zombie controller's epoch, and a nonsense one
                why = f"controller epoch {stale} is older than {epoch}"
                disabled = stub.DisableRemoteTopic(
                    pb.DisableRemoteTopicRequest(
                        controller_epoch=stale,
                        entries=[_disable_entry(tp, orders.tiered_epoch + 1, "delete")],
                    ),
                    timeout=RPC_TIMEOUT_S,
                )
                assert_error(disabled.error, ErrorCode.STALE_CONTROLLER_EPOCH, why)
                assert not disabled.errors
                assigned = stub.AssignPartitions(
                    pb.AssignPartitionsRequest(
                        controller_epoch=stale,
                        partitions=[
                            pb.PartitionAssignment(
                                partition=tp, configs={ENABLE_KEY: "false"}, tiered_epoch=1
                            )
                        ],
                    ),
                    timeout=RPC_TIMEOUT_S,
                )
                assert len(assigned.errors) == 1
                assert_error(assigned.errors[0], ErrorCode.STALE_CONTROLLER_EPOCH, why)
                removed = stub.RemovePartitions(
                    pb.RemovePartitionsRequest(controller_epoch=stale, partitions=[tp]),
                    timeout=RPC_TIMEOUT_S,
                )
                assert len(removed.errors) == 1
                assert_error(removed.errors[0], ErrorCode.STALE_CONTROLLER_EPOCH, why)


def test_disable_remote_topic_rejects_a_tiered_epoch_below_one(cluster: SystemCluster) -> None:
    topic = cluster.admin.describe_topic(EPOCH_VICTIM, include_partition_state=False)
    stub = cluster.broker_stub(topic.partitions[0].leader)
    tp = _tp(topic, 0)
    try:
        with nothing_changes(cluster):
            response = stub.DisableRemoteTopic(
                pb.DisableRemoteTopicRequest(entries=[_disable_entry(tp, -1, "retain")]),
                timeout=RPC_TIMEOUT_S,
            )
            assert len(response.errors) == 1
            assert_error(response.errors[0], ErrorCode.INVALID_REQUEST, "tiered epoch")
    finally:  # what the controller would re-send: copying resumes
        stub.AssignPartitions(
            pb.AssignPartitionsRequest(
                partitions=[
                    pb.PartitionAssignment(
                        partition=tp, configs=topic.configs, tiered_epoch=topic.tiered_epoch
                    )
                ]
            ),
            timeout=RPC_TIMEOUT_S,
        )
        _wait_hosted(cluster, EPOCH_VICTIM)


def test_disable_remote_topic_rejects_a_negative_partition(cluster: SystemCluster) -> None:
    orders = cluster.admin.describe_topic(ORDERS, include_partition_state=False)
    stub = cluster.broker_stub(orders.partitions[0].leader)
    negative = records_pb2.TopicIdPartition(
        topic_id=orders.topic_id.bytes, topic=ORDERS, partition=-1
    )
    with nothing_changes(cluster):
        try:
            response = stub.DisableRemoteTopic(
                pb.DisableRemoteTopicRequest(entries=[_disable_entry(negative, 1, "retain")]),
                timeout=RPC_TIMEOUT_S,
            )
        except grpc.RpcError as e:
            assert cast(grpc.Call, e).code() is grpc.StatusCode.INVALID_ARGUMENT
        else:
            assert len(response.errors) == 1
            assert response.errors[0].name in ("INVALID_REQUEST", "UNKNOWN_TOPIC_OR_PARTITION")


def test_assign_partitions_validates_configs_before_applying_them(cluster: SystemCluster) -> None:
    topic = cluster.admin.describe_topic(ASSIGN_VICTIM, include_partition_state=False)
    stub = cluster.broker_stub(topic.partitions[0].leader)
    tp = _tp(topic, 0)

    def assign(configs: dict[str, str]) -> pb.AssignPartitionsResponse:
        response: pb.AssignPartitionsResponse = stub.AssignPartitions(
            pb.AssignPartitionsRequest(
                partitions=[
                    pb.PartitionAssignment(
                        partition=tp, configs=configs, tiered_epoch=topic.tiered_epoch
                    )
                ]
            ),
            timeout=RPC_TIMEOUT_S,
        )
        return response

    try:
        with nothing_changes(cluster):
            problems = []
            for enable in ("false", "true"):
                errors = assign({ENABLE_KEY: enable, POLICY_KEY: "bogus"}).errors
                problem = _error_problem(errors[0], ErrorCode.INVALID_REQUEST, (POLICY_KEY,))
                if problem is not None:
                    problems.append(f"{ENABLE_KEY}={enable}: {problem}")
                persisted = _assignments(cluster, topic.partitions[0].leader)
                configs = persisted[(str(topic.topic_id), 0)]["configs"]
                if configs != topic.configs:
                    problems.append(f"{ENABLE_KEY}={enable}: persisted {configs}")
            assert not problems, problems
    finally:  # what the controller would re-send
        assign(dict(topic.configs))
        _wait_hosted(cluster, ASSIGN_VICTIM)


def test_assign_partitions_rejects_topic_names_that_are_not_valid(cluster: SystemCluster) -> None:
    broker_id = 1
    log_dir = Path(cluster.brokers[broker_id].properties["log.dirs"])
    stub = cluster.broker_stub(broker_id)
    ghosts = [
        records_pb2.TopicIdPartition(topic_id=uuid.uuid4().bytes, topic=name, partition=0)
        for name in ("../escape", "a/b", "", "..")
    ]
    escaped = log_dir.parent / "escape-0"
    try:
        with nothing_changes(cluster):
            try:
                response = stub.AssignPartitions(
                    pb.AssignPartitionsRequest(
                        partitions=[pb.PartitionAssignment(partition=g) for g in ghosts]
                    ),
                    timeout=RPC_TIMEOUT_S,
                )
            except grpc.RpcError as e:
                assert cast(grpc.Call, e).code() is grpc.StatusCode.INVALID_ARGUMENT
            else:
                assert [e.name for e in response.errors] == ["INVALID_TOPIC_EXCEPTION"] * 4
            assert not escaped.exists(), f"{escaped} was created outside {log_dir}"
    finally:  # drop whatever the broker took on
        stub.RemovePartitions(pb.RemovePartitionsRequest(partitions=ghosts), timeout=RPC_TIMEOUT_S)


# ----------------------------------------------------------------------------- malformed messages


PROCESSES = ["controller-0", "controller-1", "broker-1", "broker-2"]


def _peak_rss_kib(daemon: DaemonProcess) -> int:
    assert daemon.process is not None
    status = Path(f"/proc/{daemon.process.pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1])


def _addresses(cluster: SystemCluster) -> dict[str, str]:
    """Every gRPC port: process name (as in PROCESSES) -> host:port."""
    found = {c.config.stem: c.properties["listeners"] for c in cluster.controllers}
    for broker_id in cluster.brokers:
        found[f"broker-{broker_id}"] = broker_address(cluster, broker_id)
    assert sorted(found) == sorted(PROCESSES)
    return found


@pytest.mark.parametrize("process", PROCESSES)
def test_malformed_unknown_and_oversized_messages_get_an_error_status(
    cluster: SystemCluster, process: str
) -> None:
    over_4mib = "1" * (5 * 1024 * 1024)
    alter_request = cpb.IncrementalAlterConfigsRequest(
        topic=ORDERS, set={"retention.ms": over_4mib}
    )
    with nothing_changes(cluster), grpc.insecure_channel(_addresses(cluster)[process]) as channel:
        raw = raw_call(channel, "/tiered.v1.AdminService/IncrementalAlterConfigs")
        # a varint that never ends; a map entry cut short; a topic (field 1) that is not UTF-8
        for body in (b"\xff\xff\xff\xff\x0f", b"\x12\x80", b"\x0a\x02\xff\xfe"):
            assert_status(
                functools.partial(raw, body, timeout=RPC_TIMEOUT_S),
                grpc.StatusCode.INTERNAL,
                "deserializing",
            )
        for path in ("/tiered.v1.AdminService/Nope", "/no.such.Service/Call"):
            assert_status(
                functools.partial(raw_call(channel, path), b"", timeout=RPC_TIMEOUT_S),
                grpc.StatusCode.UNIMPLEMENTED,
            )
        alter_ = functools.partial(
            admin_stub(channel).IncrementalAlterConfigs, alter_request, timeout=RPC_TIMEOUT_S
        )
        if process.startswith("controller"):
            # up to 256 MiB is taken (a metadata snapshot is big): the value itself is too long
            response = alter_()
            if response.error.code != ErrorCode.NOT_CONTROLLER:  # the standby
                assert_error(
                    response.error,
                    ErrorCode.INVALID_CONFIG,
                    f"retention.ms is {len(over_4mib)} characters long",
                )
            # beyond that: refused by its declared size, without buffering it
            daemon = cluster.controllers[PROCESSES.index(process)]
            peak_before = _peak_rss_kib(daemon)
            assert_status(
                functools.partial(raw, bytes(CONTROLLER_MAX_MESSAGE_BYTES + 1), timeout=60),
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                "larger than max",
            )
            assert _peak_rss_kib(daemon) - peak_before < 64 * 1024
            return
        # brokers take messages up to 4 MiB
        assert_status(alter_, grpc.StatusCode.RESOURCE_EXHAUSTED, "larger than max")
        produce = pb.ProduceRequest(
            partition=_tp(cluster.admin.describe_topic(ORDERS, include_partition_state=False), 0),
            records=batch(None, over_4mib.encode()),
        )
        assert_status(
            functools.partial(broker_stub(channel).Produce, produce, timeout=RPC_TIMEOUT_S),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "larger than max",
        )


# ----------------------------------------------------------------------------- garbage bytes

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _h2_frame(
    kind: int, flags: int, stream: int, payload: bytes, length: int | None = None
) -> bytes:
    size = len(payload) if length is None else length
    return size.to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload


def _hpack_literal(name: str, value: str) -> bytes:
    """A literal header field without indexing, new name, no Huffman (RFC 7541 6.2.2)."""
    return b"\x00" + bytes([len(name)]) + name.encode() + bytes([len(value)]) + value.encode()


def _garbage() -> dict[str, bytes]:
    rng = random.Random(950)
    settings = _h2_frame(0x4, 0, 0, b"")
    grpc_headers = b"".join(
        _hpack_literal(k, v)
        for k, v in [
            (":method", "POST"),
            (":scheme", "http"),
            (":path", "/tiered.v1.AdminService/IncrementalAlterConfigs"),
            (":authority", "localhost"),
            ("content-type", "application/grpc"),
            ("te", "trailers"),
        ]
    )
    return {
        "random-bytes": rng.randbytes(64 * 1024),
        "http1-get": b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
        "http1-post": (
            b"POST /tiered.v1.AdminService/DescribeCluster HTTP/1.1\r\nHost: localhost\r\n"
            b"Content-Type: application/grpc\r\nContent-Length: 5\r\n\r\n\x00\x00\x00\x00\x00"
        ),
        "truncated-h2-preface": H2_PREFACE[:11],
        "h2-preface-then-random-frames": H2_PREFACE + settings + rng.randbytes(8 * 1024),
        "h2-frame-declaring-16mib": H2_PREFACE
        + settings
        + _h2_frame(0x0, 0, 1, rng.randbytes(1024), length=(1 << 24) - 1),
        "h2-headers-with-garbage-hpack": H2_PREFACE
        + settings
        + _h2_frame(0x1, 0x4 | 0x1, 1, rng.randbytes(200)),
        "h2-window-overflow": H2_PREFACE
        + settings
        + _h2_frame(0x8, 0, 0, (2**31 - 1).to_bytes(4, "big")) * 2,
        "grpc-message-declaring-300mib": H2_PREFACE
        + settings
        + _h2_frame(0x1, 0x4, 1, grpc_headers)
        + _h2_frame(0x0, 0, 1, b"\x00" + (300 << 20).to_bytes(4, "big") + rng.randbytes(1024)),
    }


def _connect_and_send(address: str, payload: bytes) -> socket.socket:
    host, port = address.rsplit(":", 1)
    sock = socket.create_connection((host, int(port)), timeout=10)
    with contextlib.suppress(OSError):  # the server may hang up before reading it all
        sock.sendall(payload)
    return sock


def _send_and_hang_up(address: str, payload: bytes) -> None:
    """Sends the payload, closes our side and reads whatever the server answers until it closes
    the connection (or 10 s passed)."""
    with _connect_and_send(address, payload) as sock, contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(65536):
            pass


def _h2_answer_on_stream_1(sock: socket.socket) -> tuple[int, int, bytes] | None:
    """Reads the server's HTTP/2 frames until one ends stream 1 (HEADERS with END_STREAM, or
    RST_STREAM) and returns (type, flags, payload), or None if the connection ended first."""
    buffered = b""
    while chunk := sock.recv(65536):
        buffered += chunk
        while len(buffered) >= 9 and len(buffered) >= 9 + int.from_bytes(buffered[:3], "big"):
            size = int.from_bytes(buffered[:3], "big")
            kind, flags = buffered[3], buffered[4]
            stream = int.from_bytes(buffered[5:9], "big") & 0x7FFFFFFF
            payload, buffered = buffered[9 : 9 + size], buffered[9 + size :]
            if stream == 1 and (kind == 0x3 or (kind == 0x1 and flags & 0x1)):
                return kind, flags, payload
    return None


def assert_every_process_serves(cluster: SystemCluster) -> None:
    """Each process alive and answering a normal request on a new connection."""
    assert_alive(cluster)
    active = 0
    for controller in cluster.controllers:
        with grpc.insecure_channel(controller.properties["listeners"]) as channel:
            response = admin_stub(channel).DescribeCluster(
                cpb.DescribeClusterRequest(), timeout=RPC_TIMEOUT_S
            )
        assert response.error.code in (ErrorCode.NONE, ErrorCode.NOT_CONTROLLER), response
        active += response.error.code == ErrorCode.NONE
    assert active == 1
    orders = cluster.admin.describe_topic(ORDERS, include_partition_state=False)
    for p, partition in enumerate(orders.partitions):
        with grpc.insecure_channel(broker_address(cluster, partition.leader)) as channel:
            offsets = broker_stub(channel).ListOffsets(
                pb.ListOffsetsRequest(partition=_tp(orders, p)), timeout=RPC_TIMEOUT_S
            )
            assert_error(offsets.error, ErrorCode.NONE)
            assert offsets.offsets.log_end_offset == RECORDS_PER_PARTITION
            forwarded = admin_stub(channel).DescribeCluster(
                cpb.DescribeClusterRequest(), timeout=RPC_TIMEOUT_S
            )
            assert_error(forwarded.error, ErrorCode.NONE)


def test_garbage_bytes_on_every_grpc_port(cluster: SystemCluster) -> None:
    sends = [
        (address, payload)
        for address in _addresses(cluster).values()
        for payload in _garbage().values()
    ]
    with nothing_changes(cluster), ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda send: _send_and_hang_up(*send), sends))
    assert_every_process_serves(cluster)


def test_a_grpc_message_declaring_300mib_is_refused_at_once(cluster: SystemCluster) -> None:
    """The 5-byte gRPC prefix declares 300 MiB (above every limit) and 1 KiB follows: each
    server ends the call right away instead of waiting for (or buffering) the rest."""
    payload = _garbage()["grpc-message-declaring-300mib"]
    with nothing_changes(cluster):
        for name, address in _addresses(cluster).items():
            with _connect_and_send(address, payload) as sock:
                answer = _h2_answer_on_stream_1(sock)
            assert answer is not None, f"{name} hung up without answering the call"
            kind, _, fields = answer
            if kind == 0x1 and b"grpc-status" in fields:  # trailers-only, not Huffman-coded
                assert b"grpc-status\x018" in fields, (name, fields)  # RESOURCE_EXHAUSTED
    assert_every_process_serves(cluster)


def test_many_garbage_connections_at_once(cluster: SystemCluster) -> None:
    addresses = list(_addresses(cluster).values())
    payloads = list(_garbage().values())
    with nothing_changes(cluster), contextlib.ExitStack() as open_sockets:
        for i in range(50):
            sock = _connect_and_send(addresses[i % len(addresses)], payloads[i % len(payloads)])
            open_sockets.enter_context(sock)
        # all 50 still open (some half-sent, some idle after a preface): the servers still serve
        assert_every_process_serves(cluster)
    assert_every_process_serves(cluster)


# ----------------------------------------------------------------------------- afterwards


def test_every_process_survived_and_the_cluster_still_serves(cluster: SystemCluster) -> None:
    """Last in the module: nothing above killed a process or made a servicer fail unexpectedly,
    and a normal disable still goes through to DISABLED."""
    assert_every_process_serves(cluster)
    for process in [*cluster.controllers, *cluster.brokers.values()]:
        unexpected = [line for line in process.output if "ERROR tiered.rpc.status" in line]
        assert not unexpected, f"{process.config.name}: {unexpected}"
    name = "after-bad-input"
    cluster.admin.create_topic(name, 2, dict(TIERED))
    topic = _wait_hosted(cluster, name)
    for p in range(len(topic.partitions)):
        assert cluster.produce_acked(topic, p, 5)
    result = run_cli(
        "configs",
        cluster.bootstrap,
        *alter(name, "--add-config", f"{ENABLE_KEY}=false", "--wait", "--timeout", "60"),
    )
    assert result.returncode == 0, result.stderr
    assert f"Topic {name}: tiered_state=DISABLED tiered_epoch=1" in result.stdout
    after = cluster.admin.describe_topic(name)
    assert (after.tiered_state, after.tiered_epoch) == (TieredState.DISABLED, 1)
    assert all(p.log_end_offset == 5 for p in after.partitions)
    assert_alive(cluster)
