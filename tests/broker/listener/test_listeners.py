"""``listeners`` and ``advertised.listeners``: Kafka's NAME://host:port lists (tiered.net) and
what the broker's config makes of them."""

from __future__ import annotations

import socket
import ssl
import subprocess
import sys
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from cli.launch.ports import free_port
from tests.support.certs import ClusterCertificates
from tests.support.processes import REPO
from tiered.cluster.model import BrokerRegistration
from tiered.cluster.serde import broker_registration_from_proto, broker_registration_to_proto
from tiered.cluster.zk_znodes import decode_broker_registration, encode_broker_registration
from tiered.net import (
    GRPC,
    PLAINTEXT,
    SASL_SSL,
    SSL,
    Listener,
    advertised_listeners,
    parse_listener,
    parse_listeners,
)
from tiered.security.scram import ScramMechanism


def broker_config(tmp_path: Path, **extra: str) -> BrokerConfig:
    return BrokerConfig.from_properties({"node.id": "1", "log.dirs": str(tmp_path), **extra})


def test_a_listener_list_is_read_by_name_and_a_bare_address_is_grpc() -> None:
    found = parse_listeners(" GRPC://127.0.0.1:9091 , plaintext://h:9092,")
    assert found == {
        GRPC: Listener(GRPC, "127.0.0.1", 9091),
        PLAINTEXT: Listener(PLAINTEXT, "h", 9092),
    }
    assert parse_listeners("127.0.0.1:1") == {GRPC: Listener(GRPC, "127.0.0.1", 1)}
    assert str(found[PLAINTEXT]) == "PLAINTEXT://h:9092" and found[PLAINTEXT].address == "h:9092"


@pytest.mark.parametrize(
    ("value", "fragments"),
    [
        ("SASL_TLS://h:1,GRPC://h:2", ["listeners", "unknown listener name", "NAME://host:port"]),
        ("FOO://h:1", ["unknown listener name", "'FOO://h:1'", "PLAINTEXT"]),
        ("GRPC://h:1,GRPC://h:2", ["names listener GRPC twice"]),
        ("PLAINTEXT://h", ["'PLAINTEXT://h' is not NAME://host:port"]),
        ("GRPC://h:70000", ["is not NAME://host:port"]),
        (" , ", ["listeners is empty"]),
    ],
)
def test_bad_listener_lists_name_the_key_and_the_expected_form(
    value: str, fragments: list[str]
) -> None:
    with pytest.raises(ValueError) as rejected:
        parse_listeners(value)
    assert all(f in str(rejected.value) for f in fragments), rejected.value


def test_advertised_listeners_replace_the_bound_address_per_name() -> None:
    bound = parse_listeners("GRPC://0.0.0.0:9091,PLAINTEXT://127.0.0.1:9092")
    advertised = advertised_listeners(bound, "GRPC://broker-1.example:9091")
    assert advertised[GRPC] == Listener(GRPC, "broker-1.example", 9091)
    assert advertised[PLAINTEXT] == bound[PLAINTEXT]
    with pytest.raises(ValueError, match=r"clients cannot connect to '0\.0\.0\.0:9091'"):
        advertised_listeners(bound, None)
    with pytest.raises(ValueError, match=r"advertised\.listeners names PLAINTEXT"):
        advertised_listeners(parse_listeners("h:1"), "PLAINTEXT://h:2")


def test_the_controller_takes_its_grpc_address_as_before() -> None:
    assert parse_listener("127.0.0.1:9093") == ("127.0.0.1", 9093)
    assert parse_listener("GRPC://h:1") == ("h", 1)
    assert parse_listener("PLAINTEXT://h:2") == ("h", 2)  # a gRPC-only config of old
    with pytest.raises(ValueError, match="listeners='x' is not valid"):
        parse_listener("x")


def test_a_broker_has_a_grpc_and_a_kafka_listener(tmp_path: Path) -> None:
    config = broker_config(
        tmp_path,
        listeners="GRPC://127.0.0.1:9091,PLAINTEXT://127.0.0.1:0",
        **{"socket.request.max.bytes": "4096", "num.io.threads": "3"},
    )
    assert (config.host, config.port) == ("127.0.0.1", 9091)
    [kafka] = config.kafka_listeners
    assert (kafka.settings.host, kafka.settings.port) == ("127.0.0.1", 0)
    assert (kafka.settings.max_request_bytes, kafka.settings.handler_threads) == (4096, 3)
    assert kafka.advertised == Listener(PLAINTEXT, "127.0.0.1", 0)  # 0: the port bound
    assert kafka.settings.tls is None and kafka.sasl_mechanisms == ()
    old = broker_config(tmp_path, listeners="127.0.0.1:9091")
    assert (old.host, old.port, old.kafka_listeners) == ("127.0.0.1", 9091, ())


def test_socket_receive_buffer_bytes_is_kafkas_by_default_and_minus_one_is_the_os_default(
    tmp_path: Path,
) -> None:
    listeners = "GRPC://127.0.0.1:9091,PLAINTEXT://127.0.0.1:0"
    [kafka] = broker_config(tmp_path, listeners=listeners).kafka_listeners
    assert kafka.settings.receive_buffer_bytes == 102400
    for value, expected in (("-1", None), ("65536", 65536)):
        config = broker_config(
            tmp_path, listeners=listeners, **{"socket.receive.buffer.bytes": value}
        )
        assert config.kafka_listeners[0].settings.receive_buffer_bytes == expected
    for bad in ("0", "-2", "big"):
        with pytest.raises(ValueError, match=r"socket\.receive\.buffer\.bytes=.*not valid"):
            broker_config(tmp_path, listeners=listeners, **{"socket.receive.buffer.bytes": bad})


def test_a_broker_serves_every_kafka_listener_in_order_each_with_its_own_settings(
    tmp_path: Path, certificates: ClusterCertificates
) -> None:
    config = broker_config(
        tmp_path,
        listeners=(
            "GRPC://127.0.0.1:9091,SASL_SSL://127.0.0.1:9094,PLAINTEXT://127.0.0.1:9092,"
            "SSL://127.0.0.1:9093"
        ),
        **{
            "advertised.listeners": "SSL://ssl.example:9093,SASL_SSL://sasl.example:9094",
            **certificates.server_properties(certificates.broker),
            "listener.name.ssl.ssl.client.auth": "required",  # the SSL listener's own
        },
    )
    assert [k.name for k in config.kafka_listeners] == [SASL_SSL, PLAINTEXT, SSL]
    assert [str(k.advertised) for k in config.kafka_listeners] == [
        "SASL_SSL://sasl.example:9094",
        "PLAINTEXT://127.0.0.1:9092",
        "SSL://ssl.example:9093",
    ]
    sasl_ssl, plaintext, ssl_listener = config.kafka_listeners
    assert sasl_ssl.sasl_mechanisms == (ScramMechanism.SCRAM_SHA_512,)
    assert plaintext.sasl_mechanisms == ssl_listener.sasl_mechanisms == ()
    assert plaintext.settings.tls is None
    assert sasl_ssl.settings.tls is not None and ssl_listener.settings.tls is not None
    assert sasl_ssl.settings.tls.context.verify_mode is ssl.CERT_NONE
    assert ssl_listener.settings.tls.context.verify_mode is ssl.CERT_REQUIRED


@pytest.mark.parametrize(
    ("listeners", "fragment"),
    [
        ("PLAINTEXT://127.0.0.1:9092", "has no gRPC listener"),
        ("GRPC://127.0.0.1:0", "has no gRPC listener"),
        ("GRPC://h:1,PLAINTEXT://h:2,PLAINTEXT://h:3", "names listener PLAINTEXT twice"),
    ],
)
def test_a_broker_without_a_grpc_listener_is_refused(
    tmp_path: Path, listeners: str, fragment: str
) -> None:
    with pytest.raises(ValueError) as rejected:
        broker_config(tmp_path, listeners=listeners)
    assert fragment in str(rejected.value) and "listeners" in str(rejected.value)


def test_a_registration_carries_the_kafka_endpoints_both_ways() -> None:
    registration = BrokerRegistration(
        3,
        "127.0.0.1",
        9091,
        kafka_endpoints=[
            Listener(SASL_SSL, "broker-3.example", 9094),
            Listener(PLAINTEXT, "broker-3.example", 9092),
            Listener(SSL, "ssl.example", 9093),
        ],
    )
    assert (
        broker_registration_from_proto(broker_registration_to_proto(registration)) == registration
    )
    data = encode_broker_registration(registration)
    assert (  # Kafka's znode fields
        b'"endpoints":["SASL_SSL://broker-3.example:9094","PLAINTEXT://broker-3.example:9092",'
        b'"SSL://ssl.example:9093"]' in data
    )
    assert b'"listener_security_protocol_map":{"SASL_SSL":"SASL_SSL"' in data
    assert decode_broker_registration(3, data) == registration
    assert registration.kafka_endpoint() == Listener(PLAINTEXT, "broker-3.example", 9092)
    assert registration.kafka_endpoint(SSL) == Listener(SSL, "ssl.example", 9093)
    # A znode written before brokers had Kafka listeners: none.
    old = decode_broker_registration(3, b'{"version":5,"host":"h","port":1}')
    assert old.kafka_endpoints == () and old.kafka_endpoint() is None


@pytest.mark.parametrize(
    ("listeners", "fragments"),
    [
        ("PLAINTEXT://127.0.0.1:9092", ["has no gRPC listener", "GRPC://127.0.0.1:9091"]),
        (
            "GRPC://127.0.0.1:9091,SSL://127.0.0.1:9093,SSL://127.0.0.1:9094",
            ["names listener SSL twice"],
        ),
    ],
)
@pytest.mark.processes
def test_the_broker_refuses_such_listeners_at_start(
    tmp_path: Path, listeners: str, fragments: list[str]
) -> None:
    config = tmp_path / "broker.properties"
    config.write_text(f"node.id=1\nlog.dirs={tmp_path / 'logs'}\nlisteners={listeners}\n")
    started = run_broker(config)
    assert started.returncode == 2
    [line] = started.stderr.splitlines()
    assert line.startswith("INVALID_CONFIG: listeners")
    assert all(fragment in line for fragment in fragments), line


@pytest.mark.processes
def test_a_grpc_port_already_in_use_stops_the_broker_instead_of_sharing_it(tmp_path: Path) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:  # another daemon's port
        port = taken.getsockname()[1]
        config = tmp_path / "broker.properties"
        config.write_text(
            f"node.id=1\nlog.dirs={tmp_path / 'logs'}\nlisteners=GRPC://127.0.0.1:{port}\n"
        )
        started = run_broker(config)
    assert started.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in started.stderr


@pytest.mark.processes
def test_a_kafka_listener_whose_port_is_taken_stops_the_broker(tmp_path: Path) -> None:
    """The listeners bound before it are closed again: the broker exits, no traceback."""
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        config = tmp_path / "broker.properties"
        config.write_text(
            f"node.id=1\nlog.dirs={tmp_path / 'logs'}\nlisteners=GRPC://127.0.0.1:{free_port()},"
            f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}\n"
        )
        started = run_broker(config)
    assert started.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port} (Kafka SASL_PLAINTEXT)" in started.stderr
    assert "Traceback" not in started.stderr


def test_free_port_never_hands_out_a_port_twice_nor_an_ephemeral_one() -> None:
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    first_ephemeral = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert all(1024 <= port < first_ephemeral for port in ports), ports


def run_broker(config: Path) -> subprocess.CompletedProcess[str]:
    """A broker process that is expected to refuse to start."""
    return subprocess.run(
        [sys.executable, "-m", "broker.main", "--config", str(config)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
