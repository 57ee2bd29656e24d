"""ZooKeeper digest authentication and znode ACLs (``zookeeper.set.acl``) against a real server:
the controller store, the brokers' registration and the RLMM backend all create their znodes so
that only the cluster's digest user can change them, and a sensitive znode so that nobody else
can read it; a process with the wrong credentials is refused, clearly."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError, NotEmptyError
from kazoo.security import ACL, Id, Permissions

from broker.zk_registration import BrokerRegistrationError, BrokerZkRegistration
from controller.store import MetadataStoreError
from controller.store.zookeeper import ZooKeeperMetadataStore
from tests.support.zookeeper import ZooKeeperServer, fresh_chroot, start_kazoo_client
from tiered.cluster.model import BrokerRegistration, TieredState, TopicMetadata
from tiered.rlmm.backend import StorageBackendError
from tiered.rlmm.zookeeper_backend import ZooKeeperBackend
from tiered.security.zookeeper_acl import ZooKeeperAuthenticationError
from tiered.security.zookeeper_auth import (
    ZooKeeperCredentials,
    ZooKeeperSecurity,
    jaas_client_file_text,
)
from tiered.security.zookeeper_migration import main as migration_main
from tiered.security.zookeeper_migration import migrate

pytestmark = [pytest.mark.zookeeper, pytest.mark.processes]

USER = "tiered-cluster"
PASSWORD = "zk-Pa55word-7f3c"
WRONG_PASSWORD = "not-the-password-91a2"


def jaas_file(directory: Path, password: str, user: str = USER) -> str:
    path = directory / f"zk-{uuid.uuid4().hex}.jaas"
    path.write_text(jaas_client_file_text(user, password))
    return str(path)


@pytest.fixture(scope="module")
def secrets_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("zk-secrets")


@pytest.fixture(scope="module")
def secure_config(secrets_dir: Path) -> dict[str, str]:
    return {
        "zookeeper.jaas.config.file": jaas_file(secrets_dir, PASSWORD),
        "zookeeper.set.acl": "true",
    }


@pytest.fixture(scope="module")
def security(secure_config: dict[str, str]) -> ZooKeeperSecurity:
    return ZooKeeperSecurity.from_config(secure_config)


@pytest.fixture
def base(zookeeper_server: ZooKeeperServer, security: ZooKeeperSecurity) -> Iterator[str]:
    """A chroot of this test (open); the cluster's own chroots go below it, created by the
    cluster, as an operator's would be."""
    with fresh_chroot(zookeeper_server, security=security) as connect:
        yield connect


def orders() -> TopicMetadata:
    return TopicMetadata(
        name="orders",
        topic_id=uuid.uuid4(),
        replicas=(1,),
        configs={"remote.storage.enable": "true"},
        tiered_state=TieredState.ENABLED,
        tiered_epoch=0,
    )


def all_znodes(client: KazooClient, root: str) -> list[str]:
    """``root`` and every znode below it that the client may list."""
    found, pending = [], [root]
    while pending:
        path = pending.pop()
        found.append(path)
        try:
            pending += [f"{path}/{child}" for child in client.get_children(path)]
        except NoAuthError:
            continue
    return found


def refused(action: object) -> bool:
    try:
        action()  # type: ignore[operator]
    except NoAuthError:
        return True
    return False


def test_only_the_cluster_identity_changes_its_znodes(
    base: str, secure_config: dict[str, str], security: ZooKeeperSecurity
) -> None:
    cluster, rlmm_root = f"{base}/cluster", f"{base}/rlmm"
    store = ZooKeeperMetadataStore.from_config({"zookeeper.connect": cluster, **secure_config})
    broker = BrokerZkRegistration(
        cluster, BrokerRegistration(broker_id=1, host="127.0.0.1", port=19091), security=security
    )
    rlmm = ZooKeeperBackend(rlmm_root, security=security)
    outsider = start_kazoo_client(base.partition("/")[0])
    chroot = "/" + base.partition("/")[2]
    try:
        assert store.elect(1, "127.0.0.1:9093", threading.Event()) == 1
        store.writes.create_topic(orders())
        broker.start()
        rlmm.create("partitions/p0/segments/s1", b"{}")
        # What the SCRAM credentials will be: created through the cluster's client, by path.
        store.client.create(f"{chroot}/cluster/config/users/alice", b"salted", makepath=True)

        znodes = all_znodes(outsider, f"{chroot}/cluster") + all_znodes(outsider, f"{chroot}/rlmm")
        expected = {"/brokers/ids/1", "/brokers/topics/orders/tieredstorage/state", "/controller"}
        assert {f"{chroot}/cluster{p}" for p in expected} <= set(znodes)
        assert f"{chroot}/rlmm/partitions/p0/segments/s1" in znodes
        for path in znodes:
            assert refused(lambda p=path: outsider.create(f"{p}/intruder", b"x")), path
            assert refused(lambda p=path: outsider.set(p, b"x")), path
            if path not in (f"{chroot}/cluster", f"{chroot}/rlmm"):  # their parent is open
                assert refused(lambda p=path: outsider.delete(p)), path
        for top in (f"{chroot}/cluster", f"{chroot}/rlmm"):
            with pytest.raises((NoAuthError, NotEmptyError)):
                outsider.delete(top)

        # Nobody else reads a sensitive znode, nor lists its parent.
        assert refused(lambda: outsider.get(f"{chroot}/cluster/config/users/alice"))
        assert refused(lambda: outsider.get_children(f"{chroot}/cluster/config/users"))
        assert outsider.get(f"{chroot}/cluster/config/topics/orders")[0]  # world may read

        # The cluster's identity may (the refusals above are about who asks).
        assert security.credentials is not None
        owner = start_kazoo_client(base.partition("/")[0], auth_data=security.auth_data())
        try:
            owner.set(f"{chroot}/rlmm/partitions/p0/segments/s1", b"{}")
            acls, _ = owner.get_acls(f"{chroot}/rlmm/partitions/p0/segments/s1")
            ours = Id("digest", security.credentials.digest_id)
            assert set(acls) == {
                ACL(Permissions.ALL, ours),
                ACL(Permissions.READ, Id("world", "anyone")),
            }
            acls, _ = owner.get_acls(f"{chroot}/cluster/config/users/alice")
            assert acls == [ACL(Permissions.ALL, ours)]
        finally:
            owner.stop()
            owner.close()
    finally:
        outsider.stop()
        outsider.close()
        rlmm.close()
        broker.close()
        store.close()


def test_wrong_or_missing_credentials_are_refused_clearly(
    base: str, secure_config: dict[str, str], secrets_dir: Path, security: ZooKeeperSecurity
) -> None:
    cluster, rlmm_root = f"{base}/cluster", f"{base}/rlmm"
    ZooKeeperMetadataStore.from_config({"zookeeper.connect": cluster, **secure_config}).close()
    ZooKeeperBackend(rlmm_root, security=security).close()  # both chroots now protected
    wrong_file = jaas_file(secrets_dir, WRONG_PASSWORD)
    wrong = ZooKeeperSecurity(ZooKeeperCredentials(USER, WRONG_PASSWORD, wrong_file), True)

    with pytest.raises(MetadataStoreError) as store_error:
        ZooKeeperMetadataStore.from_config(
            {"zookeeper.connect": cluster, "zookeeper.jaas.config.file": wrong_file}
        )
    with pytest.raises(StorageBackendError) as rlmm_error:
        ZooKeeperBackend(rlmm_root, security=wrong)
    registration = BrokerZkRegistration(
        cluster, BrokerRegistration(broker_id=2, host="127.0.0.1", port=19092), security=wrong
    )
    with pytest.raises(BrokerRegistrationError) as broker_error:
        registration.start()
    with pytest.raises(MetadataStoreError) as anonymous_error:
        ZooKeeperMetadataStore.from_config({"zookeeper.connect": cluster})

    for error in (store_error, rlmm_error, broker_error):
        message = str(error.value)
        assert "ZooKeeper authentication failed" in message
        assert f"zookeeper.jaas.config.file={wrong_file}" in message
        assert f"digest user {USER!r}" in message
        assert WRONG_PASSWORD not in message and PASSWORD not in message
    assert "no credentials are configured" in str(anonymous_error.value)
    assert "zookeeper.jaas.config.file" in str(anonymous_error.value)


def test_without_set_acl_znodes_stay_open(base: str, secure_config: dict[str, str]) -> None:
    config = {**secure_config, "zookeeper.set.acl": "false"}
    store = ZooKeeperMetadataStore.from_config({"zookeeper.connect": f"{base}/cluster", **config})
    outsider = start_kazoo_client(base)
    try:
        assert store.elect(1, "127.0.0.1:9093", threading.Event()) == 1
        store.writes.create_topic(orders())
        outsider.set("/cluster/config/topics/orders", b"{}")  # anyone may: Kafka's default
        acls, _ = outsider.get_acls("/cluster/brokers/topics/orders")
        assert acls == [ACL(Permissions.ALL, Id("world", "anyone"))]
    finally:
        outsider.stop()
        outsider.close()
        store.close()


def test_the_migration_secures_existing_znodes_and_opens_them_again(
    base: str, secure_config: dict[str, str], security: ZooKeeperSecurity, tmp_path: Path
) -> None:
    open_config = {**secure_config, "zookeeper.set.acl": "false"}
    store = ZooKeeperMetadataStore.from_config(
        {"zookeeper.connect": f"{base}/cluster", **open_config}
    )
    try:
        assert store.elect(1, "127.0.0.1:9093", threading.Event()) == 1
        store.writes.create_topic(orders())
        chroot = "/" + base.partition("/")[2]
        store.client.create(f"{chroot}/cluster/config/users/alice", b"salted", makepath=True)
    finally:
        store.close()
    properties = tmp_path / "migration.properties"
    properties.write_text(
        f"zookeeper.jaas.config.file={secure_config['zookeeper.jaas.config.file']}\n"
    )
    outsider = start_kazoo_client(f"{base}/cluster")
    try:
        outsider.set("/config/topics/orders", b"{}")  # open before
        assert (
            migration_main(
                [
                    "--zookeeper.connect",
                    f"{base}/cluster",
                    "--config",
                    str(properties),
                    "--zookeeper.acl",
                    "secure",
                ]
            )
            == 0
        )
        assert refused(lambda: outsider.set("/config/topics/orders", b"{}"))
        assert refused(lambda: outsider.create("/brokers/topics/intruder", b"x"))
        assert refused(lambda: outsider.get("/config/users/alice"))
        assert outsider.get("/brokers/topics/orders")[0]
        # Only the owner may undo it.
        other = ZooKeeperSecurity(ZooKeeperCredentials(USER, WRONG_PASSWORD, "other.jaas"))
        with pytest.raises(ZooKeeperAuthenticationError):
            migrate(f"{base}/cluster", other, secure=False)
        assert migrate(f"{base}/cluster", security, secure=False) > 5
        outsider.set("/config/users/alice", b"{}")
    finally:
        outsider.stop()
        outsider.close()
