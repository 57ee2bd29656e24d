"""ACLs in ZooKeeper, in Kafka's layout (``AclAuthorizer``'s, kept by ZooKeeper-mode Kafka), under
the cluster's chroot. The controller writes them; brokers read them and follow the change
notifications.

- ``/kafka-acl/<Type>/<name>``: the LITERAL pattern's ACLs; ``/kafka-acl-extended/prefixed/<Type>/
  <name>``: the PREFIXED one's. Data ``{"version":1,"acls":[{"principal":"User:a",
  "permissionType":"Allow","operation":"Read","host":"*"}]}``; a pattern without ACLs has no znode.
- ``/kafka-acl-changes/acl_changes_<seq>`` (data ``Topic:name``) after a change to a literal
  pattern, ``/kafka-acl-extended-changes/acl_changes_<seq>`` (data ``{"version":1,
  "resourceType":"TOPIC","name":...,"patternType":"PREFIXED"}``) after a prefixed one.

The layout has no ACL ids: an ACL's id is derived from its binding (``tiered.security.acl.acl_id``,
as in KRaft mode), the same in every process that reads it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from tiered.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    acl_id,
)

__all__ = [
    "ACL_CHANGE_PREFIX",
    "ACL_PARENTS",
    "CHANGE_PATHS",
    "EXTENDED_CHANGES",
    "KEPT_NOTIFICATIONS",
    "LITERAL_CHANGES",
    "acl_id",
    "change_notification",
    "decode_acls",
    "decode_change",
    "encode_acls",
    "pattern_dirs",
    "pattern_path",
]

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PATHS = (LITERAL_CHANGES, EXTENDED_CHANGES)
ACL_CHANGE_PREFIX = "acl_changes_"
KEPT_NOTIFICATIONS = 1000  # per change directory; the controller deletes older ones
ZNODE_VERSION = 1
_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER)


def _root(pattern_type: PatternType) -> str:
    return PREFIXED_ROOT if pattern_type is PatternType.PREFIXED else LITERAL_ROOT


def pattern_dirs() -> list[tuple[str, ResourceType, PatternType]]:
    """Every directory holding patterns' znodes: (path, resource type, pattern type)."""
    return [
        (f"{_root(p)}/{t.kafka_name}", t, p)
        for p in (PatternType.LITERAL, PatternType.PREFIXED)
        for t in _TYPES
    ]


ACL_PARENTS: tuple[str, ...] = (*(d for d, _, _ in pattern_dirs()), *CHANGE_PATHS)


def pattern_path(pattern: ResourcePattern) -> str:
    """The znode of a pattern; ValueError for a name that cannot be a znode's."""
    if "/" in pattern.name or pattern.name in (".", ".."):
        raise ValueError(f"resource name {pattern.name!r} cannot be a znode name")
    return f"{_root(pattern.pattern_type)}/{pattern.resource_type.kafka_name}/{pattern.name}"


def encode_acls(entries: Iterable[AccessControlEntry]) -> bytes:
    acls = [
        {
            "principal": e.principal,
            "permissionType": e.permission_type.kafka_name,
            "operation": e.operation.kafka_name,
            "host": e.host,
        }
        for e in entries
    ]
    return json.dumps({"version": ZNODE_VERSION, "acls": acls}, separators=(",", ":")).encode()


def decode_acls(pattern: ResourcePattern, data: bytes) -> list[AclBinding]:
    """The bindings of a pattern's znode; ValueError naming the pattern for bad data."""
    try:
        value = json.loads(data)
        return [
            AclBinding(
                pattern,
                AccessControlEntry(
                    str(acl["principal"]),
                    str(acl["host"]),
                    AclOperation.parse(str(acl["operation"]), "operation"),
                    AclPermissionType.parse(str(acl["permissionType"]), "permissionType"),
                ),
            )
            for acl in value["acls"]
        ]
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise ValueError(f"{pattern}: bad ACL znode data {data[:200]!r}: {e}") from e


def change_notification(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(path prefix of the sequential znode, its data) announcing a change to ``pattern``."""
    if pattern.pattern_type is PatternType.LITERAL:
        data = f"{pattern.resource_type.kafka_name}:{pattern.name}".encode()
        return f"{LITERAL_CHANGES}/{ACL_CHANGE_PREFIX}", data
    event = {
        "version": ZNODE_VERSION,
        "resourceType": pattern.resource_type.name,
        "name": pattern.name,
        "patternType": pattern.pattern_type.name,
    }
    return f"{EXTENDED_CHANGES}/{ACL_CHANGE_PREFIX}", json.dumps(event).encode()


def decode_change(changes_path: str, data: bytes) -> ResourcePattern:
    """The pattern a change notification under ``changes_path`` names; ValueError if bad."""
    try:
        if changes_path == LITERAL_CHANGES:
            type_name, _, name = data.decode().partition(":")
            return ResourcePattern(ResourceType.parse(type_name, "resourceType"), name)
        event = json.loads(data)
        return ResourcePattern(
            ResourceType.parse(str(event["resourceType"]), "resourceType"),
            str(event["name"]),
            PatternType.parse(str(event["patternType"]), "patternType"),
        )
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise ValueError(f"bad ACL change notification {data[:200]!r}: {e}") from e
