"""SCRAM users on a real cluster (both metadata modes): brokers with a SASL_PLAINTEXT Kafka
listener, users managed with ``tiered-configs``, logins by confluent-kafka, kafka-python and a
raw wire client. The tests run in order on one cluster per mode; the last ones fail the
controller over and then search every process's log for the passwords used."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient
from kafka.admin._users import UserScramCredentialDeletion, UserScramCredentialUpsertion
from kio.schema.errors import ErrorCode

from broker.listener.sasl import AUTHENTICATION_FAILED
from cli import configs
from tests.support.cluster import Cluster
from tests.support.kafka_clients import (
    confluent_produce,
    consume,
    python_produce,
    sample,
    wait_hosted,
    without_offsets,
)
from tests.support.kafka_cluster import connected, kafka_bootstrap, shared_cluster
from tests.support.polling import poll_until
from tests.support.sasl import scram_login

pytestmark = pytest.mark.processes

PASSWORDS = {
    "alice": "alice-Pw-7f3a",
    "bob": "bob-Pw-91c2",
    "carol": "carol-Pw-55e0",
    "dan": "dan-Pw-3b8d",
}
USED_PASSWORDS = [*PASSWORDS.values(), "alice-Pw-WRONG", "short-lived-Pw-0d1e"]
FAILED = AUTHENTICATION_FAILED.format(mechanism="SCRAM-SHA-512")


@pytest.fixture(scope="module", params=["kraft", "zookeeper"])
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    root = tmp_path_factory.mktemp(f"scram-{request.param}")
    with shared_cluster(
        request,
        root,
        broker_overrides={b: {"sasl.enabled.mechanisms": "SCRAM-SHA-512"} for b in (1, 2)},
        kafka_listener="SASL_PLAINTEXT",
    ) as c:
        yield c


def sasl_config(user: str, password: str, client: str = "confluent") -> dict[str, Any]:
    if client == "python":
        return {
            "security_protocol": "SASL_PLAINTEXT",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": user,
            "sasl_plain_password": password,
        }
    return {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": user,
        "sasl.password": password,
    }


def tiered_configs(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    capsys.readouterr()
    code = configs.main(["--bootstrap-server", cluster.bootstrap, *args])
    out, err = capsys.readouterr()
    return code, out, err


def add_user(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], user: str, password: str
) -> None:
    code, out, err = tiered_configs(
        cluster,
        capsys,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        user,
        "--add-config",
        f"SCRAM-SHA-512=[password={password}]",
    )
    assert (code, out, err) == (0, f"Completed updating config for user {user}.\n", "")


def login(cluster: Cluster, broker_id: int, user: str, password: str) -> Any:
    with connected(cluster, broker_id) as wire:
        return scram_login(wire, user, password)


def wait_login(cluster: Cluster, user: str, password: str, ok: bool) -> None:
    """Until every broker accepts (or refuses) the login: brokers learn credentials a moment
    after the controller persisted them."""
    for broker_id in cluster.brokers:
        poll_until(
            lambda b=broker_id: (
                (login(cluster, b, user, password).error_code == ErrorCode.none) is ok
            ),
            timeout=30,
            what=f"broker {broker_id} to {'accept' if ok else 'refuse'} {user}",
        )


def test_a_user_made_with_tiered_configs_produces_and_reads_with_both_clients(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    add_user(cluster, capsys, "alice", PASSWORDS["alice"])
    wait_login(cluster, "alice", PASSWORDS["alice"], ok=True)
    cluster.admin.create_topic("secured", 2)
    wait_hosted(cluster, "secured")
    messages = sample(10, partitions=2)
    confluent_produce(cluster, "secured", messages[:5], **sasl_config("alice", PASSWORDS["alice"]))
    python_produce(
        cluster,
        "secured",
        messages[5:],
        enable_idempotence=False,
        **sasl_config("alice", PASSWORDS["alice"], "python"),
    )
    for client in ("confluent", "python"):
        got = consume(
            cluster,
            "secured",
            {0: 0, 1: 0},
            10,
            client=client,
            **sasl_config("alice", PASSWORDS["alice"], client),
        )
        assert sorted(m.value for m in without_offsets(got)) == sorted(m.value for m in messages)


def test_a_wrong_password_or_unknown_user_is_refused_with_58(cluster: Cluster) -> None:
    for user, password in (("alice", "alice-Pw-WRONG"), ("mallory", PASSWORDS["alice"])):
        answer = login(cluster, 1, user, password)
        assert (answer.error_code, answer.error_message) == (
            ErrorCode.sasl_authentication_failed,
            FAILED,
        )


def test_describe_shows_mechanisms_and_iterations_only(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = tiered_configs(
        cluster,
        capsys,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "bob",
        "--add-config",
        f"SCRAM-SHA-512=[iterations=8192,password={PASSWORDS['bob']}]",
    )
    assert code == 0, err
    code, out, err = tiered_configs(cluster, capsys, "--describe", "--entity-type", "users")
    assert (code, err) == (0, "")
    assert out == (
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=4096\n"
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=8192\n"
    )
    code, out, _ = tiered_configs(
        cluster,
        capsys,
        "--describe",
        "--entity-type",
        "users",
        "--entity-name",
        "bob",
        "--format",
        "json",
    )
    assert code == 0
    assert '"iterations": 8192' in out and "salt" not in out and "key" not in out
    wait_login(cluster, "bob", PASSWORDS["bob"], ok=True)


@pytest.mark.parametrize(
    ("add_config", "name", "error"),
    [
        ("SCRAM-SHA-1=[password=x-Pw]", "dave", "INVALID_REQUEST"),
        ("SCRAM-SHA-512=[iterations=1024,password=x-Pw]", "dave", "UNACCEPTABLE_CREDENTIAL"),
        ("SCRAM-SHA-512=[password=]", "dave", "UNACCEPTABLE_CREDENTIAL"),
        ("SCRAM-SHA-512=[pasword=x-Pw]", "dave", "INVALID_REQUEST"),
        ("SCRAM-SHA-512=[password=x-Pw]", "..", "UNACCEPTABLE_CREDENTIAL"),
        ("SCRAM-SHA-512=[password=x-Pw]", "da\tve", "UNACCEPTABLE_CREDENTIAL"),
    ],
)
def test_bad_input_is_a_clear_error_and_changes_nothing(
    cluster: Cluster, capsys: pytest.CaptureFixture[str], add_config: str, name: str, error: str
) -> None:
    code, out, err = tiered_configs(
        cluster,
        capsys,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        name,
        "--add-config",
        add_config,
    )
    assert code == 1 and out == ""
    assert err.startswith(f"{error}: ") and "x-Pw" not in err
    _, described, _ = tiered_configs(cluster, capsys, "--describe", "--entity-type", "users")
    assert "dave" not in described and "'..'" not in described


def test_a_deleted_user_is_refused(cluster: Cluster, capsys: pytest.CaptureFixture[str]) -> None:
    add_user(cluster, capsys, "short-lived", "short-lived-Pw-0d1e")
    wait_login(cluster, "short-lived", "short-lived-Pw-0d1e", ok=True)
    code, _, err = tiered_configs(
        cluster,
        capsys,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "short-lived",
        "--delete-config",
        "SCRAM-SHA-512",
    )
    assert (code, err) == (0, "")
    wait_login(cluster, "short-lived", "short-lived-Pw-0d1e", ok=False)
    answer = login(cluster, 2, "short-lived", "short-lived-Pw-0d1e")
    assert (answer.error_code, answer.error_message) == (
        ErrorCode.sasl_authentication_failed,
        FAILED,
    )
    code, _, err = tiered_configs(
        cluster,
        capsys,
        "--alter",
        "--entity-type",
        "users",
        "--entity-name",
        "short-lived",
        "--delete-config",
        "SCRAM-SHA-512",
    )
    assert code == 1 and err.startswith("RESOURCE_NOT_FOUND: ")


def test_kafka_clients_manage_users_through_any_broker(cluster: Cluster) -> None:
    """AlterUserScramCredentials and DescribeUserScramCredentials from kafka-python's admin
    client, logged in over SASL, forwarded by the broker to the controller."""
    admin = KafkaAdminClient(
        bootstrap_servers=kafka_bootstrap(cluster, 2),
        **sasl_config("alice", PASSWORDS["alice"], "python"),
    )
    try:
        assert admin.alter_user_scram_credentials(
            [
                UserScramCredentialUpsertion("dan", "SCRAM-SHA-512", PASSWORDS["dan"]),
                UserScramCredentialDeletion("nobody", "SCRAM-SHA-512"),
            ]
        ) == {"dan": None, "nobody": "Attempt to delete a user credential that does not exist"}
        described = admin.describe_user_scram_credentials(["dan", "ghost"])
    finally:
        admin.close()
    assert described["dan"] == {
        "error": None,
        "credential_infos": [{"mechanism": 2, "iterations": 4096}],
    }
    assert (
        described["ghost"]["error"] == "Attempt to describe a user credential that does not exist"
    )
    wait_login(cluster, "dan", PASSWORDS["dan"], ok=True)


def test_credentials_survive_a_controller_failover(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    active = cluster.active_controller()
    standby = next(c for c in cluster.controllers if c is not active)
    active.kill()
    standby.wait_for_line("Active as controller", timeout_s=60)
    code, out, _ = tiered_configs(cluster, capsys, "--describe", "--entity-type", "users")
    assert code == 0
    assert out.splitlines() == [
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=4096",
        "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-512=iterations=8192",
        "SCRAM credential configs for user-principal 'dan' are SCRAM-SHA-512=iterations=4096",
    ]
    # The new controller writes, and brokers following it learn: a user made after the failover.
    add_user(cluster, capsys, "carol", PASSWORDS["carol"])
    wait_login(cluster, "carol", PASSWORDS["carol"], ok=True)
    wait_login(cluster, "alice", PASSWORDS["alice"], ok=True)
    active.start()  # back as the standby, for the rest of the module


def test_no_password_appears_in_any_log(cluster: Cluster) -> None:
    for process in [*cluster.controllers, *cluster.brokers.values()]:
        text = "".join(process.output)
        assert text, f"{process.config.name} logged nothing"
        for password in USED_PASSWORDS:
            assert password not in text, f"{process.config.name} logged a password"
