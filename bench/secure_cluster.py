"""The secure cluster of ``bench/security_cost.py``: a CA and a certificate per process and per
client, the controllers' and brokers' properties for gRPC mutual TLS everywhere, the authorizer
on, and a SASL_SSL (SCRAM-SHA-512) Kafka listener on every broker; then the ACLs and the SCRAM
user the bench's clients need, set up by an admin that is a super user.

Who is who: the controllers, the brokers and the admin (``User:CN=...,O=tiered-bench``, each by
its certificate) are ``super.users``, as a Kafka deployment's inter-broker principals usually
are. The bench's own clients are not: its admin client (a certificate, ``CLIENT_PRINCIPAL``) holds
Create, Describe, DescribeConfigs and AlterConfigs on the topics prefixed ``TOPIC_PREFIX`` and
Describe on the cluster (``DescribeLogDirs``), and the Kafka producer (the SCRAM user
``PRODUCER_USER``) holds Write on those topics, so every request of theirs goes through the ACL
index rather than the super-user shortcut. ``allow.everyone.if.no.acl.found`` stays false.

``add_ssl_listener`` gives the plaintext cluster's brokers an SSL listener beside their PLAINTEXT
one (a client certificate required, no authorizer): TLS alone, on the same broker.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cli.launch.ports import free_port
from cli.security.certs import CertificateAuthority, KeystoreFiles
from cli.security.client_config import channel_credentials
from tests.support.cluster import Cluster
from tiered.admin import AdminClient
from tiered.errors import ErrorCode, TieredError
from tiered.net import SSL, parse_listeners
from tiered.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from tiered.security.scram import ScramMechanism
from tiered.security.scram_admin import UserScramCredentialUpsertion

TOPIC_PREFIX = "bench-"
PRODUCER_USER = "bench-producer"
MECHANISM = ScramMechanism.SCRAM_SHA_512


def distinguished_name(name: str, unit: str) -> str:
    return f"CN={name},OU={unit},O=tiered-bench"


CLIENT_PRINCIPAL = f"User:{distinguished_name('bench-client', 'users')}"


@dataclass(frozen=True)
class Identities:
    """The CA's certificate (every truststore) and each process's and client's keystore."""

    ca: Path
    controller: KeystoreFiles
    brokers: dict[int, KeystoreFiles]
    admin: KeystoreFiles  # a super user: sets up the ACLs and the SCRAM user
    client: KeystoreFiles  # the bench's admin client: its ACLs only
    producer_password: str

    @property
    def super_users(self) -> str:
        names = [distinguished_name("controller", "controllers")]
        names += [distinguished_name(f"broker-{b}", "brokers") for b in sorted(self.brokers)]
        names.append(distinguished_name("admin", "users"))
        return ";".join(f"User:{n}" for n in names)

    def server_properties(self, keystore: KeystoreFiles) -> dict[str, str]:
        return {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore.keystore),
            "ssl.truststore.location": str(self.ca),
        }

    def client_properties(self, keystore: KeystoreFiles) -> dict[str, str]:
        return {"security.protocol": "SSL", **self.server_properties(keystore)}

    def ssl_producer_config(self) -> dict[str, Any]:
        """confluent-kafka's settings for an SSL listener, with the bench client's certificate."""
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.ca),
            "ssl.certificate.location": str(self.client.certificate),
            "ssl.key.location": str(self.client.private_key),
        }

    def producer_config(self) -> dict[str, Any]:
        """confluent-kafka's settings for the SCRAM user over SASL_SSL."""
        return {
            "security.protocol": "SASL_SSL",
            "sasl.mechanisms": MECHANISM.mechanism_name,
            "sasl.username": PRODUCER_USER,
            "sasl.password": self.producer_password,
            "ssl.ca.location": str(self.ca),
        }


def issue_identities(directory: Path, broker_ids: list[int]) -> Identities:
    directory.mkdir(parents=True, exist_ok=True)
    ca = CertificateAuthority.create("CN=tiered-bench-ca,O=tiered-bench")

    def issue(name: str, unit: str) -> KeystoreFiles:
        return ca.issue(distinguished_name(name, unit)).write_pem_files(directory, name)

    return Identities(
        ca=ca.write_certificate(directory / "ca.pem"),
        controller=issue("controller", "controllers"),
        brokers={b: issue(f"broker-{b}", "brokers") for b in broker_ids},
        admin=issue("admin", "users"),
        client=issue("bench-client", "users"),
        producer_password=secrets.token_urlsafe(18),
    )


def secure_cluster(
    root: Path,
    identities: Identities,
    brokers: int,
    controller_extra: dict[str, str],
    broker_extra: dict[str, str],
) -> Cluster:
    """A cluster (not started) whose gRPC is mutual TLS throughout, with the authorizer on and a
    SASL_SSL Kafka listener on each broker; its admin and broker stubs are the bench client's."""
    common = {
        "listener.security.protocol.map": "GRPC:SSL",
        "authorizer.enabled": "true",
        "super.users": identities.super_users,
    }
    credentials = channel_credentials(identities.client_properties(identities.client))
    cluster = Cluster(
        root,
        "kraft",
        brokers=brokers,
        controller_extra={
            **controller_extra,
            **common,
            **identities.server_properties(identities.controller),
        },
        broker_extra={
            **broker_extra,
            **common,
            "sasl.enabled.mechanisms": MECHANISM.mechanism_name,
            # SCRAM authenticates Kafka clients; the gRPC listener keeps requiring certificates
            "listener.name.sasl_ssl.ssl.client.auth": "none",
        },
        credentials=credentials,
    )
    for broker_id, broker in cluster.brokers.items():
        broker.properties.update(identities.server_properties(identities.brokers[broker_id]))
        broker.properties["listeners"] = broker.properties["listeners"].replace(
            "PLAINTEXT://", "SASL_SSL://"
        )
    return cluster


def add_ssl_listener(cluster: Cluster, identities: Identities) -> None:
    """An SSL Kafka listener on each broker of a cluster not yet started, beside its first one,
    requiring a client certificate from the bench's CA (``Identities.ssl_producer_config``)."""
    for broker_id, broker in cluster.brokers.items():
        broker.properties.update(identities.server_properties(identities.brokers[broker_id]))
        broker.properties["listener.name.ssl.ssl.client.auth"] = "required"
        broker.properties["listeners"] += f",SSL://127.0.0.1:{free_port()}"


def ssl_bootstrap(cluster: Cluster) -> str:
    """The brokers' SSL listeners, ``host:port,...`` in broker-id order."""
    return ",".join(
        parse_listeners(b.properties["listeners"])[SSL].address
        for _, b in sorted(cluster.brokers.items())
    )


def client_acls() -> list[AclBinding]:
    """What the bench's admin client and its producer may do, and nothing more."""
    allow = AclPermissionType.ALLOW
    topics = ResourcePattern(ResourceType.TOPIC, TOPIC_PREFIX, PatternType.PREFIXED)
    cluster = ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME)
    client_operations = (
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    )
    bindings = [
        AclBinding(topics, AccessControlEntry(CLIENT_PRINCIPAL, "*", op, allow))
        for op in client_operations
    ]
    bindings.append(
        AclBinding(cluster, AccessControlEntry(CLIENT_PRINCIPAL, "*", AclOperation.DESCRIBE, allow))
    )
    bindings.append(
        AclBinding(
            topics, AccessControlEntry(f"User:{PRODUCER_USER}", "*", AclOperation.WRITE, allow)
        )
    )
    return bindings


def refusals(cluster: Cluster) -> list[str]:
    """What a secure cluster failed to refuse: a client without a certificate, and the bench's
    client creating a topic outside its ACLs (empty when both were refused as they must be)."""
    failures = []
    with AdminClient(cluster.bootstrap, timeout_s=5) as plaintext:
        try:
            plaintext.describe_cluster()
            failures.append("a client without TLS described the secure cluster")
        except TieredError:
            pass
    try:
        cluster.admin.create_topic("outside-the-acls", 1, {})
        failures.append("the bench client created a topic its ACLs do not cover")
    except TieredError as e:
        if e.code is not ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            failures.append(f"creating a topic outside the ACLs failed with {e.code.name}")
    return failures


def grant_clients(cluster: Cluster, identities: Identities) -> int:
    """As the super-user admin: the clients' ACLs and the producer's SCRAM credential. Returns
    the number of ACLs."""
    credentials = channel_credentials(identities.client_properties(identities.admin))
    acls = client_acls()
    with AdminClient(cluster.bootstrap, timeout_s=30, credentials=credentials) as admin:
        admin.create_acls(acls)
        outcomes = admin.alter_user_scram_credentials(
            [UserScramCredentialUpsertion(PRODUCER_USER, MECHANISM, identities.producer_password)]
        )
    failed = [f"{user}: {error}" for user, error in outcomes if error is not None]
    if failed:
        raise RuntimeError(f"SCRAM credential not stored: {failed}")
    return len(acls)
