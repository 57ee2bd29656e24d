"""SCRAM user management as a client asks for it (Kafka's ``UserScramCredentialUpsertion`` and
``UserScramCredentialDeletion``), and its conversion to the AdminService's protobuf.

The password is salted here, on the client (as Kafka's Admin client does): what travels is the
salt, the salted password and the iterations, so no server ever sees the password. Values are
checked before anything is sent or hashed; the errors never quote the password.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from tiered.errors import ErrorCode, TieredError
from tiered.rpc.status import error_from_proto
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.security.scram import (
    DEFAULT_ITERATIONS,
    MAX_ITERATIONS,
    ScramFormatter,
    ScramMechanism,
)

__all__ = [
    "UserScramCredentialDeletion",
    "UserScramCredentialUpsertion",
    "UserScramCredentials",
    "alteration_to_proto",
    "described_from_proto",
]

SALT_BYTES = 32


@dataclass(frozen=True)
class UserScramCredentialUpsertion:
    """Set ``user``'s ``mechanism`` credential to ``password`` (never shown in a repr)."""

    user: str
    mechanism: ScramMechanism
    password: str = field(repr=False)
    iterations: int = DEFAULT_ITERATIONS

    def check(self) -> None:
        """UNACCEPTABLE_CREDENTIAL for an empty user or password, or iterations outside
        Kafka's range."""
        if not self.user:
            raise TieredError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "the user name is empty")
        if not self.password:
            raise TieredError(
                ErrorCode.UNACCEPTABLE_CREDENTIAL, f"the password of user {self.user!r} is empty"
            )
        low = self.mechanism.min_iterations
        if not low <= self.iterations <= MAX_ITERATIONS:
            raise TieredError(
                ErrorCode.UNACCEPTABLE_CREDENTIAL,
                f"iterations={self.iterations} for {self.mechanism} is not valid; valid: "
                f"{low} to {MAX_ITERATIONS}",
            )


@dataclass(frozen=True)
class UserScramCredentialDeletion:
    user: str
    mechanism: ScramMechanism


@dataclass(frozen=True)
class UserScramCredentials:
    """A user's SCRAM mechanisms with their iterations; never a salt or a key."""

    user: str
    credentials: tuple[tuple[ScramMechanism, int], ...]


def alteration_to_proto(
    upsertions: Sequence[UserScramCredentialUpsertion],
    deletions: Sequence[UserScramCredentialDeletion],
) -> pb.AlterUserScramCredentialsRequest:
    """Checks every upsertion first (nothing is hashed if one is bad), then salts each."""
    for upsertion in upsertions:
        upsertion.check()
    request = pb.AlterUserScramCredentialsRequest(
        deletions=[
            pb.ScramCredentialDeletion(name=d.user, mechanism=d.mechanism.type_id)
            for d in deletions
        ]
    )
    for upsertion in upsertions:
        salt = os.urandom(SALT_BYTES)
        request.upsertions.append(
            pb.ScramCredentialUpsertion(
                name=upsertion.user,
                mechanism=upsertion.mechanism.type_id,
                iterations=upsertion.iterations,
                salt=salt,
                salted_password=ScramFormatter(upsertion.mechanism).salted_password(
                    upsertion.password, salt, upsertion.iterations
                ),
            )
        )
    return request


def described_from_proto(
    response: pb.DescribeUserScramCredentialsResponse,
) -> list[UserScramCredentials | TieredError]:
    """Each user's credentials, or its error (RESOURCE_NOT_FOUND: a named user without any)."""
    found: list[UserScramCredentials | TieredError] = []
    for result in response.results:
        error = error_from_proto(result.error)
        if error is not None:
            found.append(error)
            continue
        try:
            credentials = tuple(
                (ScramMechanism.from_type(c.mechanism), c.iterations) for c in result.credentials
            )
        except ValueError as e:
            raise TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, str(e)) from None
        found.append(UserScramCredentials(result.user, credentials))
    return found
