"""AdminClient and the tiered-topics / tiered-configs CLIs against a fake AdminService served over
real gRPC (tests/support/fake_admin.py)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from cli import configs as configs_cli
from cli import topics as topics_cli
from cli.common import (
    ProgressLine,
    parse_config_assignment,
    parse_config_list,
    parse_key_list,
)
from cli.launch.ports import free_port
from tests.support.fake_admin import FakeAdminServer, FakeAdminService
from tiered.admin import AdminClient, ControllerRetry
from tiered.cluster.model import TieredState
from tiered.errors import ErrorCode, TieredError

TIERED = {"remote.storage.enable": "true"}


@pytest.fixture
def fake() -> Iterator[FakeAdminServer]:
    with FakeAdminServer() as server:
        yield server


@pytest.fixture
def admin(fake: FakeAdminServer) -> Iterator[AdminClient]:
    with AdminClient(fake.address, timeout_s=10) as client:
        yield client


def dead_address() -> str:
    return f"127.0.0.1:{free_port()}"


def run_cli(
    main: Callable[[list[str]], int], capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def topics(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    return run_cli(topics_cli.main, capsys, *argv)


def configs(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    return run_cli(configs_cli.main, capsys, *argv)


# --------------------------------------------------------------------------------- discovery


def test_discovery_skips_a_dead_address_and_a_standby() -> None:
    with FakeAdminServer() as standby, FakeAdminServer() as active:
        standby.service.set_standby("")  # names no endpoint: the client must move on by itself
        bootstrap = f"{dead_address()}, {standby.address},{active.address}"
        with AdminClient(bootstrap, timeout_s=10) as client:
            cluster = client.describe_cluster()
            assert client.controller_address == active.address
        assert cluster.controller_endpoint == active.address
        assert [b.broker_id for b in cluster.brokers] == [1, 2, 3]
        assert cluster.metadata_mode == "kraft"
        assert standby.service.calls == ["DescribeCluster"]


def test_discovery_follows_the_endpoint_a_standby_names() -> None:
    with FakeAdminServer() as standby, FakeAdminServer() as active:
        standby.service.set_standby(active.address)
        with AdminClient(standby.address, timeout_s=10) as client:
            client.create_topic("t", 1)
            assert client.controller_address == active.address
        assert "t" in active.service.topics
        assert "t" not in standby.service.topics


def test_only_standbys_is_an_election_retried_until_the_timeout_then_not_controller() -> None:
    with FakeAdminServer() as a, FakeAdminServer() as b:
        a.service.set_standby("")
        b.service.set_standby("")
        with (
            AdminClient(f"{a.address},{b.address}", timeout_s=0.5) as client,
            pytest.raises(TieredError) as info,
        ):
            client.describe_cluster()
        assert a.service.calls.count("DescribeCluster") > 1  # asked again, not given up at once
    assert info.value.code is ErrorCode.NOT_CONTROLLER
    assert a.address in info.value.message and b.address in info.value.message


def test_a_controller_elected_while_the_client_waits_gets_the_call() -> None:
    with FakeAdminServer() as a:
        a.service.set_standby("")
        with AdminClient(a.address, timeout_s=30) as client:
            timer = threading.Timer(0.3, a.service.set_active)
            timer.start()
            try:
                assert client.describe_topics() == []
            finally:
                timer.cancel()


def test_a_controller_that_stops_answering_is_not_asked_again() -> None:
    with FakeAdminServer() as paused, FakeAdminServer() as other:
        other.service.set_standby("")
        with AdminClient(f"{paused.address},{other.address}", timeout_s=0.5) as client:
            client.describe_topics()
            assert client.controller_address == paused.address
            # It stops answering; meanwhile the other one is elected.
            paused.service.answering.clear()
            paused.service.set_standby(other.address)
            other.service.set_active()
            try:
                with pytest.raises(TieredError) as info:
                    client.describe_topics()
                assert info.value.code is ErrorCode.REQUEST_TIMED_OUT
                # A timeout is not retried (a write may have landed) but forgets the address.
                assert client.describe_topics() == []
                assert client.controller_address == other.address
            finally:
                paused.service.answering.set()


def test_no_controller_reachable_lists_each_address() -> None:
    with FakeAdminServer() as standby:
        standby.service.set_standby("")
        dead = dead_address()
        with (
            AdminClient(f"{dead},{standby.address}", timeout_s=0.5) as client,
            pytest.raises(TieredError) as info,
        ):
            client.describe_topics()
    assert info.value.code is ErrorCode.BROKER_NOT_AVAILABLE
    assert f"{dead}: unavailable" in info.value.message
    assert f"{standby.address}: NOT_CONTROLLER" in info.value.message


def test_failover_rediscovers_and_retries_once() -> None:
    with FakeAdminServer() as first, FakeAdminServer() as second:
        second.service.set_standby(first.address)
        with AdminClient(f"{first.address},{second.address}", timeout_s=10) as client:
            client.create_topic("a", 1)
            assert client.controller_address == first.address
            # The active controller steps down; the other takes over.
            first.service.set_standby(second.address)
            second.service.set_active()
            client.create_topic("b", 1)
            assert client.controller_address == second.address
            # first answered the second CreateTopics NOT_CONTROLLER and was asked again.
            assert first.service.calls == [
                "DescribeCluster",
                "CreateTopics",
                "CreateTopics",
                "DescribeCluster",
            ]
            # The active one dies: UNAVAILABLE, rediscover, retry.
            first.service.set_active()
            second.stop()
            assert [t.name for t in client.describe_topics()] == ["a"]
            assert client.controller_address == first.address
        assert set(second.service.topics) == {"b"}


def test_injected_retry_policy_gives_up_after_max_tries() -> None:
    sleeps: list[float] = []
    retry = ControllerRetry(max_tries=3, delay_s=0.1, backoff=2, sleep=sleeps.append)
    with FakeAdminServer() as standby:
        standby.service.set_standby("")  # an election that never ends
        with (
            AdminClient(standby.address, timeout_s=10, retry=retry) as client,
            pytest.raises(TieredError) as info,
        ):
            client.describe_topics()
        # What the last attempt saw, not the internal ControllerMovedError.
        assert info.value.code is ErrorCode.NOT_CONTROLLER
        assert "only standbys answered" in info.value.message
        assert standby.service.calls == ["DescribeCluster"] * 3
    assert sleeps == [0.1, 0.2]


def test_bootstrap_must_be_host_port() -> None:
    for bad in ("", " , ", "localhost", "h:notaport", ":9092"):
        with pytest.raises(TieredError) as info:
            AdminClient(bad)
        assert info.value.code is ErrorCode.INVALID_REQUEST


# --------------------------------------------------------------------------------- client


def test_client_round_trip(admin: AdminClient, fake: FakeAdminServer) -> None:
    topic_id = admin.create_topic("t", 2, TIERED)
    assert fake.service.topics["t"].topic_id == topic_id
    [t] = admin.describe_topics(["t"])
    assert (t.tiered_state, t.tiered_epoch, t.configs) == (TieredState.ENABLED, 0, TIERED)
    assert [p.log_end_offset for p in t.partitions] == [0, 0]
    [bare] = admin.describe_topics(["t"], include_partition_state=False)
    assert [p.log_end_offset for p in bare.partitions] == [None, None]

    result = admin.incremental_alter_configs(
        "t", {"remote.storage.enable": "false", "remote.log.disable.policy": "delete"}, []
    )
    assert (result.tiered_state, result.tiered_epoch) == (TieredState.DISABLING, 1)
    [t] = admin.describe_topics(["t"])
    assert (t.disable_acks_owed, t.disable_acks_total, t.disable_policy) == (2, 2, "delete")
    fake.service.complete_disable("t")
    assert admin.describe_topic("t").tiered_state is TieredState.DISABLED

    result = admin.alter_configs("t", TIERED)  # full replace: the policy key is gone
    assert (result.tiered_state, result.tiered_epoch) == (TieredState.ENABLED, 1)
    entries = {e.name: (e.value, e.is_default) for e in admin.describe_configs("t")}
    assert entries["remote.storage.enable"] == ("true", False)
    assert entries["remote.log.disable.policy"] == ("retain", True)

    admin.delete_topic("t")
    assert admin.describe_topics() == []


def test_client_maps_invalid_argument_to_invalid_request(admin: AdminClient) -> None:
    with pytest.raises(TieredError) as info:
        admin.create_topic("", 1)
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert str(info.value) == "INVALID_REQUEST: topic name must not be empty"


@pytest.mark.parametrize("partitions", [0, -1, 2**31, 10**20])
def test_client_refuses_a_partition_count_no_request_can_carry(
    admin: AdminClient, fake: FakeAdminServer, partitions: int
) -> None:
    with pytest.raises(TieredError) as info:
        admin.create_topic("t", partitions)
    assert info.value.code is ErrorCode.INVALID_PARTITIONS
    assert info.value.message == (
        f"partition count {partitions} is not valid; valid values: an integer from 1 to {2**31 - 1}"
    )
    assert "CreateTopics" not in fake.service.calls


def test_client_raises_the_response_error_code(admin: AdminClient) -> None:
    admin.create_topic("t", 1)
    with pytest.raises(TieredError) as info:
        admin.create_topic("t", 1)
    assert info.value.code is ErrorCode.TOPIC_ALREADY_EXISTS
    with pytest.raises(TieredError) as info:
        admin.describe_topics(["t", "missing"])
    assert info.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(TieredError) as info:
        admin.incremental_alter_configs("t", {"remote.log.disable.policy": "shred"})
    assert info.value.code is ErrorCode.INVALID_REQUEST
    assert "remote.log.disable.policy" in info.value.message


# --------------------------------------------------------------------------------- config parsing


def test_add_config_parsing_like_kafka_configs() -> None:
    assert parse_config_list("a=b,c=d") == {"a": "b", "c": "d"}
    # The KIP-950 example: a space after the comma.
    assert parse_config_list("remote.log.disable.policy=delete, remote.storage.enable=false") == {
        "remote.log.disable.policy": "delete",
        "remote.storage.enable": "false",
    }
    assert parse_config_list("cleanup.policy=[delete,compact],retention.ms=5") == {
        "cleanup.policy": "delete,compact",
        "retention.ms": "5",
    }
    assert parse_config_list(" k = [ a , b ] ") == {"k": "a,b"}
    assert parse_config_list("k=") == {"k": ""}
    assert parse_config_assignment("cleanup.policy=delete,compact") == (
        "cleanup.policy",
        "delete,compact",
    )
    assert parse_key_list(["a, b", "c"]) == ["a", "b", "c"]


@pytest.mark.parametrize(
    "text",
    [
        "a",  # no =
        "a=b=c",  # two =
        "=b",  # empty key
        "a=b,,c=d",  # empty entry
        "a=b,",  # trailing comma
        "a=[b,c",  # unbalanced [
        "a=b],c=d",  # unbalanced ]
        "a=x[b]",  # brackets inside a value
        "a=1,a=2",  # repeated key
        "my key=1",  # space in a key
    ],
)
def test_add_config_malformed_is_invalid_request(text: str) -> None:
    with pytest.raises(TieredError) as info:
        parse_config_list(text)
    assert info.value.code is ErrorCode.INVALID_REQUEST


def test_malformed_add_config_sends_nothing(
    fake: FakeAdminServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = configs(
        capsys,
        *("--bootstrap-server", fake.address, "--alter", "--entity-type", "topics"),
        *("--entity-name", "t", "--add-config", "remote.storage.enable=false,policy"),
    )
    assert code == 1
    assert out == ""
    assert err.startswith("INVALID_REQUEST: invalid config entry 'policy'")
    assert fake.service.calls == []


# --------------------------------------------------------------------------------- tiered-topics


def test_create_and_describe_json(
    fake: FakeAdminServer, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = topics(
        capsys,
        *("--bootstrap-server", fake.address, "--create", "--topic", "orders"),
        *("--partitions", "2", "--config", "remote.storage.enable=true"),
        *("--config", "retention.ms = 86400000"),
    )
    assert (code, out, err) == (0, "Created topic orders.\n", "")
    fake.service.topics["orders"].log_end_offsets[1] = 42

    code, out, err = topics(
        capsys, "--bootstrap-server", fake.address, "--describe", "--format", "json"
    )
    assert (code, err) == (0, "")
    topic_id = str(fake.service.topics["orders"].topic_id)
    partition = {
        "leader": 1,
        "log_start_offset": 0,
        "local_log_start_offset": 0,
        "log_end_offset": 0,
        "remote_log_start_offset": -1,
        "remote_log_size_bytes": 0,
        "remote_segment_count": 0,
        "remote_delete_state": "",
        "delete_objects_deleted": 0,
        "delete_objects_total": 0,
    }
    assert json.loads(out) == [
        {
            "topic": "orders",
            "topic_id": topic_id,
            "tiered_state": "ENABLED",
            "tiered_epoch": 0,
            "configs": {"remote.storage.enable": "true", "retention.ms": "86400000"},
            "partitions": [
                {"partition": 0, **partition},
                {"partition": 1, **partition, "leader": 2, "log_end_offset": 42},
            ],
            "disable_acks_owed": 0,
            "disable_acks_total": 0,
            "disable_policy": "",
            "delete_job": None,
        }
    ]


def test_describe_text(fake: FakeAdminServer, capsys: pytest.CaptureFixture[str]) -> None:
    with AdminClient(fake.address) as client:
        client.create_topic("b", 1, TIERED)
        client.create_topic("a", 2)
    code, out, _ = topics(capsys, "--bootstrap-server", fake.address, "--describe")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 5  # a header and a line per partition, topics by name
    assert lines[0].startswith("Topic: a\tTopicId: ")
    assert "\tPartitionCount: 2\tTieredState: DISABLED\tTieredEpoch: 0\tConfigs: " in lines[0]
    assert lines[1].startswith("\tTopic: a\tPartition: 0\tLeader: 1\tLogStartOffset: 0")
    assert "RemoteLogStartOffset: -1" in lines[1]
    assert lines[3].startswith("Topic: b\t")
    assert lines[3].endswith("Configs: remote.storage.enable=true")

    code, out, _ = topics(capsys, "--bootstrap-server", fake.address, "--describe", "--topic", "b")
    assert code == 0
    assert len(out.splitlines()) == 2


def test_delete(fake: FakeAdminServer, capsys: pytest.CaptureFixture[str]) -> None:
    with AdminClient(fake.address) as client:
        client.create_topic("t", 1)
    code, out, _ = topics(capsys, "--bootstrap-server", fake.address, "--delete", "--topic", "t")
    assert (code, out) == (0, "Deleted topic t.\n")
    assert fake.service.topics == {}


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["--describe", "--topic", "missing"], "UNKNOWN_TOPIC_OR_PARTITION: "),
        (["--delete", "--topic", "missing"], "UNKNOWN_TOPIC_OR_PARTITION: "),
        (
            [
                "--create",
                "--topic",
                "t",
                "--partitions",
                "1",
                "--config",
                "remote.storage.enable=1",
            ],
            "INVALID_REQUEST: remote.storage.enable='1' is not valid",
        ),
        (["--create", "--topic", "t", "--partitions", "1", "--config", "x"], "INVALID_REQUEST: "),
        (["--create", "--topic", "t", "--partitions", "0"], "INVALID_REQUEST: --partitions"),
        (
            ["--create", "--topic", "t", "--partitions", str(10**20)],
            f"INVALID_REQUEST: --partitions must be at most {2**31 - 1}, not {10**20}",
        ),
        (
            [
                *("--create", "--topic", "t", "--partitions", "1"),
                *("--config", "remote.storage.enable=true", "--config", "cleanup.policy=compact"),
            ],
            "INVALID_CONFIG: ",
        ),
    ],
)
def test_topics_errors_exit_1_with_the_name(
    fake: FakeAdminServer, capsys: pytest.CaptureFixture[str], argv: list[str], error: str
) -> None:
    code, out, err = topics(capsys, "--bootstrap-server", fake.address, *argv)
    assert code == 1
    assert out == ""
    assert err.startswith(error)
    assert len(err.splitlines()) == 1


def test_no_controller_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    dead = dead_address()
    code, _, err = topics(capsys, "--bootstrap-server", dead, "--describe")
    assert code == 1
    assert err.startswith(f"BROKER_NOT_AVAILABLE: no active controller reachable ({dead}: ")


@pytest.mark.parametrize(
    "argv",
    [
        ["--describe"],  # no --bootstrap-server
        ["--bootstrap-server", "h:1"],  # no action
        ["--bootstrap-server", "h:1", "--create", "--topic", "t"],  # no --partitions
        ["--bootstrap-server", "h:1", "--delete"],  # no --topic
        ["--bootstrap-server", "h:1", "--describe", "--delete"],
        ["--bootstrap-server", "h:1", "--alter", "--topic", "t"],  # no --partitions
        ["--bootstrap-server", "h:1", "--alter", "--partitions", "2"],  # no --topic
        [
            "--bootstrap-server",
            "h:1",
            "--alter",
            "--topic",
            "t",
            "--partitions",
            "2",
            "--config",
            "a=b",
        ],
        [
            "--bootstrap-server",
            "h:1",
            "--create",
            "--topic",
            "t",
            "--partitions",
            "2",
            "--replica-assignment",
            "1",
        ],
        ["--bootstrap-server", "h:1", "--describe", "--partitions", "2"],
    ],
)
def test_topics_usage_errors_exit_2(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        topics_cli.main(argv)
    assert info.value.code == 2


@pytest.mark.processes
def test_console_script_in_a_subprocess(fake: FakeAdminServer) -> None:
    script = Path(sys.executable).with_name("tiered-topics")
    assert script.exists(), "run `.venv/bin/pip install -e . --no-deps` for the console scripts"
    with AdminClient(fake.address) as client:
        topic_id = client.create_topic("sub", 1, TIERED)
    bootstrap = f"{dead_address()},{fake.address}"
    done = subprocess.run(
        [str(script), "--bootstrap-server", bootstrap, "--describe", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    [described] = json.loads(done.stdout)
    assert (described["topic"], described["topic_id"]) == ("sub", str(topic_id))

    done = subprocess.run(
        [str(script), "--bootstrap-server", fake.address, "--describe", "--topic", "nope"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr == "UNKNOWN_TOPIC_OR_PARTITION: topic 'nope' does not exist\n"


# --------------------------------------------------------------------------------- tiered-configs


def alter_argv(fake: FakeAdminServer, topic: str, *rest: str) -> list[str]:
    return [
        *("--bootstrap-server", fake.address, "--alter"),
        *("--entity-type", "topics", "--entity-name", topic),
        *rest,
    ]


def test_configs_alter_and_describe(
    fake: FakeAdminServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with AdminClient(fake.address) as client:
        client.create_topic("t", 1, {**TIERED, "retention.ms": "1000"})
    code, out, err = configs(
        capsys,
        *alter_argv(fake, "t", "--add-config", "cleanup.policy=[delete], segment.bytes=1024"),
        *("--delete-config", "retention.ms"),
    )
    assert (code, out, err) == (0, "Completed updating config for topic t.\n", "")
    assert fake.service.topics["t"].configs == {
        "remote.storage.enable": "true",
        "cleanup.policy": "delete",
        "segment.bytes": "1024",
    }

    describe = [
        *("--bootstrap-server", fake.address, "--describe"),
        *("--entity-type", "topics", "--entity-name", "t"),
    ]
    code, out, _ = configs(capsys, *describe)
    assert code == 0
    assert out == (
        "Dynamic configs for topic t are:\n"
        "  cleanup.policy=delete\n"
        "  remote.storage.enable=true\n"
        "  segment.bytes=1024\n"
    )
    code, out, _ = configs(capsys, *describe, "--format", "json")
    assert code == 0
    document = json.loads(out)
    assert document["topic"] == "t"
    assert document["configs"] == {
        "cleanup.policy": "delete",
        "remote.storage.enable": "true",
        "segment.bytes": "1024",
    }
    assert document["defaults"]["remote.log.disable.policy"] == "retain"


def test_configs_errors_exit_1_with_the_name(
    fake: FakeAdminServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with AdminClient(fake.address) as client:
        client.create_topic("t", 2, TIERED)
    disable = ("--add-config", "remote.log.disable.policy=delete, remote.storage.enable=false")

    code, _, err = configs(capsys, *alter_argv(fake, "missing", *disable))
    assert code == 1
    assert err == "UNKNOWN_TOPIC_OR_PARTITION: topic 'missing' does not exist\n"

    code, _, err = configs(
        capsys, *alter_argv(fake, "t", "--add-config", "remote.storage.enable=1")
    )
    assert code == 1
    assert err.startswith("INVALID_REQUEST: remote.storage.enable='1' is not valid")

    code, _, err = configs(
        capsys, *alter_argv(fake, "t", "--add-config", "a=1", "--delete-config", "a")
    )
    assert code == 1
    assert err.startswith("INVALID_REQUEST: config 'a' is both")

    code, out, _ = configs(capsys, *alter_argv(fake, "t", *disable))
    assert code == 0
    assert fake.service.topics["t"].state == "DISABLING"

    # KIP-950: neither a disable nor an enable while DISABLING.
    for again in ("remote.storage.enable=true", "remote.storage.enable=false"):
        code, out, err = configs(capsys, *alter_argv(fake, "t", "--add-config", again))
        assert code == 1
        assert out == ""
        assert err.startswith("TIERED_STORAGE_DISABLEMENT_IN_PROGRESS: topic 't' is DISABLING")

    describe = ["--bootstrap-server", fake.address, "--describe", "--entity-type", "topics"]
    code, _, err = configs(capsys, *describe, "--entity-name", "missing")
    assert code == 1
    assert err.startswith("UNKNOWN_TOPIC_OR_PARTITION: ")


@pytest.mark.parametrize(
    "extra",
    [
        [],  # neither --add-config nor --delete-config
        ["--add-config", "a=b", "--timeout", "0"],
        ["--add-config", "a=b", "--format", "json"],
        ["--add-config", "a=b", "--dry-run", "--wait"],  # a dry run changes nothing to wait for
    ],
)
def test_configs_usage_errors_exit_2(fake: FakeAdminServer, extra: list[str]) -> None:
    with pytest.raises(SystemExit) as info:
        configs_cli.main(alter_argv(fake, "t", *extra))
    assert info.value.code == 2


DISABLE_DELETE = ("--add-config", "remote.log.disable.policy=delete, remote.storage.enable=false")


def test_dry_run_goes_with_the_alter_of_topics_only(fake: FakeAdminServer) -> None:
    users = [
        *("--bootstrap-server", fake.address, "--alter", "--entity-type", "users"),
        *("--entity-name", "alice", "--delete-config", "SCRAM-SHA-512", "--dry-run"),
    ]
    describe = [
        *("--bootstrap-server", fake.address, "--describe", "--entity-type", "topics"),
        *("--entity-name", "t", "--dry-run"),
    ]
    for argv in (users, describe):
        with pytest.raises(SystemExit) as info:
            configs_cli.main(argv)
        assert info.value.code == 2


def test_several_topics_are_altered_in_one_request_and_a_failure_is_named(
    fake: FakeAdminServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with AdminClient(fake.address) as client:
        for name in ("a", "b"):
            client.create_topic(name, 1, TIERED)
    fake.service.calls.clear()
    argv = alter_argv(fake, "a", "--entity-name", "gone", "--entity-name", "b")
    code, out, err = configs(capsys, *argv, "--add-config", "retention.ms=5")
    # one AlterTopicConfigs request, which the fake records topic by topic
    assert [c for c in fake.service.calls if c != "DescribeCluster"] == ["AlterTopicConfigs"] * 3
    assert code == 1
    assert out == (
        "Completed updating config for topic a.\nCompleted updating config for topic b.\n"
    )
    assert err == "UNKNOWN_TOPIC_OR_PARTITION: topic 'gone': topic 'gone' does not exist\n"
    assert [fake.service.topics[n].configs["retention.ms"] for n in ("a", "b")] == ["5", "5"]


def test_wait_follows_every_topic_altered(
    fake: FakeAdminServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(configs_cli, "POLL_INTERVAL_S", 0.01)
    with AdminClient(fake.address) as client:
        for name in ("a", "b"):
            client.create_topic(name, 1, TIERED)
    service = fake.service

    def brokers() -> None:
        assert service.wait_for_describes(1)
        service.complete_disable("a")
        assert service.wait_for_describes(service.describe_calls + 1)
        service.complete_disable("b")

    thread = threading.Thread(target=brokers, daemon=True)
    thread.start()
    argv = alter_argv(fake, "a", "--entity-name", "b", *DISABLE_DELETE, "--wait")
    code, out, err = configs(capsys, *argv)
    thread.join(10)
    assert code == 0
    assert out.splitlines()[-2:] == [
        "Topic a: tiered_state=DISABLED tiered_epoch=1 policy=delete",
        "Topic b: tiered_state=DISABLED tiered_epoch=1 policy=delete",
    ]
    assert err.splitlines()[0] == (
        "2/2 topics waiting; a: DISABLING epoch 1: brokers acked 0/1 partitions"
    )
    assert err.splitlines()[-1] == (
        "1/2 topics waiting; b: DISABLING epoch 1: brokers acked 0/1 partitions"
    )


def test_wait_shows_progress_until_disabled(
    fake: FakeAdminServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(configs_cli, "POLL_INTERVAL_S", 0.01)
    with AdminClient(fake.address) as client:
        client.create_topic("t", 3, TIERED)
    service = fake.service
    finished = threading.Event()

    def brokers() -> None:
        # After two polls a broker acks partition 0; once a poll has seen that, the rest ack.
        try:
            assert service.wait_for_describes(2)
            polls_before_ack = service.ack("t", 0)
            assert service.wait_for_describes(polls_before_ack + 1)
            service.complete_disable("t")
        finally:
            finished.set()

    thread = threading.Thread(target=brokers, daemon=True)
    thread.start()
    code, out, err = configs(capsys, *alter_argv(fake, "t", *DISABLE_DELETE, "--wait"))
    assert finished.wait(10)
    thread.join(10)
    assert code == 0
    assert out == (
        "Completed updating config for topic t.\n"
        "Topic t: tiered_state=DISABLED tiered_epoch=1 policy=delete\n"
    )
    # stderr is not a terminal here: one line per change.
    assert err == (
        "DISABLING epoch 1: brokers acked 0/3 partitions\n"
        "DISABLING epoch 1: brokers acked 1/3 partitions\n"
    )
    assert service.describe_calls >= 4


def test_wait_times_out(fake: FakeAdminServer, capsys: pytest.CaptureFixture[str]) -> None:
    with AdminClient(fake.address) as client:
        client.create_topic("t", 2, TIERED)
    code, out, err = configs(
        capsys, *alter_argv(fake, "t", *DISABLE_DELETE, "--wait", "--timeout", "1")
    )
    assert code == 1
    assert out == "Completed updating config for topic t.\n"
    lines = err.splitlines()
    assert lines[0] == "DISABLING epoch 1: brokers acked 0/2 partitions"
    assert lines[-1].startswith("REQUEST_TIMED_OUT: topic 't' is still DISABLING after 1s")
    assert 2 <= fake.service.describe_calls <= 4  # about every 0.5 s


def test_wait_fails_when_the_topic_disappears(
    fake: FakeAdminServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(configs_cli, "POLL_INTERVAL_S", 0.01)
    with AdminClient(fake.address) as client:
        client.create_topic("t", 1, TIERED)

    def delete_after_first_poll() -> None:
        assert fake.service.wait_for_describes(1)
        with AdminClient(fake.address) as other:
            other.delete_topic("t")

    thread = threading.Thread(target=delete_after_first_poll, daemon=True)
    thread.start()
    code, _, err = configs(capsys, *alter_argv(fake, "t", *DISABLE_DELETE, "--wait"))
    thread.join(10)
    assert code == 1
    assert err.splitlines()[-1] == "UNKNOWN_TOPIC_OR_PARTITION: topic 't' does not exist"


def test_wait_on_a_topic_not_disabling_returns_at_once(
    fake: FakeAdminServer, capsys: pytest.CaptureFixture[str]
) -> None:
    with AdminClient(fake.address) as client:
        client.create_topic("t", 1)
    code, out, err = configs(
        capsys, *alter_argv(fake, "t", "--add-config", "retention.ms=5", "--wait")
    )
    assert (code, err) == (0, "")
    assert out.splitlines()[-1] == "Topic t: tiered_state=DISABLED tiered_epoch=0 policy=none"


def test_progress_line_rewrites_in_place_on_a_terminal() -> None:
    stream = io.StringIO()
    line = ProgressLine(stream, tty=True)
    long = "DISABLING epoch 1: brokers acked 10/12 partitions"
    line.update(long)
    line.update(long)
    line.update("short")
    line.finish()
    assert stream.getvalue() == f"\r{long}\rshort{' ' * (len(long) - 5)}\n"


def test_topic_ids_are_uuids(admin: AdminClient) -> None:
    assert isinstance(admin.create_topic("t", 1), uuid.UUID)


def test_fake_service_is_fresh_per_test(fake: FakeAdminServer) -> None:
    assert isinstance(fake.service, FakeAdminService)
    assert fake.service.topics == {}
