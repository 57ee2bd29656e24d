"""The ZooKeeper store's ACL writes: the ops that rewrite each changed pattern's znode (Kafka's
layout, ``tiered.cluster.zk_acl_znodes``) and announce it, and the purge of old notifications.

A pattern's znode holds all its ACLs, so a change reads it first and writes the whole new list
(only the active controller writes, so nothing races the read; if something did, the fenced
multi's set would still replace it whole).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from controller.store.base import StoredAcl
from controller.store.zookeeper.znodes import ZnodeOp
from tiered.cluster.zk_acl_znodes import (
    ACL_CHANGE_PREFIX,
    CHANGE_PATHS,
    KEPT_NOTIFICATIONS,
    change_notification,
    encode_acls,
    pattern_path,
)
from tiered.cluster.zk_acls import read_pattern, sequence_of
from tiered.security.acl import AclBinding, ResourcePattern
from tiered.zk_client import TRANSPORT_ERRORS, ZkClient

__all__ = ["acl_change_ops", "purge_notifications"]

log = logging.getLogger(__name__)


def acl_change_ops(
    zk: ZkClient, created: Sequence[StoredAcl], deleted: Sequence[StoredAcl]
) -> list[ZnodeOp]:
    """For each pattern ``created`` or ``deleted`` touch: its znode created, set or (left without
    ACLs) deleted, and a change notification. ValueError, before any read, for a name that
    cannot be a znode's; raises kazoo's errors."""
    changes: dict[ResourcePattern, tuple[list[AclBinding], set[AclBinding]]] = {}
    for _, binding in created:
        changes.setdefault(binding.pattern, ([], set()))[0].append(binding)
    for _, binding in deleted:
        changes.setdefault(binding.pattern, ([], set()))[1].add(binding)
    for pattern in changes:
        pattern_path(pattern)
    ops: list[ZnodeOp] = []
    for pattern, (added, removed) in changes.items():
        current, version = read_pattern(zk, pattern)
        kept = [b for b in current if b not in removed]
        new = kept + [b for b in dict.fromkeys(added) if b not in kept]
        path = pattern_path(pattern)
        data = encode_acls(b.entry for b in new)
        if version is None:
            if new:
                ops.append(("create", path, data))
        elif new:
            ops.append(("set", path, data))
        else:
            ops.append(("delete", path, b""))
        prefix, notification = change_notification(pattern)
        ops.append(("create_sequential", prefix, notification))
    return ops


def purge_notifications(zk: ZkClient) -> None:
    """Deletes all but the newest ``KEPT_NOTIFICATIONS`` of each change directory (best effort:
    a failure is logged, the next ACL change purges again)."""
    for path in CHANGE_PATHS:
        try:
            children = [c for c in zk.children(zk.path(path)) if c.startswith(ACL_CHANGE_PREFIX)]
            excess = sorted(children, key=sequence_of)[:-KEPT_NOTIFICATIONS]
            for child in excess:
                zk.kazoo.delete_async(zk.path(f"{path}/{child}"))
        except TRANSPORT_ERRORS as e:
            log.warning("Purging ACL change notifications under %s failed: %r", path, e)
