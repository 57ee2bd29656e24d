"""Kafka's ``StandardAuthorizer``: may this request's principal, from its host, do this operation on
this resource?

- ``authorizer.enabled`` (default false): without it every request is allowed, as before ACLs;
- ``super.users`` (``User:a;User:b``): allowed everything, ACLs or not;
- otherwise the ACLs covering the resource decide: a matching DENY wins over any ALLOW; a
  matching ALLOW allows; an ACL matches when its principal is the request's or ``User:*``, its
  host the client's or ``*``, and its operation the one asked, ALL, or (for an ALLOW) one that
  implies it (READ, WRITE, DELETE, ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS);
- a resource that no ACL covers at all (for any principal) is allowed only with
  ``allow.everyone.if.no.acl.found=true`` (default false).

A check costs O(length of the resource name) dict lookups (``AclIndex``), never a scan of the ACLs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from tiered.properties import bool_property
from tiered.security.acl import (
    CLUSTER_NAME,
    IMPLIES_DESCRIBE,
    IMPLIES_DESCRIBE_CONFIGS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from tiered.security.acl_index import AclIndex
from tiered.security.principal import KafkaPrincipal, RequestContext

__all__ = [
    "ALLOW_EVERYONE_IF_NO_ACL_FOUND",
    "AUTHORIZER_ENABLED",
    "SUPER_USERS",
    "AuthorizerConfig",
    "StandardAuthorizer",
]

AUTHORIZER_ENABLED = "authorizer.enabled"
SUPER_USERS = "super.users"
ALLOW_EVERYONE_IF_NO_ACL_FOUND = "allow.everyone.if.no.acl.found"
# Kafka's own stand-in for "a resource no ACL names" in authorizeByResourceType.
_NAMED_BY_NOBODY = "hardcode"


@dataclass(frozen=True)
class AuthorizerConfig:
    enabled: bool = False
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False

    @classmethod
    def from_properties(cls, values: Mapping[str, str]) -> AuthorizerConfig:
        """The three keys of a server's properties; ValueError names a bad one."""
        raw_super = values.get(SUPER_USERS, "")
        super_users = set()
        for text in raw_super.split(";"):
            if text.strip():
                try:
                    super_users.add(str(KafkaPrincipal.parse(text)))
                except ValueError as e:
                    raise ValueError(f"{SUPER_USERS}={raw_super!r} is not valid: {e}") from None
        return cls(
            enabled=bool_property(values, AUTHORIZER_ENABLED, False),
            super_users=frozenset(super_users),
            allow_everyone_if_no_acl_found=bool_property(
                values, ALLOW_EVERYONE_IF_NO_ACL_FOUND, False
            ),
        )


def _entry_result(entry: AccessControlEntry, operation: AclOperation) -> bool | None:
    """True (allowed) or False (denied) when ``entry`` speaks to ``operation``, else None."""
    granted = entry.operation
    if granted is not AclOperation.ALL:
        if entry.permission_type is AclPermissionType.ALLOW:
            if operation is AclOperation.DESCRIBE:
                if granted not in IMPLIES_DESCRIBE:
                    return None
            elif operation is AclOperation.DESCRIBE_CONFIGS:
                if granted not in IMPLIES_DESCRIBE_CONFIGS:
                    return None
            elif granted is not operation:
                return None
        elif granted is not operation:
            return None
    return entry.permission_type is AclPermissionType.ALLOW


class StandardAuthorizer:
    """Checks against the ACLs ``acls()`` returns at the moment of the check (the metadata image
    of the process: it may be replaced whole, as a broker's is by a snapshot)."""

    def __init__(self, config: AuthorizerConfig, acls: Callable[[], AclIndex]) -> None:
        self.config = config
        self._acls = acls

    @property
    def enabled(self) -> bool:
        return self.config.enabled

    def authorize(
        self,
        context: RequestContext,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str = CLUSTER_NAME,
    ) -> bool:
        if not self.config.enabled:
            return True
        principal = str(context.principal)
        if principal in self.config.super_users:
            return True
        covered = allowed = False
        host = context.client_host
        for entries in self._acls().resource_entries(resource_type, name):
            covered = True
            for who in (principal, WILDCARD_PRINCIPAL):
                for entry in entries.get(who, ()):
                    if entry.host not in (WILDCARD_HOST, host):
                        continue
                    result = _entry_result(entry, operation)
                    if result is False:
                        return False  # DENY wins
                    if result:
                        allowed = True
        if allowed:
            return True
        return not covered and self.config.allow_everyone_if_no_acl_found

    def authorize_by_resource_type(
        self, context: RequestContext, operation: AclOperation, resource_type: ResourceType
    ) -> bool:
        """Kafka's ``authorizeByResourceType``: whether ``operation`` is allowed on *some*
        resource of ``resource_type`` (an idempotent producer needs Write on some topic). Unlike
        :meth:`authorize` it reads every ACL, as Kafka's does; it serves rare requests only.

        Allowed when a resource nobody named would be (super users, no ACLs with
        ``allow.everyone.if.no.acl.found``), or when an ALLOW for the principal (or ``User:*``)
        and host on a literal name or a prefix is not dominated by a DENY: a literal deny of the
        same name, a prefixed deny of a prefix of it, or a literal deny of ``*``."""
        if self.authorize(context, operation, resource_type, _NAMED_BY_NOBODY):
            return True
        principals = (str(context.principal), WILDCARD_PRINCIPAL)
        hosts = (context.client_host, WILDCARD_HOST)
        denied: dict[PatternType, set[str]] = {
            PatternType.LITERAL: set(),
            PatternType.PREFIXED: set(),
        }
        allowed: list[tuple[PatternType, str]] = []
        for _, binding in self._acls().items():
            pattern, entry = binding.pattern, binding.entry
            if pattern.resource_type is not resource_type or entry.principal not in principals:
                continue
            if entry.host not in hosts or entry.operation not in (operation, AclOperation.ALL):
                continue
            if entry.permission_type is AclPermissionType.DENY:
                if (
                    pattern.pattern_type is PatternType.LITERAL
                    and pattern.name == WILDCARD_RESOURCE
                ):
                    return False
                denied[pattern.pattern_type].add(pattern.name)
            elif pattern.pattern_type is PatternType.LITERAL and pattern.name == WILDCARD_RESOURCE:
                return True
            else:
                allowed.append((pattern.pattern_type, pattern.name))
        for pattern_type, name in allowed:
            if pattern_type is PatternType.LITERAL and name in denied[PatternType.LITERAL]:
                continue
            if not any(
                name[:end] in denied[PatternType.PREFIXED] for end in range(1, len(name) + 1)
            ):
                return True
        return False
