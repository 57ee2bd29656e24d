"""Kafka's ACL model (``org.apache.kafka.common.acl`` and ``.resource``), with Kafka's names and
wire codes: what a binding says (a resource pattern and an access control entry), and how a
filter matches bindings (DescribeAcls, DeleteAcls, ``tiered-acls --list`` / ``--remove``).

A binding allows or denies one principal, from one host, one operation on the resources its
pattern covers: a LITERAL pattern covers the resource of that name (``*``: every resource of the
type), a PREFIXED one every resource whose name starts with it. Filters add ANY (every value of a
field) and, for pattern types, MATCH (every pattern that covers the given name).
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from typing import Self

from tiered.security.principal import KafkaPrincipal

__all__ = [
    "ANY_BINDING",
    "CLUSTER_NAME",
    "IMPLIES_DESCRIBE",
    "IMPLIES_DESCRIBE_CONFIGS",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "AccessControlEntry",
    "AccessControlEntryFilter",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "PatternType",
    "ResourcePattern",
    "ResourcePatternFilter",
    "ResourceType",
    "acl_id",
    "operations_of",
]

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"  # the one Cluster resource's name, as Kafka names it


class _Coded(enum.IntEnum):
    """An enum with Kafka's wire codes and Kafka's spellings (``DescribeConfigs`` in ZooKeeper's
    JSON and kafka-acls.sh's output, ``DESCRIBE_CONFIGS`` / ``describe-configs`` accepted)."""

    @property
    def kafka_name(self) -> str:
        """Kafka's CamelCase name (``SecurityUtils.operationName`` and kin)."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def parse(cls, text: str, what: str) -> Self:
        """From any of Kafka's spellings (``DescribeConfigs``, ``DESCRIBE_CONFIGS``,
        ``describe-configs``, case-insensitive); ValueError naming ``what`` and the valid values."""
        key = text.strip().replace("-", "").replace("_", "").lower()
        for member in cls:
            if member.name.replace("_", "").lower() == key and member.name != "UNKNOWN":
                return member
        valid = ", ".join(m.kafka_name for m in cls if m.name != "UNKNOWN")
        raise ValueError(f"{what} {text!r} is not valid; valid values: {valid}")

    @classmethod
    def from_code(cls, code: int, what: str) -> Self:
        try:
            return cls(int(code))
        except ValueError:
            raise ValueError(f"{what} code {code} is unknown") from None


class ResourceType(_Coded):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3  # judged by the group APIs (broker/kafka/groups_api.py)
    CLUSTER = 4


class PatternType(_Coded):
    UNKNOWN = 0
    ANY = 1  # filters only
    MATCH = 2  # filters only
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_Coded):
    UNKNOWN = 0
    ANY = 1  # filters only
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class AclPermissionType(_Coded):
    UNKNOWN = 0
    ANY = 1  # filters only
    DENY = 2
    ALLOW = 3


# Kafka's implied operations (StandardAuthorizerData): an ALLOW of any of these allows DESCRIBE
# (resp. DESCRIBE_CONFIGS) too. A DENY implies nothing but itself (DENY ALL denies everything).
IMPLIES_DESCRIBE: frozenset[AclOperation] = frozenset(
    {
        AclOperation.DESCRIBE,
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.DELETE,
        AclOperation.ALTER,
    }
)
IMPLIES_DESCRIBE_CONFIGS: frozenset[AclOperation] = frozenset(
    {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
)

# What each resource type accepts in a binding (kafka-acls.sh refuses the rest).
_OPERATIONS_OF: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset(
        {
            AclOperation.ALL,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.CREATE,
            AclOperation.DELETE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset(
        {AclOperation.ALL, AclOperation.READ, AclOperation.DELETE, AclOperation.DESCRIBE}
    ),
    ResourceType.CLUSTER: frozenset(
        {
            AclOperation.ALL,
            AclOperation.CREATE,
            AclOperation.ALTER,
            AclOperation.DESCRIBE,
            AclOperation.CLUSTER_ACTION,
            AclOperation.DESCRIBE_CONFIGS,
            AclOperation.ALTER_CONFIGS,
            AclOperation.IDEMPOTENT_WRITE,
        }
    ),
}


def operations_of(resource_type: ResourceType) -> frozenset[AclOperation]:
    """The operations a binding on ``resource_type`` may name."""
    return _OPERATIONS_OF.get(resource_type, frozenset())


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __post_init__(self) -> None:
        if self.resource_type not in _OPERATIONS_OF:
            raise ValueError(
                f"resource type {self.resource_type.kafka_name} cannot be bound; valid: "
                + ", ".join(t.kafka_name for t in _OPERATIONS_OF)
            )
        if self.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise ValueError(
                f"pattern type {self.pattern_type.kafka_name} is for filters; a binding's is "
                "Literal or Prefixed"
            )
        if not self.name:
            raise ValueError("a resource name cannot be empty")
        if self.resource_type is ResourceType.CLUSTER and (
            self.name != CLUSTER_NAME or self.pattern_type is not PatternType.LITERAL
        ):
            raise ValueError(f"the Cluster resource is LITERAL {CLUSTER_NAME!r}")

    def __str__(self) -> str:
        """kafka-acls.sh's ``ResourcePattern(resourceType=TOPIC, name=t, patternType=LITERAL)``."""
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    principal: str  # "User:alice", or "User:*" for every principal
    host: str  # an IP address, or "*" for every host
    operation: AclOperation
    permission_type: AclPermissionType

    def __post_init__(self) -> None:
        KafkaPrincipal.parse(self.principal)  # ValueError naming the form
        if not self.host:
            raise ValueError("an ACL's host cannot be empty (use * for every host)")
        if self.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
            raise ValueError(f"an ACL's operation cannot be {self.operation.kafka_name}")
        if self.permission_type not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
            raise ValueError(
                f"an ACL's permission type is Allow or Deny, not {self.permission_type.kafka_name}"
            )

    def __str__(self) -> str:
        """kafka-acls.sh's ``(principal=User:a, host=*, operation=READ, permissionType=ALLOW)``."""
        return (
            f"(principal={self.principal}, host={self.host}, operation={self.operation.name}, "
            f"permissionType={self.permission_type.name})"
        )


@dataclass(frozen=True, slots=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry

    def __post_init__(self) -> None:
        allowed = operations_of(self.pattern.resource_type)
        if self.entry.operation not in allowed:
            raise ValueError(
                f"operation {self.entry.operation.kafka_name} does not apply to "
                f"{self.pattern.resource_type.kafka_name} resources; valid: "
                + ", ".join(sorted(op.kafka_name for op in allowed))
            )

    def __str__(self) -> str:
        return f"(pattern={self.pattern}, entry={self.entry})"


@dataclass(frozen=True, slots=True)
class ResourcePatternFilter:
    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None  # None: any name
    pattern_type: PatternType = PatternType.ANY

    def matches(self, pattern: ResourcePattern) -> bool:
        """Kafka's ``ResourcePatternFilter.matches``: ANY matches a name exactly, a pattern type
        matches its own patterns of that exact name, MATCH every pattern covering the name."""
        if self.resource_type is not ResourceType.ANY and self.resource_type != (
            pattern.resource_type
        ):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH) and (
            self.pattern_type != pattern.pattern_type
        ):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type is PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        return self.name.startswith(pattern.name)


@dataclass(frozen=True, slots=True)
class AccessControlEntryFilter:
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches(self, entry: AccessControlEntry) -> bool:
        return (
            (self.principal is None or self.principal == entry.principal)
            and (self.host is None or self.host == entry.host)
            and (self.operation is AclOperation.ANY or self.operation == entry.operation)
            and (
                self.permission_type is AclPermissionType.ANY
                or self.permission_type == entry.permission_type
            )
        )


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    pattern: ResourcePatternFilter = ResourcePatternFilter()
    entry: AccessControlEntryFilter = AccessControlEntryFilter()

    def matches(self, binding: AclBinding) -> bool:
        return self.pattern.matches(binding.pattern) and self.entry.matches(binding.entry)

    @classmethod
    def exactly(cls, binding: AclBinding) -> AclBindingFilter:
        """The filter that matches ``binding`` and no other."""
        pattern, entry = binding.pattern, binding.entry
        return cls(
            ResourcePatternFilter(pattern.resource_type, pattern.name, pattern.pattern_type),
            AccessControlEntryFilter(
                entry.principal, entry.host, entry.operation, entry.permission_type
            ),
        )


ANY_BINDING = AclBindingFilter()
_ID_NAMESPACE = uuid.UUID("5d6c3a6e-5b5f-4d0e-9a51-6b1f0d4e8a11")


def acl_id(binding: AclBinding) -> uuid.UUID:
    """An ACL's id: derived from its binding, so that the same ACL has the same id in every
    process and mode (ZooKeeper's layout stores no ids), and creating it twice is one ACL."""
    return uuid.uuid5(_ID_NAMESPACE, repr(binding))
