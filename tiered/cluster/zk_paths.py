"""ZooKeeper layout of the cluster metadata (contract: docs/design.md §3.1), relative to the
configured chroot. Data formats follow Kafka's where Kafka has the znode."""

from __future__ import annotations

import urllib.parse
import uuid

BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
CONFIG_USERS = "/config/users"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
DELETE_JOBS = "/tiered/delete_jobs"


def broker(broker_id: int) -> str:
    return f"{BROKER_IDS}/{broker_id}"


def topic(name: str) -> str:
    """JSON ``{"version": 3, "topic_id": ..., "partitions": {"0": [broker], ...}}``."""
    return f"{BROKER_TOPICS}/{name}"


def tiered_storage(name: str) -> str:
    return f"{topic(name)}/tieredstorage"


def tiered_epoch(name: str) -> str:
    """The decimal tiered epoch."""
    return f"{tiered_storage(name)}/tiered_epoch"


def tiered_state(name: str) -> str:
    """``ENABLED``, ``DISABLING`` or ``DISABLED``."""
    return f"{tiered_storage(name)}/state"


def topic_config(name: str) -> str:
    """JSON ``{"version": 1, "config": {...}}`` (the keys set on the topic)."""
    return f"{CONFIG_TOPICS}/{name}"


def delete_job(topic_id: uuid.UUID, tiered_epoch: int) -> str:
    """A delete job (``DeleteJob``), keyed by its topic id and tiered epoch: a serialized
    ``DeleteJobRecord`` (``proto/tiered/v1/metadata.proto``; earlier versions wrote the same
    fields as JSON, still read). Jobs outlive their topic, so they live apart from the topic's
    znodes."""
    return f"{DELETE_JOBS}/{topic_id}-{tiered_epoch}"


# Kafka's Sanitizer: Java's URLEncoder keeps letters, digits and ".-*_"; Kafka then writes "*"
# and a space as %2A and %20. What is left unescaped is this set.
_SANITIZER_KEEPS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789.-_")


def sanitize(name: str) -> str:
    """A user (or client id) as Kafka names its config znode: percent-encoded UTF-8."""
    return "".join(
        c if c in _SANITIZER_KEEPS else "".join(f"%{b:02X}" for b in c.encode()) for c in name
    )


def desanitize(znode_name: str) -> str:
    return urllib.parse.unquote(znode_name, errors="strict")


def user_config(name: str) -> str:
    """JSON ``{"version": 1, "config": {...}}``: Kafka's user entity config, where SCRAM
    credentials live (``"SCRAM-SHA-512": "salt=...,stored_key=...,server_key=...,iterations=N"``),
    beside any other keys (quotas) that are left as they are."""
    return f"{CONFIG_USERS}/{sanitize(name)}"
