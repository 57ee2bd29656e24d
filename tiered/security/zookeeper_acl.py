"""The ACL every znode of the cluster is created with, and whether a process is the identity that
owns the cluster's znodes.

With ``zookeeper.set.acl=true`` the rule is Kafka's (``ZkData.defaultAcls``): the creator (the
cluster's digest user) may do everything, the world may read; a sensitive znode (credentials,
below ``SENSITIVE_ROOTS``) grants the creator only. Without it, kazoo's open ACL. The rule goes
by the path below the chroot, so a new kind of znode below a sensitive root needs nothing more.
"""

from __future__ import annotations

from collections.abc import Iterable

from kazoo.exceptions import AuthFailedError
from kazoo.security import ACL, CREATOR_ALL_ACL, READ_ACL_UNSAFE, Permissions

from tiered.security.zookeeper_auth import JAAS_CONFIG_FILE_KEY, ZooKeeperSecurity

__all__ = [
    "SENSITIVE_ROOTS",
    "ZooKeeperAuthenticationError",
    "check_may_change",
    "is_sensitive_znode",
    "znode_acl",
]

SENSITIVE_ROOTS = ("/config/users", "/config/brokers", "/delegation_token")
"""Kafka's sensitive paths: SCRAM credentials, dynamic broker configs (passwords among them),
delegation tokens. Paths of the layout (below the chroot)."""

_CHANGES = Permissions.WRITE | Permissions.CREATE | Permissions.DELETE


class ZooKeeperAuthenticationError(AuthFailedError):  # type: ignore[misc] # kazoo is untyped
    """This process is not the identity that owns the cluster's znodes (or ZooKeeper refused
    its credentials); the message names the key that gives them and never shows a secret."""


def is_sensitive_znode(path: str) -> bool:
    """Whether ``path`` (of the layout) holds secrets: nobody but the cluster may read it."""
    return any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOTS)


def znode_acl(path: str, set_acl: bool) -> list[ACL] | None:
    """The ACL to create ``path`` (of the layout) with; None: kazoo's default (open)."""
    if not set_acl:
        return None
    if is_sensitive_znode(path):
        return list(CREATOR_ALL_ACL)
    return list(CREATOR_ALL_ACL) + list(READ_ACL_UNSAFE)


def _digest_users(acls: Iterable[ACL]) -> list[str]:
    return sorted({acl.id.id.partition(":")[0] for acl in acls if acl.id.scheme == "digest"})


def check_may_change(path: str, acls: Iterable[ACL] | None, security: ZooKeeperSecurity) -> None:
    """Raises ``ZooKeeperAuthenticationError`` when ``acls`` (those of the existing znode
    ``path``; None when ZooKeeper refused to show them) let only digest users other than this
    process change the znode: a wrong password in the JAAS file, or none given for a protected
    cluster. ACLs of other schemes (ip, sasl, x509) cannot be judged from here and pass."""
    credentials = security.credentials
    if acls is not None:
        changers = [acl for acl in acls if acl.perms & _CHANGES]
        ours = {("world", "anyone")}
        if credentials is not None:
            ours.add(("digest", credentials.digest_id))
        if not changers or any((a.id.scheme, a.id.id) in ours for a in changers):
            return
        if any(a.id.scheme != "digest" for a in changers):
            return
        owners = ", ".join(repr(user) for user in _digest_users(changers))
    else:
        owners = "another identity"
    if credentials is None:
        raise ZooKeeperAuthenticationError(
            f"ZooKeeper authentication failed: {path} is protected by ZooKeeper ACLs (digest "
            f"user {owners}) and no credentials are configured; give the cluster's in "
            f"{JAAS_CONFIG_FILE_KEY}"
        )
    raise ZooKeeperAuthenticationError(
        f"ZooKeeper authentication failed: {path} may be changed only by digest user "
        f"{owners}, and the credentials of {JAAS_CONFIG_FILE_KEY}={credentials.source} (user "
        f"{credentials.username!r}) are not theirs: wrong password or user"
    )
