"""The cluster's ACLs, each under its id (as KRaft's ``AccessControlEntryRecord`` keys them), indexed
so that an authorization check costs O(length of the resource name), whatever the number of ACLs.

Literal bindings are found by (resource type, name), the literal wildcard by (type, ``*``), and
prefixed bindings by (type, prefix) for each prefix length in use: at most one dict lookup per
character of the name. Within a resource, entries are grouped by principal, so a check reads the
groups of its principal and of ``User:*`` only.

Readers do not lock: every value a check reads is replaced, never changed in place, and a single
dict lookup is atomic under the GIL. Writers (one at a time: the controller under its term lock,
a broker's metadata follower) take ``_lock``.
"""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from collections.abc import Iterator, Mapping
from types import MappingProxyType

from tiered.security.acl import (
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    PatternType,
    ResourcePattern,
    ResourceType,
)

__all__ = ["AclIndex", "ResourceEntries"]

# One resource pattern's entries by principal ("User:alice" -> its entries there).
ResourceEntries = Mapping[str, tuple[AccessControlEntry, ...]]
_Key = tuple[ResourceType, str]
_EMPTY: ResourceEntries = MappingProxyType({})


class AclIndex:
    def __init__(self, bindings: Mapping[uuid.UUID, AclBinding] | None = None) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[uuid.UUID, AclBinding] = {}
        self._ids: dict[AclBinding, uuid.UUID] = {}
        self._literal: dict[_Key, ResourceEntries] = {}
        self._prefixed: dict[_Key, ResourceEntries] = {}
        # Per resource type, the lengths of the prefixed names in use (with how many patterns
        # have each): a check looks up only prefixes of those lengths.
        self._prefix_lengths: dict[ResourceType, tuple[int, ...]] = {}
        self._length_counts: dict[ResourceType, Counter[int]] = {}
        for acl_id, binding in (bindings or {}).items():
            self.put(acl_id, binding)

    def __len__(self) -> int:
        return len(self._by_id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AclIndex) and self._by_id == other._by_id

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"AclIndex({len(self._by_id)} ACLs)"

    def copy(self) -> AclIndex:
        return AclIndex(dict(self._by_id))

    def items(self) -> list[tuple[uuid.UUID, AclBinding]]:
        return list(self._by_id.items())

    def get(self, acl_id: uuid.UUID) -> AclBinding | None:
        return self._by_id.get(acl_id)

    def id_of(self, binding: AclBinding) -> uuid.UUID | None:
        """The id of an ACL equal to ``binding``, None if there is none."""
        return self._ids.get(binding)

    def of_pattern(self, pattern: ResourcePattern) -> list[tuple[uuid.UUID, AclBinding]]:
        """The ACLs of exactly ``pattern`` (not of the patterns covering its name)."""
        table = self._prefixed if pattern.pattern_type is PatternType.PREFIXED else self._literal
        found = []
        for entries in table.get((pattern.resource_type, pattern.name), _EMPTY).values():
            for entry in entries:
                binding = AclBinding(pattern, entry)
                found.append((self._ids[binding], binding))
        return found

    def matching(self, binding_filter: AclBindingFilter) -> list[tuple[uuid.UUID, AclBinding]]:
        """Every ACL the filter matches (DescribeAcls, DeleteAcls: a listing, not a check)."""
        return [(i, b) for i, b in self._by_id.items() if binding_filter.matches(b)]

    # ----------------------------------------------------------------------------- changes

    def put(self, acl_id: uuid.UUID, binding: AclBinding) -> None:
        """Adds the ACL under ``acl_id`` (replacing the one with that id). Idempotent."""
        with self._lock:
            if self._by_id.get(acl_id) == binding:
                return
            self._remove_locked(acl_id)
            self._by_id[acl_id] = binding
            self._ids[binding] = acl_id
            table, key = self._table(binding)
            entries = dict(table.get(key, _EMPTY))
            principal = binding.entry.principal
            entries[principal] = (*entries.get(principal, ()), binding.entry)
            if binding.pattern.pattern_type is PatternType.PREFIXED and key not in table:
                self._count_length(binding.pattern.resource_type, len(key[1]), +1)
            table[key] = MappingProxyType(entries)

    def remove(self, acl_id: uuid.UUID) -> AclBinding | None:
        """Removes the ACL with ``acl_id``; returns it, or None if there was none."""
        with self._lock:
            return self._remove_locked(acl_id)

    def _remove_locked(self, acl_id: uuid.UUID) -> AclBinding | None:
        binding = self._by_id.pop(acl_id, None)
        if binding is None:
            return None
        if self._ids.get(binding) == acl_id:
            del self._ids[binding]
        table, key = self._table(binding)
        entries = dict(table.get(key, _EMPTY))
        principal = binding.entry.principal
        left = list(entries.get(principal, ()))
        if binding.entry in left:
            left.remove(binding.entry)
        if left:
            entries[principal] = tuple(left)
        else:
            entries.pop(principal, None)
        if entries:
            table[key] = MappingProxyType(entries)
        else:
            table.pop(key, None)
            if binding.pattern.pattern_type is PatternType.PREFIXED:
                self._count_length(binding.pattern.resource_type, len(key[1]), -1)
        return binding

    def _table(self, binding: AclBinding) -> tuple[dict[_Key, ResourceEntries], _Key]:
        pattern = binding.pattern
        table = self._prefixed if pattern.pattern_type is PatternType.PREFIXED else self._literal
        return table, (pattern.resource_type, pattern.name)

    def _count_length(self, resource_type: ResourceType, length: int, delta: int) -> None:
        counts = self._length_counts.setdefault(resource_type, Counter())
        counts[length] += delta
        if counts[length] <= 0:
            del counts[length]
        self._prefix_lengths[resource_type] = tuple(sorted(counts))

    # ----------------------------------------------------------------------------- checks

    def resource_entries(self, resource_type: ResourceType, name: str) -> Iterator[ResourceEntries]:
        """The entries of every pattern covering the resource ``name`` of ``resource_type``: its
        literal pattern, the literal ``*``, and each prefixed pattern that is a prefix of it.
        O(len(name)) dict lookups."""
        literal = self._literal.get((resource_type, name))
        if literal is not None:
            yield literal
        if name != WILDCARD_RESOURCE:
            wildcard = self._literal.get((resource_type, WILDCARD_RESOURCE))
            if wildcard is not None:
                yield wildcard
        prefixed = self._prefixed
        for length in self._prefix_lengths.get(resource_type, ()):
            if length > len(name):
                break
            entries = prefixed.get((resource_type, name[:length]))
            if entries is not None:
                yield entries
