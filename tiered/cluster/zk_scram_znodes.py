"""SCRAM credentials in ZooKeeper, as Kafka keeps them: a user's config znode
``/config/users/{sanitized name}`` (``tiered.cluster.zk_paths.user_config``) holds
``{"version": 1, "config": {"SCRAM-SHA-512": "salt=...,stored_key=...,server_key=...,
iterations=4096"}}`` (Kafka's ``ScramCredentialUtils``), beside any other keys of the user. The
controller writes these znodes; brokers read and watch them (``zk_scram_watch``)."""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping

from tiered.security.scram import ScramCredential, ScramMechanism

__all__ = [
    "USER_CONFIG_VERSION",
    "decode_user_config",
    "encode_user_config",
    "scram_credentials_of",
    "with_scram_changes",
]

USER_CONFIG_VERSION = 1


def decode_user_config(data: bytes | None) -> dict[str, str]:
    """The ``config`` of a user znode ({} for a missing or empty znode); ValueError for data
    that is not Kafka's entity config JSON (the message never quotes a value)."""
    if not data:
        return {}
    try:
        value = json.loads(data)
        config = value["config"]
        if not isinstance(config, dict):
            raise TypeError("config is not an object")
        return {str(k): str(v) for k, v in config.items()}
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"not a user config znode ({type(e).__name__})") from None


def encode_user_config(config: Mapping[str, str]) -> bytes:
    return json.dumps(
        {"version": USER_CONFIG_VERSION, "config": dict(config)}, separators=(",", ":")
    ).encode()


def scram_credentials_of(config: Mapping[str, str]) -> dict[ScramMechanism, ScramCredential]:
    """The SCRAM credentials among a user's configs; ValueError naming the mechanism whose value
    does not parse."""
    found: dict[ScramMechanism, ScramCredential] = {}
    for mechanism in ScramMechanism:
        text = config.get(mechanism.mechanism_name)
        if text is None:
            continue
        try:
            found[mechanism] = ScramCredential.from_config_value(text)
        except ValueError as e:
            raise ValueError(f"{mechanism}: {e}") from None
    return found


def with_scram_changes(
    config: Mapping[str, str],
    upsertions: Mapping[ScramMechanism, ScramCredential],
    deletions: Collection[ScramMechanism],
) -> dict[str, str]:
    """``config`` with the credentials of ``upsertions`` set and those of ``deletions`` gone."""
    changed = {k: v for k, v in config.items() if k not in {m.mechanism_name for m in deletions}}
    for mechanism, credential in upsertions.items():
        changed[mechanism.mechanism_name] = credential.to_config_value()
    return changed
