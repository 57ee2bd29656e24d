"""SCRAM users on the active controller (Kafka's AlterUserScramCredentials and
DescribeUserScramCredentials, as its ScramControlManager answers them).

An alteration names each user once (a user named twice is refused DUPLICATE_RESOURCE, both
times); each user is judged on its own, and every accepted change is persisted in one write.
The client salted the password: what arrives is (salt, salted password, iterations), from which
the stored and server keys are derived here; the password is never seen, and nothing secret is
logged. The audit line names each user, mechanism and iteration count.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from controller.leadership import Term
from controller.store import MetadataStore
from tiered.cluster.model import ScramCredentialKey
from tiered.errors import ErrorCode, TieredError
from tiered.security.scram import MAX_ITERATIONS, ScramCredential, ScramMechanism

__all__ = ["ScramDeletion", "ScramUpsertion", "ScramUsers", "check_user_name"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ScramUpsertion:
    user: str
    mechanism_type: int  # Kafka's: 1 SCRAM-SHA-256, 2 SCRAM-SHA-512
    iterations: int
    salt: bytes = field(repr=False)
    salted_password: bytes = field(repr=False)


@dataclass(frozen=True)
class ScramDeletion:
    user: str
    mechanism_type: int


def check_user_name(user: str) -> None:
    """UNACCEPTABLE_CREDENTIAL for a name that cannot be a SCRAM user: empty, ``.`` or ``..``
    (not a znode name), or with control characters."""
    if not user:
        raise TieredError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    if user in {".", ".."} or any(ord(c) < 0x20 or ord(c) == 0x7F for c in user):
        raise TieredError(
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            f"user name {user!r} is not valid; valid: a non-empty name other than '.' and "
            "'..' without control characters",
        )


def _mechanism(type_id: int) -> ScramMechanism:
    try:
        return ScramMechanism.from_type(type_id)
    except ValueError as e:
        raise TieredError(ErrorCode.UNSUPPORTED_SASL_MECHANISM, str(e)) from None


def _credential(upsertion: ScramUpsertion, mechanism: ScramMechanism) -> ScramCredential:
    if upsertion.iterations < mechanism.min_iterations:
        raise TieredError(
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            f"Too few iterations: {upsertion.iterations}; valid: "
            f"{mechanism.min_iterations} to {MAX_ITERATIONS}",
        )
    if upsertion.iterations > MAX_ITERATIONS:
        raise TieredError(
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            f"Too many iterations: {upsertion.iterations}; valid: "
            f"{mechanism.min_iterations} to {MAX_ITERATIONS}",
        )
    digest_size = mechanism.digest_size
    if not upsertion.salt or len(upsertion.salted_password) != digest_size:
        raise TieredError(
            ErrorCode.UNACCEPTABLE_CREDENTIAL,
            f"a {mechanism} credential needs a salt and a {digest_size}-byte salted password",
        )
    return ScramCredential.from_salted_password(
        mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
    )


class ScramUsers:
    def __init__(self, store: MetadataStore, term: Term) -> None:
        self._store = store
        self._term = term

    def alter(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion]
    ) -> list[tuple[str, TieredError | None]]:
        """Each user named and its outcome, in the order first named. NOT_CONTROLLER (raised)
        when this controller is not active or the write failed."""
        order: list[str] = []
        errors: dict[str, TieredError] = {}
        named: set[str] = set()
        changes: list[ScramDeletion | ScramUpsertion] = [*deletions, *upsertions]
        for change in changes:
            if change.user in named:
                errors[change.user] = TieredError(
                    ErrorCode.DUPLICATE_RESOURCE,
                    "A user credential cannot be altered twice in the same request",
                )
            else:
                named.add(change.user)
                order.append(change.user)
        with self._term.lock:
            self._term.require_active()
            credentials = self._term.image.scram_credentials
            removed: list[ScramCredentialKey] = []
            upserted: dict[ScramCredentialKey, ScramCredential] = {}
            for deletion in deletions:
                if deletion.user in errors:
                    continue
                try:
                    check_user_name(deletion.user)
                    key = (deletion.user, _mechanism(deletion.mechanism_type))
                    if key not in credentials:
                        raise TieredError(
                            ErrorCode.RESOURCE_NOT_FOUND,
                            "Attempt to delete a user credential that does not exist",
                        )
                except TieredError as e:
                    errors[deletion.user] = e
                    continue
                removed.append(key)
            for upsertion in upsertions:
                if upsertion.user in errors:
                    continue
                try:
                    check_user_name(upsertion.user)
                    mechanism = _mechanism(upsertion.mechanism_type)
                    upserted[(upsertion.user, mechanism)] = _credential(upsertion, mechanism)
                except TieredError as e:
                    errors[upsertion.user] = e
            if removed or upserted:
                self._term.persist(
                    lambda: self._store.writes.alter_scram_credentials(upserted, removed)
                )
                for key in removed:
                    credentials.pop(key, None)
                credentials.update(upserted)
        for (user, mechanism), credential in upserted.items():
            log.info(
                "SCRAM credential of user %r set: %s, %d iterations",
                user,
                mechanism,
                credential.iterations,
            )
        for user, mechanism in removed:
            log.info("SCRAM credential of user %r removed: %s", user, mechanism)
        for user, error in errors.items():
            log.info("SCRAM credential change of user %r refused: %s", user, error)
        return [(user, errors.get(user)) for user in order]

    def describe(
        self, users: Sequence[str]
    ) -> list[tuple[str, list[tuple[ScramMechanism, int]] | TieredError]]:
        """(user, [(mechanism, iterations)]) for each user named, or for every user with a
        credential when none is named (by name); a named user without one gets
        RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE. Never a salt or a key."""
        with self._term.lock:
            self._term.require_active()
            by_user: dict[str, list[tuple[ScramMechanism, int]]] = {}
            for (user, mechanism), credential in self._term.image.scram_credentials.items():
                by_user.setdefault(user, []).append((mechanism, credential.iterations))
        for infos in by_user.values():
            infos.sort(key=lambda info: info[0].type_id)
        if not users:
            return [(user, by_user[user]) for user in sorted(by_user)]
        results: list[tuple[str, list[tuple[ScramMechanism, int]] | TieredError]] = []
        seen: set[str] = set()
        for user in users:
            if user in seen:
                results.append(
                    (
                        user,
                        TieredError(
                            ErrorCode.DUPLICATE_RESOURCE,
                            "Cannot describe SCRAM credentials for the same user twice in a "
                            "single request",
                        ),
                    )
                )
                continue
            seen.add(user)
            found = by_user.get(user)
            results.append(
                (
                    user,
                    found
                    if found is not None
                    else TieredError(
                        ErrorCode.RESOURCE_NOT_FOUND,
                        "Attempt to describe a user credential that does not exist",
                    ),
                )
            )
        return results
