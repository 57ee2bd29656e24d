"""ACLs across the edges: the metadata records (``AccessControlEntryRecord``,
``RemoveAccessControlEntryRecord``) and AdminService's ``AclBinding`` / ``AclBindingFilter``, all
with Kafka's codes. Decoders raise ValueError naming what is wrong (a bad request is
INVALID_REQUEST)."""

from __future__ import annotations

import uuid

from tiered.rpc.v1 import controller_pb2, metadata_pb2
from tiered.security.acl import (
    AccessControlEntry,
    AccessControlEntryFilter,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)

__all__ = [
    "acl_record",
    "binding_from_proto",
    "binding_from_record",
    "binding_to_proto",
    "filter_from_proto",
    "filter_to_proto",
    "remove_acl_record",
]


def binding_to_proto(binding: AclBinding) -> controller_pb2.AclBinding:
    pattern, entry = binding.pattern, binding.entry
    return controller_pb2.AclBinding(
        resource_type=int(pattern.resource_type),
        resource_name=pattern.name,
        pattern_type=int(pattern.pattern_type),
        principal=entry.principal,
        host=entry.host,
        operation=int(entry.operation),
        permission_type=int(entry.permission_type),
    )


def _binding(
    resource_type: int,
    name: str,
    pattern_type: int,
    principal: str,
    host: str,
    operation: int,
    permission_type: int,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            ResourceType.from_code(resource_type, "resource type"),
            name,
            PatternType.from_code(pattern_type, "pattern type"),
        ),
        AccessControlEntry(
            principal,
            host,
            AclOperation.from_code(operation, "operation"),
            AclPermissionType.from_code(permission_type, "permission type"),
        ),
    )


def binding_from_proto(message: controller_pb2.AclBinding) -> AclBinding:
    return _binding(
        message.resource_type,
        message.resource_name,
        message.pattern_type,
        message.principal,
        message.host,
        message.operation,
        message.permission_type,
    )


def filter_to_proto(binding_filter: AclBindingFilter) -> controller_pb2.AclBindingFilter:
    pattern, entry = binding_filter.pattern, binding_filter.entry
    message = controller_pb2.AclBindingFilter(
        resource_type=int(pattern.resource_type),
        pattern_type=int(pattern.pattern_type),
        operation=int(entry.operation),
        permission_type=int(entry.permission_type),
    )
    if pattern.name is not None:
        message.resource_name = pattern.name
    if entry.principal is not None:
        message.principal = entry.principal
    if entry.host is not None:
        message.host = entry.host
    return message


def filter_from_proto(message: controller_pb2.AclBindingFilter) -> AclBindingFilter:
    """UNKNOWN (0) codes are refused: a filter says ANY (1) to match everything."""
    resource_type = ResourceType.from_code(message.resource_type, "resource type")
    pattern_type = PatternType.from_code(message.pattern_type, "pattern type")
    operation = AclOperation.from_code(message.operation, "operation")
    permission = AclPermissionType.from_code(message.permission_type, "permission type")
    for value, what in (
        (resource_type, "resource type"),
        (pattern_type, "pattern type"),
        (operation, "operation"),
        (permission, "permission type"),
    ):
        if value == 0:
            raise ValueError(f"a filter's {what} cannot be UNKNOWN (use ANY)")
    return AclBindingFilter(
        ResourcePatternFilter(
            resource_type,
            message.resource_name if message.HasField("resource_name") else None,
            pattern_type,
        ),
        AccessControlEntryFilter(
            message.principal if message.HasField("principal") else None,
            message.host if message.HasField("host") else None,
            operation,
            permission,
        ),
    )


def acl_record(acl_id: uuid.UUID, binding: AclBinding) -> metadata_pb2.MetadataRecord:
    pattern, entry = binding.pattern, binding.entry
    return metadata_pb2.MetadataRecord(
        access_control_entry=metadata_pb2.AccessControlEntryRecord(
            id=acl_id.bytes,
            resource_type=int(pattern.resource_type),
            resource_name=pattern.name,
            pattern_type=int(pattern.pattern_type),
            principal=entry.principal,
            host=entry.host,
            operation=int(entry.operation),
            permission_type=int(entry.permission_type),
        )
    )


def binding_from_record(
    record: metadata_pb2.AccessControlEntryRecord,
) -> tuple[uuid.UUID, AclBinding]:
    if len(record.id) != 16:
        raise ValueError(f"AccessControlEntryRecord.id must be 16 bytes, got {len(record.id)}")
    return uuid.UUID(bytes=bytes(record.id)), _binding(
        record.resource_type,
        record.resource_name,
        record.pattern_type,
        record.principal,
        record.host,
        record.operation,
        record.permission_type,
    )


def remove_acl_record(acl_id: uuid.UUID) -> metadata_pb2.MetadataRecord:
    return metadata_pb2.MetadataRecord(
        remove_access_control_entry=metadata_pb2.RemoveAccessControlEntryRecord(id=acl_id.bytes)
    )
