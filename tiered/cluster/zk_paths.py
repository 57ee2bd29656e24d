"""ZooKeeper layout of the cluster metadata (contract: DESIGN.md section 4), relative to the
configured chroot. Data formats follow Kafka's where Kafka has the znode."""

from __future__ import annotations

import uuid

BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
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
