"""The ``zookeeper.ssl.*`` keys (``tiered.security.zookeeper_tls``): what kazoo is given, and a
clear error naming the key for every bad value, before any connection."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from broker.config import BrokerConfig
from cli.security.certs import CertificateAuthority
from controller.config import ControllerConfig
from tiered.security.sensitive_configs import is_sensitive_config
from tiered.security.zookeeper_auth import SECURITY_KEYS, ZooKeeperSecurity, security_properties
from tiered.security.zookeeper_tls import TLS_KEYS, ZooKeeperTls

KEY_PASSWORD = "keystore-secret"


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("zk-tls-config")
    ca = CertificateAuthority.create()
    issued = ca.issue("CN=broker-1,OU=brokers,O=tiered")
    plain = issued.write_pem_files(root, "plain")
    encrypted = issued.write_pem_files(root, "encrypted", key_password=KEY_PASSWORD)
    (root / "garbage.pem").write_text("not pem\n")
    return {
        "ca": ca.write_certificate(root / "ca.pem"),
        "keystore": plain.keystore,
        "certificate_only": plain.certificate,
        "encrypted": encrypted.keystore,
        "garbage": root / "garbage.pem",
    }


def config(files: dict[str, Path], **overrides: str) -> dict[str, str]:
    values = {
        "zookeeper.ssl.client.enable": "true",
        "zookeeper.ssl.keystore.location": str(files["keystore"]),
        "zookeeper.ssl.keystore.type": "PEM",
        "zookeeper.ssl.truststore.location": str(files["ca"]),
        "zookeeper.ssl.truststore.type": "PEM",
    }
    values.update({key.replace("_", "."): value for key, value in overrides.items()})
    return values


def test_off_by_default_and_when_disabled(files: dict[str, Path]) -> None:
    assert ZooKeeperSecurity.from_config({}).kazoo_tls_options() == {}
    # The other keys are not read while TLS is off: a bad one does not matter then.
    disabled = config(files, zookeeper_ssl_client_enable="false")
    disabled["zookeeper.ssl.keystore.type"] = "JKS"
    assert ZooKeeperTls.from_config(disabled) is None


def test_kazoo_gets_the_keystore_as_client_certificate_and_verifies_the_server(
    files: dict[str, Path],
) -> None:
    options = ZooKeeperSecurity.from_config(config(files)).kazoo_tls_options()
    assert options == {
        "use_ssl": True,
        "verify_certs": True,
        "check_hostname": True,
        "ca": str(files["ca"]),
        "certfile": str(files["keystore"]),
        "keyfile": str(files["keystore"]),
        "keyfile_password": None,
    }
    no_hostname = config(files, zookeeper_ssl_endpoint_identification_algorithm="")
    assert ZooKeeperTls.from_config(no_hostname).kazoo_options()["check_hostname"] is False  # type: ignore[union-attr]


def test_an_encrypted_key_needs_its_password(files: dict[str, Path]) -> None:
    encrypted = config(files, zookeeper_ssl_keystore_location=str(files["encrypted"]))
    with pytest.raises(ValueError, match=r"zookeeper\.ssl\.keystore\.location=.*password"):
        ZooKeeperTls.from_config(encrypted)
    encrypted["zookeeper.ssl.keystore.password"] = KEY_PASSWORD
    tls = ZooKeeperTls.from_config(encrypted)
    assert tls is not None and tls.kazoo_options()["keyfile_password"] == KEY_PASSWORD
    assert KEY_PASSWORD not in repr(tls)
    assert is_sensitive_config("zookeeper.ssl.keystore.password")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "zookeeper.ssl.client.enable",
            "yes",
            r"zookeeper\.ssl\.client\.enable='yes'.*true, false",
        ),
        ("zookeeper.ssl.keystore.type", "JKS", r"zookeeper\.ssl\.keystore\.type='JKS'.*PEM"),
        ("zookeeper.ssl.truststore.type", "PKCS12", r"truststore\.type='PKCS12'.*PEM"),
        (
            "zookeeper.ssl.endpoint.identification.algorithm",
            "dns",
            r"identification\.algorithm='dns'.*HTTPS",
        ),
        ("zookeeper.ssl.keystore.location", "/no/such.pem", r"keystore\.location=/no/such\.pem"),
        ("zookeeper.ssl.truststore.location", "/no/ca.pem", r"truststore\.location=/no/ca\.pem"),
    ],
)
def test_a_bad_value_names_its_key_and_the_valid_values(
    files: dict[str, Path], key: str, value: str, message: str
) -> None:
    values = config(files)
    values[key] = value
    with pytest.raises(ValueError, match=message):
        ZooKeeperSecurity.from_config(values)


@pytest.mark.parametrize(
    ("key", "file"),
    [
        ("zookeeper.ssl.keystore.location", "certificate_only"),
        ("zookeeper.ssl.keystore.location", "garbage"),
        ("zookeeper.ssl.truststore.location", "garbage"),
    ],
)
def test_a_file_of_the_wrong_kind_is_refused_before_connecting(
    files: dict[str, Path], key: str, file: str
) -> None:
    values = config(files)
    values[key] = str(files[file])
    with pytest.raises(ValueError, match=re.escape(f"{key}={files[file]}")):
        ZooKeeperTls.from_config(values)


def test_a_component_given_a_subset_gets_the_tls_keys_too(files: dict[str, Path]) -> None:
    """The RLMM gets the ``rlmm.*`` keys plus the ZooKeeper security keys of its process."""
    assert set(TLS_KEYS) <= set(SECURITY_KEYS)
    values = {**config(files), "rlmm.backend": "zookeeper", "listeners": "GRPC://x:1"}
    assert security_properties(values) == config(files)


def test_the_daemons_give_tls_to_the_store_the_registration_and_the_rlmm(
    files: dict[str, Path], tmp_path: Path
) -> None:
    tls = config(files)
    broker = BrokerConfig.from_properties(
        {"node.id": "1", "log.dirs": str(tmp_path), "zookeeper.connect": "h:1", **tls}
    )
    assert broker.zookeeper_security.kazoo_tls_options()["use_ssl"] is True
    assert ZooKeeperSecurity.from_config(broker.rlmm).tls == broker.zookeeper_security.tls
    controller = ControllerConfig.from_properties(
        {"node.id": "1", "metadata.store": "zookeeper", "zookeeper.connect": "h:1", **tls}
    )
    # What ZooKeeperMetadataStore.from_config reads its security from.
    assert ZooKeeperSecurity.from_config(controller.store).tls == broker.zookeeper_security.tls
    assert ZooKeeperSecurity.from_config(controller.remote).tls is not None  # the RLMM's
    with pytest.raises(ValueError, match=r"zookeeper\.ssl\.keystore\.type='JKS'"):
        BrokerConfig.from_properties(
            {
                "node.id": "1",
                "log.dirs": str(tmp_path),
                **config(files, zookeeper_ssl_keystore_type="JKS"),
            }
        )
