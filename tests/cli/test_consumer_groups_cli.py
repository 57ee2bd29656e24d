"""``tiered-consumer-groups`` and the product's Kafka protocol client on the wire, against a
listener in this process whose handler answers as a group coordinator and partition leader
(``tests/support/group_admin_handler.py``): kafka-consumer-groups.sh's tables and messages, lag,
reset plans (every scenario, ``--export``'s CSV and ``--from-file``) and their execution, refusals
that change nothing, retries of a moved coordinator,
and a SCRAM login. The real cluster runs in ``test_consumer_groups_cluster.py``."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.listener.api_versions import ApiVersionRegistry
from broker.listener.sasl import SaslAuthentication
from broker.listener.server import KafkaServer, ListenerSettings
from cli.consumer_groups import main
from cli.kafka_client.client import KafkaClient
from cli.kafka_client.client_security import KafkaClientSecurity
from cli.kafka_client.group_admin import GroupAdmin
from cli.launch.ports import free_port
from tests.support.group_admin_handler import REGISTRY, Group, GroupAdminHandler, Member
from tiered.errors import ErrorCode, TieredError
from tiered.security.scram import ScramCredential, ScramMechanism

SHA512 = ScramMechanism.SCRAM_SHA_512
PASSWORD = "s3cret-of-alice"
FOR = "for topic partition"
OFFSET_FETCH = 9


@pytest.fixture
def handler() -> GroupAdminHandler:
    handler = GroupAdminHandler({"orders": 3, "audit": 1})
    handler.log = {("orders", 0): (0, 100), ("orders", 1): (10, 50), ("orders", 2): (0, 0)}
    handler.log[("audit", 0)] = (5, 7)
    handler.groups["billing"] = Group(
        state="Stable",
        protocol="range",
        members=[
            Member("m-1", "app-1", "/127.0.0.1", {"orders": [0, 1]}),
            Member("m-2", "app-2", "/127.0.0.2", {"orders": [2]}, group_instance_id="i-2"),
        ],
        offsets={("orders", 0): 90, ("orders", 1): 20, ("audit", 0): 6},
    )
    handler.groups["idle"] = Group(offsets={("orders", 0): 5, ("orders", 1): 40})
    return handler


@pytest.fixture
def bootstrap(handler: GroupAdminHandler) -> Iterator[str]:
    server = KafkaServer(handler, ListenerSettings(), REGISTRY)
    server.start()
    handler.port = server.address[1]
    try:
        yield f"127.0.0.1:{handler.port}"
    finally:
        server.stop()


def tool(bootstrap: str, *args: str) -> int:
    return main(["--bootstrap-server", bootstrap, *args])


def new_offsets(bootstrap: str, capsys: pytest.CaptureFixture[str], *args: str) -> list[int]:
    """The new offsets of a one-group reset plan, printed as JSON."""
    assert tool(bootstrap, *args, "--format", "json") == 0
    (plan,) = json.loads(capsys.readouterr().out)
    return [o["new_offset"] for o in plan["offsets"]]


# --------------------------------------------------------------------------------- listing


def test_list_prints_the_group_ids(bootstrap: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert tool(bootstrap, "--list") == 0
    assert capsys.readouterr().out.splitlines() == ["billing", "idle"]


def test_list_with_states_filters_and_shows_them(
    bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tool(bootstrap, "--list", "--state", "stable") == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split() for line in lines] == [["GROUP", "STATE"], ["billing", "Stable"]]
    assert lines[1].index("Stable") == 15 + 10 + 1  # Kafka's width: max(15, longest) + 10
    assert tool(bootstrap, "--list", "--state") == 0
    assert [line.split() for line in capsys.readouterr().out.splitlines()[1:]] == [
        ["billing", "Stable"],
        ["idle", "Empty"],
    ]


def test_a_bad_state_names_the_valid_ones_and_exits_1(
    bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tool(bootstrap, "--list", "--state", "stable,sleepy") == 1
    err = capsys.readouterr().err
    assert err.startswith("INVALID_REQUEST: --state: invalid state list 'stable,sleepy'")
    assert "PreparingRebalance, CompletingRebalance, Stable, Dead, Empty" in err


# --------------------------------------------------------------------------------- describe


def test_describe_shows_each_partition_with_its_lag(
    bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tool(bootstrap, "--describe", "--group", "billing") == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == ""
    assert lines[1].split() == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "LOG-END-OFFSET",
        "LAG",
        "CONSUMER-ID",
        "HOST",
        "CLIENT-ID",
    ]
    rows = [line.split() for line in lines[2:] if line]
    assert rows == [
        ["billing", "orders", "0", "90", "100", "10", "m-1", "/127.0.0.1", "app-1"],
        ["billing", "orders", "1", "20", "50", "30", "m-1", "/127.0.0.1", "app-1"],
        ["billing", "orders", "2", "-", "0", "-", "m-2", "/127.0.0.2", "app-2"],
        ["billing", "audit", "0", "6", "7", "1", "-", "-", "-"],
    ]
    assert lines[1].index("TOPIC") == 16 and lines[1].index("PARTITION") == 32


def test_describe_json_carries_the_same_facts(
    bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tool(bootstrap, "--describe", "--group", "idle", "--format", "json") == 0
    (group,) = json.loads(capsys.readouterr().out)
    assert group["group"] == "idle" and group["state"] == "Empty"
    assert [(o["topic"], o["partition"], o["lag"], o["consumer_id"]) for o in group["offsets"]] == [
        ("orders", 0, 95, None),
        ("orders", 1, 10, None),
    ]


def test_describe_members_verbose_and_state(
    bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tool(bootstrap, "--describe", "--group", "billing", "--members", "--verbose") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == [
        "GROUP",
        "CONSUMER-ID",
        "GROUP-INSTANCE-ID",
        "HOST",
        "CLIENT-ID",
        "#PARTITIONS",
        "ASSIGNMENT",
    ]
    assert lines[2].split() == ["billing", "m-1", "/127.0.0.1", "app-1", "2", "orders(0,1)"]
    assert lines[3].split() == ["billing", "m-2", "i-2", "/127.0.0.2", "app-2", "1", "orders(2)"]
    assert tool(bootstrap, "--describe", "--group", "billing", "--state") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].split() == [
        "GROUP",
        "COORDINATOR",
        "(ID)",
        "ASSIGNMENT-STRATEGY",
        "STATE",
        "#MEMBERS",
    ]
    port = bootstrap.rsplit(":", 1)[1]
    assert lines[2].split() == ["billing", f"127.0.0.1:{port}", "(1)", "range", "Stable", "2"]


def test_describe_all_groups_in_json(bootstrap: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert tool(bootstrap, "--describe", "--all-groups", "--state", "--format", "json") == 0
    described = json.loads(capsys.readouterr().out)
    assert [(g["group"], g["state"], g["members"]) for g in described] == [
        ("billing", "Stable", 2),
        ("idle", "Empty", 0),
    ]


def test_an_empty_group_is_noted_on_stderr(
    bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tool(bootstrap, "--describe", "--group", "idle", "--members") == 0
    captured = capsys.readouterr()
    assert "Consumer group 'idle' has no active members." in captured.err
    assert captured.out.splitlines()[1].split()[:2] == ["GROUP", "CONSUMER-ID"]


def test_describing_a_missing_group_exits_1(
    bootstrap: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tool(bootstrap, "--describe", "--group", "nobody", "--state") == 1
    assert capsys.readouterr().err == (
        "GROUP_ID_NOT_FOUND: Consumer group 'nobody' does not exist.\n"
    )


def test_a_moved_coordinator_is_found_again_and_retried(
    bootstrap: str, handler: GroupAdminHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    handler.not_coordinator_answers = 2
    assert tool(bootstrap, "--describe", "--group", "billing", "--state") == 0
    assert "Stable" in capsys.readouterr().out
    asked = [r for r in handler.requests if r in ("find_coordinator", "describe_groups")]
    assert asked[:6] == ["find_coordinator", "describe_groups"] * 3


def test_a_coordinator_that_stays_away_is_an_error_after_the_timeout(
    bootstrap: str, handler: GroupAdminHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    handler.not_coordinator_answers = 10**6
    assert tool(bootstrap, "--describe", "--group", "billing", "--state", "--timeout", "300") == 1
    assert capsys.readouterr().err.startswith("NOT_COORDINATOR: cannot describe group 'billing'")


def test_an_unreachable_coordinator_is_found_again(
    bootstrap: str, handler: GroupAdminHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    handler.gone_coordinators = [free_port()]
    assert tool(bootstrap, "--describe", "--group", "billing", "--members") == 0
    assert "m-1" in capsys.readouterr().out
    assert handler.requests.count("find_coordinator") == 2


def test_a_broker_without_offset_fetch_is_named_with_the_api(
    handler: GroupAdminHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    without = ApiVersionRegistry({k: v for k, v in REGISTRY.ranges.items() if k != OFFSET_FETCH})
    server = KafkaServer(handler, ListenerSettings(), without)
    server.start()
    handler.port = server.address[1]
    try:
        assert tool(f"127.0.0.1:{handler.port}", "--describe", "--group", "billing") == 1
    finally:
        server.stop()
    assert capsys.readouterr().err == (
        f"UNSUPPORTED_VERSION: 127.0.0.1:{handler.port} does not serve OffsetFetch (api key 9) "
        "at the versions this client speaks, 1 to 7\n"
    )


# --------------------------------------------------------------------------------- reset


def test_reset_without_execute_only_shows_the_plan(
    bootstrap: str, handler: GroupAdminHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    assert (
        tool(bootstrap, "--reset-offsets", "--group", "idle", "--all-topics", "--to-earliest") == 0
    )
    captured = capsys.readouterr()
    assert "WARN: No action will be performed as the --execute option is missing." in captured.err
    lines = captured.out.splitlines()
    assert lines[1].split() == ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
    assert [line.split() for line in lines[2:] if line] == [
        ["idle", "orders", "0", "0"],
        ["idle", "orders", "1", "10"],
    ]
    assert handler.commits == [] and handler.groups["idle"].offsets[("orders", 1)] == 40


def test_reset_execute_commits_the_plan(
    bootstrap: str, handler: GroupAdminHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--reset-offsets", "--group", "idle", "--topic", "orders:1", "--to-latest"]
    assert tool(bootstrap, *args, "--execute", "--format", "json") == 0
    (plan,) = json.loads(capsys.readouterr().out)
    assert plan == {
        "group": "idle",
        "executed": True,
        "offsets": [{"topic": "orders", "partition": 1, "new_offset": 50}],
    }
    assert handler.commits == [{("orders", 1): 50}]
    assert handler.groups["idle"].offsets == {("orders", 0): 5, ("orders", 1): 50}


@pytest.mark.parametrize(
    ("scenario", "expected", "warning"),
    [
        (["--to-offset", "30"], {0: 30, 1: 30, 2: 0}, f"higher than latest offset {FOR} orders-2"),
        (["--shift-by", "-10"], None, "no current committed offset"),
        (["--to-offset", "3"], {0: 3, 1: 10, 2: 0}, f"lower than earliest offset {FOR} orders-1"),
    ],
)
def test_reset_keeps_named_offsets_within_the_log(
    bootstrap: str,
    handler: GroupAdminHandler,
    capsys: pytest.CaptureFixture[str],
    scenario: list[str],
    expected: dict[int, int] | None,
    warning: str,
) -> None:
    code = tool(
        bootstrap, "--reset-offsets", "--group", "idle", "--topic", "orders", *scenario, "--dry-run"
    )
    captured = capsys.readouterr()
    assert warning in captured.err
    if expected is None:
        assert code == 1 and captured.err.startswith("INVALID_REQUEST: --shift-by: cannot shift")
        return
    assert code == 0
    rows = [line.split() for line in captured.out.splitlines()[2:] if line]
    assert {int(r[2]): int(r[3]) for r in rows} == expected


def test_reset_shift_by_and_to_datetime(
    bootstrap: str, handler: GroupAdminHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--reset-offsets", "--group", "idle", "--topic", "orders:0,1", "--dry-run"]
    assert new_offsets(bootstrap, capsys, *args, "--shift-by", "-3") == [2, 37]
    handler.first_offset_at[("orders", 0)] = [(1_700_000_000_000, 42)]
    assert (
        tool(bootstrap, *args, "--to-datetime", "2023-11-14T22:13:20.000Z", "--format", "json") == 0
    )
    captured = capsys.readouterr()
    (plan,) = json.loads(captured.out)
    assert [o["new_offset"] for o in plan["offsets"]] == [42, 50]
    assert (
        "Partition 1 from topic orders is empty. Falling back to latest known offset."
        in captured.err
    )


def test_reset_to_current_and_by_duration(
    bootstrap: str, handler: GroupAdminHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--reset-offsets", "--group", "idle", "--topic", "orders", "--dry-run"]
    # Committed offsets stay; a partition without one goes to its log end, as in Kafka.
    assert new_offsets(bootstrap, capsys, *args, "--to-current") == [5, 40, 0]
    an_hour_ago = int((time.time() - 3600) * 1000)
    handler.first_offset_at[("orders", 0)] = [(an_hour_ago, 77)]
    handler.first_offset_at[("orders", 1)] = [(an_hour_ago - 86_400_000, 12)]  # a day earlier
    # No record since, or an empty partition: the log end.
    assert new_offsets(bootstrap, capsys, *args, "--by-duration", "PT2H") == [77, 50, 0]
    assert handler.commits == []


def test_export_prints_the_plan_as_csv_that_from_file_takes_back(
    bootstrap: str, handler: GroupAdminHandler, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    args = ["--reset-offsets", "--group", "idle", "--topic", "orders", "--to-latest", "--export"]
    assert tool(bootstrap, *args) == 0
    exported = capsys.readouterr().out
    assert exported == "orders,0,100\norders,1,50\norders,2,0\n\n"
    plan = tmp_path / "plan.csv"
    plan.write_text(exported.replace("orders,1,50", "orders,1,20").replace("orders,2,0\n", ""))
    from_file = ["--reset-offsets", "--group", "idle", "--from-file", str(plan)]
    assert tool(bootstrap, *from_file, "--execute", "--export") == 0
    assert capsys.readouterr().out == "orders,0,100\norders,1,20\n\n"
    assert handler.commits == [{("orders", 0): 100, ("orders", 1): 20}]
    # More than one group: the group comes first, and a group the file lacks resets nothing.
    both = ["--reset-offsets", "--group", "idle", "--group", "spare"]
    handler.groups["spare"] = Group(offsets={("audit", 0): 6})
    assert tool(bootstrap, *both, "--topic", "audit", "--to-earliest", "--export") == 0
    assert capsys.readouterr().out == "idle,audit,0,5\nspare,audit,0,5\n\n"
    plan.write_text("idle,orders,0,7\nidle,orders,1,999\nother,orders,0,1\n")
    assert tool(bootstrap, *both, "--from-file", str(plan), "--execute") == 0
    captured = capsys.readouterr()
    assert "Error: No reset plan for group spare found" in captured.err
    assert f"higher than latest offset {FOR} orders-1. Value will be set to 50" in captured.err
    assert handler.commits[1:] == [{("orders", 0): 7, ("orders", 1): 50}]
    assert handler.groups["spare"].offsets == {("audit", 0): 6}


@pytest.mark.parametrize(
    ("content", "group_args", "message"),
    [
        ("orders,0,5\norders,x,5\n", ["--group", "idle"], "line 2: 'orders,x,5' is not "
         "topic,partition,offset"),
        ("orders,0,-1\n", ["--group", "idle"], "line 1: 'orders,0,-1' is not topic,partition,"
         "offset (for the one --group) or group,topic,partition,offset"),
        ("orders,0,5\n", ["--group", "idle", "--group", "spare"], "line 1: 'orders,0,5' is not "
         "group,topic,partition,offset"),
    ],
)  # fmt: skip
def test_a_bad_reset_plan_file_names_the_line_and_changes_nothing(
    bootstrap: str,
    handler: GroupAdminHandler,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    content: str,
    group_args: list[str],
    message: str,
) -> None:
    plan = tmp_path / "plan.csv"
    plan.write_text(content)
    args = ["--reset-offsets", *group_args, "--from-file", str(plan), "--execute"]
    assert tool(bootstrap, *args) == 1
    assert capsys.readouterr().err == (
        f"INVALID_REQUEST: --from-file {plan} {message} (partitions and offsets are numbers "
        "from 0)\n"
    )
    assert handler.commits == [] and handler.requests == []
    missing = ["--reset-offsets", "--group", "idle", "--from-file", str(tmp_path / "nope.csv")]
    missing.append("--dry-run")
    assert tool(bootstrap, *missing) == 1
    assert capsys.readouterr().err.startswith(
        f"INVALID_REQUEST: --from-file {tmp_path / 'nope.csv'}: cannot read the reset plan"
    )


def test_reset_refuses_a_group_with_active_members_and_changes_nothing(
    bootstrap: str, handler: GroupAdminHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--reset-offsets", "--group", "billing", "--all-topics", "--to-earliest", "--execute"]
    assert tool(bootstrap, *args) == 1
    assert capsys.readouterr().err == (
        "NON_EMPTY_GROUP: Assignments can only be reset if the group 'billing' is inactive, "
        "but the current state is Stable.\n"
    )
    assert handler.commits == [] and "offset_commit" not in handler.requests


def test_reset_of_an_unknown_topic_names_it(
    bootstrap: str, handler: GroupAdminHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["--reset-offsets", "--group", "idle", "--topic", "nope", "--to-latest", "--execute"]
    assert tool(bootstrap, *args) == 1
    assert capsys.readouterr().err.startswith("UNKNOWN_TOPIC_OR_PARTITION: topic 'nope'")
    assert handler.commits == []


# --------------------------------------------------------------------------------- delete


def test_delete_groups_reports_each(
    bootstrap: str, handler: GroupAdminHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tool(bootstrap, "--delete", "--group", "idle") == 0
    assert capsys.readouterr().out == (
        "Deletion of requested consumer groups ('idle') was successful.\n"
    )
    assert "idle" not in handler.groups
    assert tool(bootstrap, "--delete", "--group", "billing", "--group", "gone") == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "* Group 'billing' could not be deleted due to: NON_EMPTY_GROUP: The group is not empty.",
        "* Group 'gone' could not be deleted due to: GROUP_ID_NOT_FOUND: The group id does not "
        "exist.",
    ]
    assert captured.err.startswith("NON_EMPTY_GROUP: Deletion of some consumer groups failed")
    assert "billing" in handler.groups


def test_delete_offsets_of_a_topic(
    bootstrap: str, handler: GroupAdminHandler, capsys: pytest.CaptureFixture[str]
) -> None:
    assert tool(bootstrap, "--delete-offsets", "--group", "idle", "--topic", "orders") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "Request succeed for deleting offsets with topic orders group idle"
    assert [line.split() for line in lines[2:]] == [
        ["TOPIC", "PARTITION", "STATUS"],
        ["orders", "0", "Successful"],
        ["orders", "1", "Successful"],
        ["orders", "2", "Successful"],
    ]
    assert handler.groups["idle"].offsets == {}
    assert tool(bootstrap, "--delete-offsets", "--group", "billing", "--topic", "orders:0") == 1
    captured = capsys.readouterr()
    assert "Error: GROUP_SUBSCRIBED_TO_TOPIC" in captured.out
    assert captured.err.startswith("GROUP_SUBSCRIBED_TO_TOPIC: ")
    assert handler.groups["billing"].offsets[("orders", 0)] == 90


# --------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--describe"], "--describe takes one of these options: --group, --all-groups"),
        (["--describe", "--group", "g", "--members", "--state"], "at most one of these options"),
        (
            ["--reset-offsets", "--group", "g", "--to-earliest"],
            "one of these scopes: --topic, --all-topics",
        ),
        (
            ["--reset-offsets", "--group", "g", "--all-topics"],
            "requires one of the following scenarios",
        ),
        (["--reset-offsets", "--all-topics", "--to-earliest", "--to-latest"], "not allowed with"),
        (["--list", "--to-earliest"], "--to-earliest goes with --reset-offsets only"),
        (["--delete-offsets", "--group", "g"], "--delete-offsets takes the following options"),
        (["--describe", "--group", "g", "--state", "stable"], "does not take a value for --state"),
        (
            ["--reset-offsets", "--group", "g", "--all-topics", "--to-offset", "x"],
            "--to-offset: invalid int",
        ),
        (["--list", "--export"], "--export goes with --reset-offsets only"),
        (
            ["--reset-offsets", "--group", "g", "--all-topics", "--to-latest", "--export",
             "--format", "json"],
            "--export prints CSV; it does not go with --format json",
        ),
        (
            ["--reset-offsets", "--group", "g", "--topic", "t", "--from-file", "plan.csv"],
            "--from-file takes its partitions from the file",
        ),
        (
            ["--reset-offsets", "--group", "g", "--to-current", "--from-file", "plan.csv"],
            "not allowed with",
        ),
    ],
)  # fmt: skip
def test_bad_flags_are_usage_errors(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exited:
        tool("127.0.0.1:1", *args)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--topic", "orders:x"],
            "--topic: invalid partition 'x' specified in topic arg 'orders:x'",
        ),
        (
            ["--topic", "a:1:2"],
            "--topic: invalid topic arg 'a:1:2', expected topic name and partitions",
        ),
        (["--all-topics", "--to-datetime", "yesterday"], "--to-datetime 'yesterday' is not a date"),
    ],
)
def test_bad_values_name_the_flag_and_change_nothing(
    bootstrap: str,
    handler: GroupAdminHandler,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    reset = ["--reset-offsets", "--group", "idle", "--execute"]
    if "--to-datetime" not in args:
        reset.append("--to-earliest")
    assert tool(bootstrap, *reset, *args) == 1
    assert capsys.readouterr().err.startswith(f"INVALID_REQUEST: {message}")
    assert handler.commits == []


def test_a_bad_bootstrap_names_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    assert tool("localhost", "--list") == 1
    assert capsys.readouterr().err.startswith("INVALID_REQUEST: --bootstrap-server 'localhost'")


def test_an_unreachable_broker_is_broker_not_available(capsys: pytest.CaptureFixture[str]) -> None:
    assert tool(f"127.0.0.1:{free_port()}", "--list") == 1
    assert capsys.readouterr().err.startswith("BROKER_NOT_AVAILABLE: cannot connect to 127.0.0.1:")


# --------------------------------------------------------------------------------- SASL


@pytest.fixture
def sasl_bootstrap(handler: GroupAdminHandler) -> Iterator[str]:
    credential = ScramCredential.from_password(SHA512, PASSWORD)
    authentication = SaslAuthentication(
        (SHA512,), lambda user, mechanism: credential if user == "alice" else None
    )
    server = KafkaServer(handler, ListenerSettings(name="SASL_PLAINTEXT"), REGISTRY, authentication)
    server.start()
    handler.port = server.address[1]
    try:
        yield f"127.0.0.1:{handler.port}"
    finally:
        server.stop()


def _jaas(password: str) -> str:
    return (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
        f'password="{password}";'
    )


def test_the_tool_logs_in_with_scram_from_the_command_config(
    sasl_bootstrap: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.jaas.config={_jaas(PASSWORD)}\n"
    )
    assert tool(sasl_bootstrap, "--command-config", str(config), "--list") == 0
    assert capsys.readouterr().out.splitlines() == ["billing", "idle"]
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.jaas.config={_jaas('wrong-one')}\n"
    )
    assert tool(sasl_bootstrap, "--command-config", str(config), "--list") == 1
    captured = capsys.readouterr()
    assert captured.err.startswith("SASL_AUTHENTICATION_FAILED: 127.0.0.1:")
    assert "wrong-one" not in captured.err + captured.out and PASSWORD not in captured.err


def test_a_client_with_sasl_settings_but_no_user_is_refused_before_connecting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n")
    assert tool("127.0.0.1:1", "--command-config", str(config), "--list") == 1
    assert capsys.readouterr().err == (
        f"INVALID_CONFIG: --command-config {config}: sasl.username is missing from the client "
        "properties: SCRAM-SHA-512 needs a user (sasl.jaas.config, or sasl.username and "
        "sasl.password)\n"
    )


def test_the_client_speaks_to_the_coordinator_through_the_admin_api(
    bootstrap: str, handler: GroupAdminHandler
) -> None:
    with KafkaClient(bootstrap, KafkaClientSecurity()) as client:
        admin = GroupAdmin(client)
        described = admin.describe_group("billing")
        assert [m.assignment for m in described.members] == [
            (("orders", 0), ("orders", 1)),
            (("orders", 2),),
        ]
        assert admin.committed_offsets("billing", [("orders", 1), ("orders", 2)]) == {
            ("orders", 1): 20
        }
        found = client.partitions(["orders", "nope"])
        assert found["orders"] == [0, 1, 2]
        refused = found["nope"]
        assert isinstance(refused, TieredError)
        assert refused.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
