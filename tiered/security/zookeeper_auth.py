"""The cluster's ZooKeeper identity: digest credentials from a JAAS file, whether the znodes
the cluster creates carry ACLs, and whether the link is TLS (``tiered.security.zookeeper_tls``,
the ``zookeeper.ssl.*`` keys).

===============================  ================================================================
``zookeeper.jaas.config.file``   a JAAS file whose ``Client`` section is
                                 ``org.apache.zookeeper.server.auth.DigestLoginModule required
                                 username="..." password="...";`` (the form Kafka's operators
                                 write); the process authenticates to ZooKeeper with this digest
                                 user. The password lives only in that file, never on a command
                                 line or in the properties.
``zookeeper.set.acl``            ``true``: every znode the cluster creates can be changed only by
                                 that user (default ``false``, as Kafka)
===============================  ================================================================

ZooKeeper's ``digest`` scheme needs no server configuration: a session that adds
``digest user:password`` acts as ``digest:user:base64(sha1(user:password))``. So the server never
refuses a password; a wrong one is another identity, which ``tiered.security.zookeeper_acl``
tells apart from the owner of the cluster's znodes.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from tiered.properties import bool_property
from tiered.security.jaas import JaasSyntaxError, parse_jaas_file
from tiered.security.zookeeper_tls import TLS_KEYS, ZooKeeperTls

__all__ = [
    "CLIENT_SECTION",
    "DIGEST_LOGIN_MODULE",
    "JAAS_CONFIG_FILE_KEY",
    "NO_SECURITY",
    "SECURITY_KEYS",
    "SET_ACL_KEY",
    "ZooKeeperCredentials",
    "ZooKeeperSecurity",
    "jaas_client_file_text",
    "read_jaas_credentials",
    "security_properties",
]

JAAS_CONFIG_FILE_KEY = "zookeeper.jaas.config.file"
SET_ACL_KEY = "zookeeper.set.acl"
SECURITY_KEYS = (JAAS_CONFIG_FILE_KEY, SET_ACL_KEY, *TLS_KEYS)
CLIENT_SECTION = "Client"
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"
_EXPECTED = f'{CLIENT_SECTION} {{ {DIGEST_LOGIN_MODULE} required username="..." password="..."; }};'


@dataclass(frozen=True, repr=False)
class ZooKeeperCredentials:
    """A digest user and its password; the repr shows the user and where it came from only."""

    username: str
    password: str
    source: str = "given"

    def __repr__(self) -> str:
        return f"ZooKeeperCredentials(user {self.username!r} from {self.source})"

    @property
    def auth(self) -> str:
        """What ``addauth digest`` sends."""
        return f"{self.username}:{self.password}"

    @property
    def digest_id(self) -> str:
        """The id ZooKeeper gives a session authenticated with these credentials, as its ACLs
        name it: ``user:base64(sha1(user:password))``."""
        digest = hashlib.sha1(self.auth.encode(), usedforsecurity=False).digest()
        return f"{self.username}:{base64.b64encode(digest).decode()}"


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def jaas_client_file_text(username: str, password: str) -> str:
    """A JAAS file that ``read_jaas_credentials`` reads back as ``username`` / ``password`` (what
    a tool writing a cluster's files puts at ``zookeeper.jaas.config.file``)."""
    return (
        f"{CLIENT_SECTION} {{\n  {DIGEST_LOGIN_MODULE} required\n"
        f"  username={_quoted(username)}\n  password={_quoted(password)};\n}};\n"
    )


def read_jaas_credentials(path: str) -> ZooKeeperCredentials:
    """The digest credentials of the ``Client`` section of the JAAS file at ``path``. ValueError
    naming ``zookeeper.jaas.config.file``, the file and the form expected (never a value)."""
    where = f"{JAAS_CONFIG_FILE_KEY}={path}"
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"{where}: cannot read the file: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{where}: the file is not UTF-8 text") from None
    try:
        sections = parse_jaas_file(text)
    except JaasSyntaxError as e:
        raise ValueError(f"{where}: not a JAAS file ({e}); expected {_EXPECTED}") from None
    entries = sections.get(CLIENT_SECTION)
    if not entries:
        raise ValueError(f"{where}: no {CLIENT_SECTION} section; expected {_EXPECTED}")
    digest = [e for e in entries if e.login_module == DIGEST_LOGIN_MODULE]
    if len(digest) != 1:
        raise ValueError(
            f"{where}: the {CLIENT_SECTION} section needs exactly one {DIGEST_LOGIN_MODULE} "
            f"entry (the only login module supported); expected {_EXPECTED}"
        )
    options = digest[0].options
    username, password = options.get("username", ""), options.get("password", "")
    if not username or not password:
        missing = [name for name in ("username", "password") if not options.get(name)]
        raise ValueError(
            f"{where}: the {CLIENT_SECTION} section has no {' and no '.join(missing)}; "
            f"expected {_EXPECTED}"
        )
    if ":" in username:
        raise ValueError(f"{where}: the username must not contain ':' (digest user:password)")
    return ZooKeeperCredentials(username, password, source=path)


@dataclass(frozen=True)
class ZooKeeperSecurity:
    """How one process's ZooKeeper clients authenticate, protect what they create and reach the
    server (``tls``: None for plaintext)."""

    credentials: ZooKeeperCredentials | None = None
    set_acl: bool = False
    tls: ZooKeeperTls | None = None

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> ZooKeeperSecurity:
        """From ``zookeeper.jaas.config.file``, ``zookeeper.set.acl`` and the ``zookeeper.ssl.*``
        keys; ValueError naming the key when a file is missing or malformed, a value is not
        valid, or ACLs are asked for without credentials."""
        path = str(config.get(JAAS_CONFIG_FILE_KEY) or "").strip()
        credentials = read_jaas_credentials(path) if path else None
        set_acl = bool_property(config, SET_ACL_KEY, False)
        if set_acl and credentials is None:
            raise ValueError(
                f"{SET_ACL_KEY}=true needs {JAAS_CONFIG_FILE_KEY} (the cluster's ZooKeeper "
                f"identity, which the ACLs grant); expected a file with {_EXPECTED}"
            )
        return cls(credentials, set_acl, ZooKeeperTls.from_config(config))

    def auth_data(self) -> list[tuple[str, str]]:
        """kazoo's ``auth_data``: the digest credentials, if any."""
        return [] if self.credentials is None else [("digest", self.credentials.auth)]

    def kazoo_tls_options(self) -> dict[str, object]:
        """kazoo's TLS arguments (none for a plaintext link)."""
        return {} if self.tls is None else self.tls.kazoo_options()


NO_SECURITY = ZooKeeperSecurity()


def security_properties(values: Mapping[str, str]) -> dict[str, str]:
    """The ZooKeeper security keys of ``values``: what a component handed a subset of a
    process's properties (the RLMM's ``rlmm.*``) needs as well."""
    return {key: values[key] for key in SECURITY_KEYS if key in values}
