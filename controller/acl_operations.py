"""The active controller's ACL operations (Kafka's CreateAcls, DescribeAcls, DeleteAcls): validated,
persisted through the term in one write, then applied to the image, whose ACLs are what the
controller authorizes with (brokers learn them from the metadata log or ZooKeeper).

An ACL's id is derived from its binding (``tiered.security.acl.acl_id``): creating an ACL that
exists is a success that writes nothing, as in Kafka.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from controller.leadership import Term
from controller.store import MetadataStore
from tiered.errors import ErrorCode, TieredError
from tiered.security.acl import AclBinding, AclBindingFilter, acl_id

__all__ = ["AclOperations"]

log = logging.getLogger(__name__)


def _check_storable(binding: AclBinding) -> TieredError | None:
    name = binding.pattern.name
    if "/" in name or name in (".", ".."):
        return TieredError(
            ErrorCode.INVALID_REQUEST,
            f"resource name {name!r} is not valid: no topic or group can be named so "
            "(it may not contain '/' or be '.' or '..')",
        )
    return None


class AclOperations:
    def __init__(self, store: MetadataStore, term: Term) -> None:
        self._store = store
        self._term = term

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[TieredError | None]:
        """One result per binding, in order; the valid new ones are persisted in one write."""
        results: list[TieredError | None] = [_check_storable(b) for b in bindings]
        with self._term.lock:
            self._term.require_active()
            acls = self._term.image.acls
            new = {
                acl_id(b): b
                for b, error in zip(bindings, results, strict=True)
                if error is None and acls.id_of(b) is None
            }
            if new:
                created = list(new.items())
                self._term.persist(lambda: self._store.writes.create_acls(created))
                for new_id, binding in created:
                    acls.put(new_id, binding)
        for binding in new.values():
            log.info("Created ACL %s", binding)
        return results

    def describe_acls(self, binding_filter: AclBindingFilter) -> list[AclBinding]:
        with self._term.lock:
            self._term.require_active()
            return [b for _, b in self._term.image.acls.matching(binding_filter)]

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """What each filter removed, in order (an ACL matched by several filters is reported
        by the first), all removed in one write."""
        with self._term.lock:
            self._term.require_active()
            acls = self._term.image.acls
            claimed: dict[object, None] = {}
            matched: list[list[AclBinding]] = []
            doomed = []
            for binding_filter in filters:
                mine = []
                for found_id, binding in acls.matching(binding_filter):
                    if found_id not in claimed:
                        claimed[found_id] = None
                        doomed.append((found_id, binding))
                        mine.append(binding)
                matched.append(mine)
            if doomed:
                self._term.persist(lambda: self._store.writes.delete_acls(doomed))
                for found_id, _ in doomed:
                    acls.remove(found_id)
        for _, binding in doomed:
            log.info("Deleted ACL %s", binding)
        return matched
