"""``tiered-cluster up --secure``: a cluster with TLS, authenticated principals, the authorizer
and ZooKeeper ACLs (docs/operations/security.md), and the files it needs, all under ``DIR/config``:

- ``ca.pem`` (the cluster CA, what clients trust) and ``ca.key`` (its key, to issue more client
  certificates); ``NAME.pem``, ``NAME.key`` and ``NAME.keystore.pem`` per controller, broker and
  admin user (subject ``CN=NAME,OU=<role>s,O=tiered``; subject alternative names 127.0.0.1,
  localhost and, with ``--loopback-hosts``, the process's own address, which clients verify);
- ``admin.properties``: the admin's ``--command-config`` (SSL with the admin's certificate);
- ``admin-sasl.properties``: the SCRAM super user ``admin`` for Kafka clients (confluent-kafka's
  keys), its password generated here and written nowhere else;
- ``zookeeper.jaas``: the cluster's ZooKeeper digest identity, when it uses ZooKeeper;
- with a managed ZooKeeper (the local profile's server, the distributed profile's ensemble): a
  certificate per ZooKeeper server (``zookeeper``, ``zookeeper-N``; subject
  ``CN=NAME,OU=zookeepers,O=tiered``, not a Kafka principal), which serves TLS only, clients with
  a certificate from the cluster CA, and its quorum links over TLS; and
  ``zookeeper-client.properties``, the admin's ZooKeeper client config (``zookeeper.ssl.*`` with
  the admin's certificate, and the digest identity), which ``cluster.json`` names as
  ``zookeeper_client_config`` beside ``zookeeper_tls: true``.

Every file holding a key or a password is readable by its owner only. Controllers and brokers
speak gRPC over mutual TLS; their certificates' principals and the admin's are ``super.users``.
Each broker has a SASL_SSL Kafka listener (``kafka_bootstrap_servers``) and an SSL one that
requires a certificate from the cluster CA (``kafka_ssl_bootstrap_servers``). Every ZooKeeper
client of a controller or broker (store, registration, RLMM) connects to a managed ZooKeeper over
TLS with the process's own certificate. The S3 endpoint's certificate and the Spark secret are
:mod:`cli.cluster.secure_services`'."""

from __future__ import annotations

import ipaddress
import secrets
from pathlib import Path

import grpc
from cryptography import x509

from cli.cluster import layout as layouts
from cli.cluster.daemons import ClusterFiles
from cli.cluster.layout import Layout
from cli.cluster.spec import ZOOKEEPER, broker_name, controller_name, zookeeper_member_name
from cli.launch.ports import free_port
from cli.launch.zookeeper import ServerTls
from cli.security.certs import (
    DEFAULT_SUBJECT_ALTERNATIVE_NAMES,
    CertificateAuthority,
    IssuedCertificate,
    write_private_file,
)
from cli.security.client_config import channel_credentials
from tiered.admin import AdminClient
from tiered.net import SASL_SSL, SSL
from tiered.properties import load_properties
from tiered.security.scram import ScramMechanism
from tiered.security.scram_admin import UserScramCredentials, UserScramCredentialUpsertion
from tiered.security.ssl_principal import distinguished_name
from tiered.security.zookeeper_auth import JAAS_CONFIG_FILE_KEY, jaas_client_file_text
from tiered.security.zookeeper_tls import (
    CLIENT_ENABLE_KEY,
    KEYSTORE_LOCATION_KEY,
    KEYSTORE_TYPE_KEY,
    TRUSTSTORE_LOCATION_KEY,
    TRUSTSTORE_TYPE_KEY,
)

ADMIN = "admin"
"""The admin user: a certificate (``CN=admin,OU=users,O=tiered``) and a SCRAM user, both super
users."""
ADMIN_SASL = "admin-sasl"
ZOOKEEPER_CLIENT = "zookeeper-client"
ZOOKEEPER_USER = "tiered"
SCRAM_MECHANISM = ScramMechanism.SCRAM_SHA_512
_SECRET_BYTES = 24
_ORGANIZATION = "tiered"


def lay_out(files: ClusterFiles, layout: Layout) -> None:
    """Makes a new cluster's layout secure: an SSL Kafka listener port per broker and, for a
    managed ZooKeeper, a chroot (its znodes then carry the cluster's ACLs from the top) and TLS
    (``zookeeper_tls``, with the client config a tool connects with)."""
    layout["secure"] = True
    brokers = [broker_name(i) for i in range(1, len(layout["brokers"]) + 1)]
    layout["kafka_ssl_brokers"] = [free_port(layouts.host_of(layout, name)) for name in brokers]
    layout["kafka_ssl_bootstrap_servers"] = layouts.addresses(
        layout, brokers, layout["kafka_ssl_brokers"]
    )
    if layout["zookeeper_managed"] and "/" not in layout["zookeeper"]:
        layout["zookeeper"] += layouts.STORE_CHROOT
    if zookeeper_servers(layout):
        layout["zookeeper_tls"] = True
        layout["zookeeper_client_config"] = str(zookeeper_client_file(files))


def is_secure(layout: Layout) -> bool:
    return bool(layout.get("secure", False))


def uses_zookeeper(layout: Layout) -> bool:
    return layout["metadata"] == "zookeeper" or "zookeeper_ensemble" in layout


def zookeeper_servers(layout: Layout) -> list[str]:
    """The managed ZooKeeper servers, each with its certificate: the ensemble's members, the
    local profile's one server, or none (an external ZooKeeper keeps its own transport)."""
    if "zookeeper_ensemble" in layout:
        return [zookeeper_member_name(i) for i in range(1, len(layout["zookeeper_ensemble"]) + 1)]
    return [ZOOKEEPER] if layout["zookeeper_managed"] else []


def zookeeper_tls(layout: Layout) -> bool:
    """Whether the cluster's ZooKeeper serves TLS only (a secure cluster's managed one)."""
    return bool(layout.get("zookeeper_tls", False))


# --------------------------------------------------------------------------------- principals


def subject(name: str) -> str:
    """The certificate subject of process ``name`` (``controller-0``, ``broker-1``) or of the
    admin user."""
    unit = "users" if name == ADMIN else f"{name.rsplit('-', 1)[0]}s"
    return f"CN={name},OU={unit},O={_ORGANIZATION}"


def certificate_principal(name: str) -> str:
    """``User:<subject in RFC 2253>``, as the listeners name a client presenting it."""
    return f"User:{distinguished_name(x509.Name.from_rfc4514_string(subject(name)))}"


def certificate_holders(layout: Layout) -> list[str]:
    controllers = [controller_name(i) for i in range(len(layout["controllers"]))]
    brokers = [broker_name(i) for i in range(1, len(layout["brokers"]) + 1)]
    return [*controllers, *brokers, ADMIN]


def issue_certificate(ca: CertificateAuthority, layout: Layout, name: str) -> IssuedCertificate:
    """The certificate of process ``name`` (or of the admin user): its subject, and as subject
    alternative names 127.0.0.1, localhost and, with ``--loopback-hosts``, its own address (a
    client reaching it there verifies that the certificate names it)."""
    names = list(DEFAULT_SUBJECT_ALTERNATIVE_NAMES)
    own = layouts.own_host(layout, name)
    if own is not None:
        names.append(x509.IPAddress(ipaddress.ip_address(own)))
    return ca.issue(subject(name), subject_alternative_names=names)


def super_users(layout: Layout) -> str:
    """Every process's and the admin's certificate principals, and the SCRAM admin."""
    principals = [certificate_principal(name) for name in certificate_holders(layout)]
    return ";".join([*principals, f"User:{ADMIN}"])


# --------------------------------------------------------------------------------- files


def ca_file(files: ClusterFiles) -> Path:
    return files.config_file("ca", "pem")


def keystore_file(files: ClusterFiles, name: str) -> Path:
    return files.config_file(name, "keystore.pem")


def admin_properties_file(files: ClusterFiles) -> Path:
    return files.config_file(ADMIN)


def admin_sasl_file(files: ClusterFiles) -> Path:
    return files.config_file(ADMIN_SASL)


def jaas_file(files: ClusterFiles) -> Path:
    return files.config_file("zookeeper", "jaas")


def zookeeper_client_file(files: ClusterFiles) -> Path:
    return files.config_file(ZOOKEEPER_CLIENT)


def _properties_text(properties: dict[str, str]) -> bytes:
    return "".join(f"{key}={value}\n" for key, value in properties.items()).encode()


def write_files(files: ClusterFiles, layout: Layout) -> None:
    """The CA, the certificates, the admin's client configs and the JAAS file, each written
    unless it is there already (a later ``up`` keeps the cluster's identities)."""
    config = files.dir / "config"
    ca_key = files.config_file("ca", "key")
    if ca_file(files).exists() and ca_key.exists():
        ca, fresh = CertificateAuthority.load(ca_file(files), ca_key), False
    else:
        ca, fresh = CertificateAuthority.create(f"CN=tiered-ca,O={_ORGANIZATION}"), True
        ca.write_private_key(ca_key)
        ca.write_certificate(ca_file(files))
    for name in [*certificate_holders(layout), *zookeeper_servers(layout)]:
        if fresh or not keystore_file(files, name).exists():
            issue_certificate(ca, layout, name).write_pem_files(config, name)
    write_private_file(
        admin_properties_file(files),
        _properties_text(
            {
                "security.protocol": SSL,
                "ssl.truststore.location": str(ca_file(files)),
                "ssl.keystore.type": "PEM",
                "ssl.keystore.location": str(keystore_file(files, ADMIN)),
            }
        ),
    )
    if not admin_sasl_file(files).exists():
        write_private_file(
            admin_sasl_file(files),
            _properties_text(
                {
                    "security.protocol": SASL_SSL,
                    "sasl.mechanism": str(SCRAM_MECHANISM),
                    "sasl.username": ADMIN,
                    "sasl.password": secrets.token_urlsafe(_SECRET_BYTES),
                    "ssl.ca.location": str(ca_file(files)),
                }
            ),
        )
    if uses_zookeeper(layout) and not jaas_file(files).exists():
        text = jaas_client_file_text(ZOOKEEPER_USER, secrets.token_urlsafe(_SECRET_BYTES))
        write_private_file(jaas_file(files), text.encode())
    if zookeeper_tls(layout):
        write_private_file(
            zookeeper_client_file(files),
            _properties_text(
                {
                    **zookeeper_tls_properties(files, layout, ADMIN),
                    JAAS_CONFIG_FILE_KEY: str(jaas_file(files)),
                }
            ),
        )


# --------------------------------------------------------------------------------- properties


def process_properties(files: ClusterFiles, layout: Layout, name: str) -> dict[str, str]:
    """What a controller or broker adds in a secure cluster (nothing otherwise): mutual TLS on
    gRPC with its own certificate, the authorizer and, with ZooKeeper, its digest identity and
    znode ACLs."""
    if not is_secure(layout):
        return {}
    properties = {
        "listener.security.protocol.map": "GRPC:SSL",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(keystore_file(files, name)),
        "ssl.truststore.location": str(ca_file(files)),
        "authorizer.enabled": "true",
        "super.users": super_users(layout),
        "allow.everyone.if.no.acl.found": "false",
    }
    if uses_zookeeper(layout):
        properties["zookeeper.jaas.config.file"] = str(jaas_file(files))
        properties["zookeeper.set.acl"] = "true"
    properties.update(zookeeper_tls_properties(files, layout, name))
    return properties


def zookeeper_tls_properties(files: ClusterFiles, layout: Layout, name: str) -> dict[str, str]:
    """A ZooKeeper client's TLS keys with ``name``'s certificate (nothing unless the cluster's
    ZooKeeper serves TLS)."""
    if not zookeeper_tls(layout):
        return {}
    return {
        CLIENT_ENABLE_KEY: "true",
        KEYSTORE_TYPE_KEY: "PEM",
        KEYSTORE_LOCATION_KEY: str(keystore_file(files, name)),
        TRUSTSTORE_TYPE_KEY: "PEM",
        TRUSTSTORE_LOCATION_KEY: str(ca_file(files)),
    }


def zookeeper_server_tls(files: ClusterFiles, layout: Layout, name: str) -> ServerTls | None:
    """Managed ZooKeeper server ``name``'s TLS (None unless the cluster's ZooKeeper serves
    TLS): its own certificate, the cluster CA for its clients and peers."""
    if not zookeeper_tls(layout):
        return None
    return ServerTls(keystore_file(files, name), ca_file(files))


def kafka_listeners(layout: Layout, broker_id: int) -> str:
    """Broker ``broker_id``'s Kafka listeners, as ``listeners`` lists them."""
    host = layouts.host_of(layout, broker_name(broker_id))
    if not is_secure(layout):
        return f"PLAINTEXT://{layouts.address(host, layout['kafka_brokers'][broker_id - 1])}"
    sasl_ssl = layouts.address(host, layout["kafka_brokers"][broker_id - 1])
    ssl = layouts.address(host, layout["kafka_ssl_brokers"][broker_id - 1])
    return f"{SASL_SSL}://{sasl_ssl},{SSL}://{ssl}"


def broker_ports(layout: Layout, broker_id: int) -> dict[str, int]:
    """The SSL Kafka listener's port, as ``status`` shows it."""
    if not is_secure(layout):
        return {}
    return {"kafka_ssl": layout["kafka_ssl_brokers"][broker_id - 1]}


def broker_listener_properties(layout: Layout) -> dict[str, str]:
    """A secure broker's Kafka listener settings: SCRAM on SASL_SSL (no client certificate
    asked), a client certificate required on SSL."""
    if not is_secure(layout):
        return {}
    return {
        "sasl.enabled.mechanisms": str(SCRAM_MECHANISM),
        f"listener.name.{SASL_SSL.lower()}.ssl.client.auth": "none",
        f"listener.name.{SSL.lower()}.ssl.client.auth": "required",
    }


# --------------------------------------------------------------------------------- the admin


def admin_credentials(files: ClusterFiles, layout: Layout) -> grpc.ChannelCredentials | None:
    """The admin's gRPC credentials (``admin.properties``), None for a cluster without TLS."""
    if not is_secure(layout):
        return None
    return channel_credentials(load_properties(admin_properties_file(files)))


def ensure_admin_user(files: ClusterFiles, layout: Layout, bootstrap: str) -> None:
    """Creates the SCRAM super user ``admin`` with the password of ``admin-sasl.properties``,
    unless it has a SCRAM-SHA-512 credential already."""
    if not is_secure(layout):
        return
    with AdminClient(bootstrap, credentials=admin_credentials(files, layout)) as admin:
        (found,) = admin.describe_user_scram_credentials([ADMIN])
        if isinstance(found, UserScramCredentials) and any(
            mechanism is SCRAM_MECHANISM for mechanism, _ in found.credentials
        ):
            return
        password = load_properties(admin_sasl_file(files))["sasl.password"]
        upsertion = UserScramCredentialUpsertion(ADMIN, SCRAM_MECHANISM, password)
        for _, error in admin.alter_user_scram_credentials([upsertion]):
            if error is not None:
                raise error
