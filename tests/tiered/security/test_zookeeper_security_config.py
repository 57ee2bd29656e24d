"""The ZooKeeper identity's configuration (the JAAS file named by ``zookeeper.jaas.config.file``),
the znode ACL rule, the sensitive config keys and the metrics endpoints' default address: units,
no server."""

from __future__ import annotations

from pathlib import Path

import pytest
from kazoo.security import ACL, CREATOR_ALL_ACL, READ_ACL_UNSAFE, Id, Permissions

from broker.config import BrokerConfig
from broker.kafka.config_entries import broker_entries
from controller.config import ControllerConfig
from tiered.security.jaas import JaasSyntaxError, parse_jaas_entries, parse_jaas_file
from tiered.security.sensitive_configs import is_sensitive_config
from tiered.security.zookeeper_acl import (
    ZooKeeperAuthenticationError,
    check_may_change,
    is_sensitive_znode,
    znode_acl,
)
from tiered.security.zookeeper_auth import (
    ZooKeeperCredentials,
    ZooKeeperSecurity,
    jaas_client_file_text,
    read_jaas_credentials,
)

SECRET = "s3cr3t-Zk-pw"
KEY = "zookeeper.jaas.config.file"


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "zk.jaas"
    path.write_text(text)
    return str(path)


def test_the_client_section_of_a_kafka_style_jaas_file_is_read(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        f"""// Kafka's broker JAAS file
KafkaServer {{
    org.apache.kafka.common.security.scram.ScramLoginModule required
    username="admin" password="other";
}};
/* the ZooKeeper client */
Client {{
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="tiered"
    password="{SECRET}";
}};
""",
    )
    credentials = read_jaas_credentials(path)
    assert (credentials.username, credentials.password) == ("tiered", SECRET)
    assert SECRET not in repr(credentials) and SECRET not in repr(ZooKeeperSecurity(credentials))
    assert credentials.digest_id == "tiered:" + "".join(credentials.digest_id.split(":")[1:])


def test_jaas_quoting_and_the_inline_form() -> None:
    sections = parse_jaas_file('A { m.M optional k="a\\"b;c}" n=bare; };')
    assert sections["A"][0].options == {"k": 'a"b;c}', "n": "bare"}
    assert sections["A"][0].flag == "optional"
    entries = parse_jaas_entries(f'x.ScramLoginModule required username="u" password="{SECRET}";')
    assert entries[0].options["password"] == SECRET and SECRET not in repr(entries[0])
    with pytest.raises(JaasSyntaxError, match="line 1"):
        parse_jaas_file(f'A {{ m.M required password="{SECRET}" }};')


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (None, "cannot read the file"),
        (f'Other {{ m.M required password="{SECRET}"; }};', "no Client section"),
        (f'Client {{ m.M required password="{SECRET}" ', "not a JAAS file"),
        (
            f'Client {{ org.apache.zookeeper.server.auth.DigestLoginModule required password="{SECRET}"; }};',
            "has no username",
        ),
        (
            f'Client {{ com.sun.security.auth.module.Krb5LoginModule required password="{SECRET}"; }};',
            "exactly one org.apache.zookeeper.server.auth.DigestLoginModule",
        ),
    ],
)
def test_a_missing_or_malformed_file_names_the_key(
    tmp_path: Path, text: str | None, says: str
) -> None:
    path = str(tmp_path / "absent.jaas") if text is None else write(tmp_path, text)
    with pytest.raises(ValueError) as error:
        ZooKeeperSecurity.from_config({KEY: path})
    assert f"{KEY}={path}" in str(error.value) and says in str(error.value)
    assert SECRET not in str(error.value)


def test_set_acl_needs_credentials_and_a_boolean(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=rf"zookeeper\.set\.acl=true needs {KEY}"):
        ZooKeeperSecurity.from_config({"zookeeper.set.acl": "true"})
    with pytest.raises(ValueError, match=r"zookeeper\.set\.acl='yes' is not valid; valid values"):
        ZooKeeperSecurity.from_config({"zookeeper.set.acl": "yes"})
    assert ZooKeeperSecurity.from_config({}) == ZooKeeperSecurity()


def test_the_daemons_read_the_identity_and_hand_it_to_the_rlmm(tmp_path: Path) -> None:
    path = write(tmp_path, jaas_client_file_text("t", SECRET))
    security = {KEY: path, "zookeeper.set.acl": "true"}
    broker = BrokerConfig.from_properties(
        {"node.id": "1", "log.dirs": str(tmp_path), "zookeeper.connect": "h:1", **security}
    )
    assert broker.zookeeper_security.set_acl and broker.rlmm[KEY] == path
    controller = ControllerConfig.from_properties(
        {"node.id": "1", "metadata.store": "zookeeper", "zookeeper.connect": "h:1", **security}
    )
    assert controller.store[KEY] == path and controller.remote[KEY] == path
    with pytest.raises(ValueError, match=KEY):
        BrokerConfig.from_properties(
            {"node.id": "1", "log.dirs": str(tmp_path), KEY: str(tmp_path / "none")}
        )


def test_the_acl_rule_goes_by_path() -> None:
    creator, world_read = list(CREATOR_ALL_ACL), list(READ_ACL_UNSAFE)
    assert znode_acl("/brokers/topics/t", set_acl=False) is None
    assert znode_acl("/brokers/topics/t", set_acl=True) == creator + world_read
    for sensitive in ("/config/users", "/config/users/alice", "/config/brokers/1"):
        assert is_sensitive_znode(sensitive) and znode_acl(sensitive, True) == creator
    for ordinary in ("/config", "/config/topics/users", "/config/usersx"):
        assert not is_sensitive_znode(ordinary)


def test_only_another_digest_owner_is_an_authentication_failure() -> None:
    ours = ZooKeeperCredentials("tiered", SECRET, "/etc/zk.jaas")
    theirs = ZooKeeperCredentials("tiered", "another")
    security = ZooKeeperSecurity(ours, set_acl=True)

    def owned_by(credentials: ZooKeeperCredentials) -> list[ACL]:
        return [
            ACL(Permissions.ALL, Id("digest", credentials.digest_id)),
            ACL(Permissions.READ, Id("world", "anyone")),
        ]

    check_may_change("/c", owned_by(ours), security)
    check_may_change("/c", [ACL(Permissions.ALL, Id("world", "anyone"))], security)
    check_may_change(
        "/c", [ACL(Permissions.ALL, Id("sasl", "kafka"))], security
    )  # not ours to judge
    with pytest.raises(ZooKeeperAuthenticationError) as error:
        check_may_change("/c", owned_by(theirs), security)
    assert "wrong password" in str(error.value) and f"{KEY}=/etc/zk.jaas" in str(error.value)
    assert SECRET not in str(error.value) and theirs.digest_id not in str(error.value)
    with pytest.raises(ZooKeeperAuthenticationError, match="no credentials are configured"):
        check_may_change("/c", owned_by(theirs), ZooKeeperSecurity())
    with pytest.raises(ZooKeeperAuthenticationError, match="another identity"):
        check_may_change("/c", None, security)


def test_one_list_of_sensitive_keys() -> None:
    for key in (
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "sasl.jaas.config",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config",
        "listener.name.ssl.ssl.keystore.key",
        "zookeeper.jaas.config.file",
        "remote.storage.s3.credentials.file",
        "rsm.config.s3.secret.key",
    ):
        assert is_sensitive_config(key), key
    for key in ("ssl.keystore.location", "remote.storage.s3.endpoint.url", "zookeeper.set.acl"):
        assert not is_sensitive_config(key), key
    entries = {
        e.name: e
        for e in broker_entries({"ssl.key.password": SECRET, "ssl.keystore.location": "/k.pem"})
    }
    assert entries["ssl.key.password"].value is None and entries["ssl.key.password"].is_sensitive
    assert entries["ssl.keystore.location"].value == "/k.pem"


def test_metrics_bind_loopback_unless_configured(tmp_path: Path) -> None:
    everywhere = {"node.id": "1", "log.dirs": str(tmp_path), "metrics.port": "0"}
    broker = BrokerConfig.from_properties(
        {
            **everywhere,
            "listeners": "GRPC://0.0.0.0:9091",
            "advertised.listeners": "GRPC://broker-1.example:9091",
        }
    )
    assert broker.metrics_host == "127.0.0.1"
    assert BrokerConfig.from_properties({**everywhere, "metrics.host": "0.0.0.0"}).metrics_host == (
        "0.0.0.0"
    )
    controller = ControllerConfig.from_properties(
        {"node.id": "1", "listeners": "0.0.0.0:9093", "metadata.log.dir": str(tmp_path)}
    )
    assert controller.metrics_host == "127.0.0.1"
