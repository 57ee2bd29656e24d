"""``tiered-configs --entity-type users``: SCRAM credentials, in the shape of kafka-configs.sh.

    --alter --entity-type users --entity-name NAME
            --add-config 'SCRAM-SHA-512=[password=PW]'            (iterations=N inside too)
            --delete-config SCRAM-SHA-512
    --describe --entity-type users [--entity-name NAME] [--format json]

The password is salted before it leaves this process (``tiered.security.scram_admin``), and no
message of this module quotes it: a malformed ``--add-config`` is named by its mechanism and
key only. Everything given is checked before anything is sent.
"""

from __future__ import annotations

from collections.abc import Sequence

from cli.common import print_json
from tiered.admin import AdminClient
from tiered.errors import ErrorCode, TieredError
from tiered.security.scram import DEFAULT_ITERATIONS, ScramMechanism
from tiered.security.scram_admin import (
    UserScramCredentialDeletion,
    UserScramCredentials,
    UserScramCredentialUpsertion,
)

__all__ = ["alter_users", "describe_users", "parse_scram_additions", "parse_scram_deletions"]

_FORM = "MECHANISM=[password=PW] or MECHANISM=[iterations=N,password=PW]"


def _invalid(message: str) -> TieredError:
    return TieredError(ErrorCode.INVALID_REQUEST, message)


def _mechanism(name: str) -> ScramMechanism:
    try:
        return ScramMechanism.from_name(name)
    except ValueError:
        raise _invalid(
            f"{name.strip()!r} is not a user config this cluster keeps; valid: "
            f"{', '.join(ScramMechanism.names())}"
        ) from None


def _split_entries(text: str) -> list[str]:
    """``text`` split at the commas outside square brackets."""
    entries: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(text):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            entries.append(text[start:i])
            start = i + 1
    entries.append(text[start:])
    return entries


def parse_scram_additions(user: str, texts: Sequence[str]) -> list[UserScramCredentialUpsertion]:
    """Every ``--add-config`` of a user: ``MECHANISM=[iterations=N,password=PW]`` entries.
    INVALID_REQUEST naming the mechanism and key (never a value) for anything else; the
    iterations' range and an empty password are UNACCEPTABLE_CREDENTIAL."""
    upsertions: list[UserScramCredentialUpsertion] = []
    for text in texts:
        for entry in _split_entries(text):
            name, sep, value = entry.partition("=")
            mechanism = _mechanism(name)
            value = value.strip()
            if not sep or not (value.startswith("[") and value.endswith("]")):
                raise _invalid(f"{mechanism} takes {_FORM}")
            fields: dict[str, str] = {}
            for item in value[1:-1].split(","):
                key, has_value, item_value = item.partition("=")
                key = key.strip()
                if not has_value or key not in ("password", "iterations"):
                    raise _invalid(
                        f"{mechanism}: {key or 'an empty entry'!r} is not valid inside the "
                        f"brackets; valid: password, iterations ({_FORM})"
                    )
                if key in fields:
                    raise _invalid(f"{mechanism}: {key} is given twice")
                fields[key] = item_value
            if "password" not in fields:
                raise _invalid(f"{mechanism} needs a password: {_FORM}")
            iterations_text = fields.get("iterations", str(DEFAULT_ITERATIONS)).strip()
            if not iterations_text.isdigit():
                raise _invalid(f"{mechanism}: iterations must be a whole number")
            if any(u.mechanism is mechanism for u in upsertions):
                raise _invalid(f"{mechanism} is given more than once")
            upsertion = UserScramCredentialUpsertion(
                user, mechanism, fields["password"], int(iterations_text)
            )
            upsertion.check()
            upsertions.append(upsertion)
    return upsertions


def parse_scram_deletions(user: str, texts: Sequence[str]) -> list[UserScramCredentialDeletion]:
    """``--delete-config SCRAM-SHA-512[,SCRAM-SHA-256]``."""
    deletions: list[UserScramCredentialDeletion] = []
    for text in texts:
        for name in text.split(","):
            mechanism = _mechanism(name)
            if all(d.mechanism is not mechanism for d in deletions):
                deletions.append(UserScramCredentialDeletion(user, mechanism))
    return deletions


def alter_users(
    admin: AdminClient, user: str, additions: Sequence[str], deletions: Sequence[str]
) -> int:
    """One alteration per mechanism (Kafka refuses a user altered twice in one request), all
    checked first."""
    if not user:
        raise TieredError(ErrorCode.UNACCEPTABLE_CREDENTIAL, "the user name is empty")
    upsertions = parse_scram_additions(user, additions)
    removals = parse_scram_deletions(user, deletions)
    both = {u.mechanism for u in upsertions} & {d.mechanism for d in removals}
    if both:
        raise _invalid(f"{both.pop()} is both in --add-config and in --delete-config")
    for upsertion in upsertions:
        _raise_first(admin.alter_user_scram_credentials(upsertions=[upsertion]))
    for removal in removals:
        _raise_first(admin.alter_user_scram_credentials(deletions=[removal]))
    print(f"Completed updating config for user {user}.")
    return 0


def _raise_first(results: Sequence[tuple[str, TieredError | None]]) -> None:
    for _, error in results:
        if error is not None:
            raise error


def describe_users(admin: AdminClient, user: str | None, output_format: str) -> int:
    """kafka-configs.sh's line per user with credentials (a named user without any prints
    nothing, as there); ``--format json``: a list of users with their mechanisms."""
    described = admin.describe_user_scram_credentials([user] if user else [])
    found: list[UserScramCredentials] = []
    for item in described:
        if isinstance(item, TieredError):
            if item.code is not ErrorCode.RESOURCE_NOT_FOUND:
                raise item
            continue
        found.append(item)
    if output_format == "json":
        print_json(
            [
                {
                    "user": u.user,
                    "credentials": [
                        {"mechanism": m.mechanism_name, "iterations": i} for m, i in u.credentials
                    ],
                }
                for u in found
            ]
        )
        return 0
    for u in found:
        described_text = ", ".join(f"{m}=iterations={i}" for m, i in u.credentials)
        print(f"SCRAM credential configs for user-principal '{u.user}' are {described_text}")
    return 0
