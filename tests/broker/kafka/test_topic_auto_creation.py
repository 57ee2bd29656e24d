"""Topic auto-creation on one broker's Kafka handler (``broker.kafka.topic_auto_creation``), over
a fixed placement in the test process: which Metadata requests create a missing topic, with the
broker's ``num.partitions``, and what they are answered; the broker config keys."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode as KafkaErrorCode
from kio.schema.metadata.v3.request import MetadataRequest as MetadataV3
from kio.schema.metadata.v3.request import MetadataRequestTopic as TopicV3
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.types import TopicName

from broker.config import TopicAutoCreation
from tests.support.kafka_local import LocalBroker


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[LocalBroker]:
    local = LocalBroker(tmp_path, **{"num.partitions": "3"})
    try:
        yield local
    finally:
        local.close()


def metadata(broker: LocalBroker, *names: str, allow: bool) -> dict[str, KafkaErrorCode]:
    request = MetadataRequest(
        topics=tuple(MetadataRequestTopic(topic_id=None, name=TopicName(n)) for n in names),
        allow_auto_topic_creation=allow,
        include_topic_authorized_operations=False,
    )
    return {t.name: t.error_code for t in broker.call(request).topics}


def test_a_request_that_allows_it_creates_with_num_partitions(broker: LocalBroker) -> None:
    assert metadata(broker, "new", allow=True) == {"new": KafkaErrorCode.leader_not_available}
    assert [(t.name, t.partitions, dict(t.configs)) for t in broker.placement.created] == [
        ("new", 3, {})
    ]
    # Known from then on, at once.
    assert metadata(broker, "new", allow=True) == {"new": KafkaErrorCode.none}
    assert len(broker.placement.created) == 1


def test_a_request_that_does_not_allow_it_creates_nothing(broker: LocalBroker) -> None:
    assert metadata(broker, "new", allow=False) == {
        "new": KafkaErrorCode.unknown_topic_or_partition
    }
    assert broker.placement.created == []


def test_versions_before_4_always_allow_it(broker: LocalBroker) -> None:
    [answer] = broker.call(MetadataV3(topics=(TopicV3(name=TopicName("old-client")),))).topics
    assert answer.error_code is KafkaErrorCode.leader_not_available
    assert [t.name for t in broker.placement.created] == ["old-client"]


def test_internal_and_invalid_names_are_not_created(broker: LocalBroker) -> None:
    [internal] = broker.call(
        MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name=TopicName("__consumer_offsets")),),
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )
    ).topics
    assert internal.is_internal
    assert metadata(broker, "__consumer_offsets", "bad/name", "..", allow=True) == {
        "__consumer_offsets": KafkaErrorCode.invalid_topic_exception,
        "bad/name": KafkaErrorCode.invalid_topic_exception,
        "..": KafkaErrorCode.invalid_topic_exception,
    }
    assert broker.placement.created == []


def test_the_controllers_answer(broker: LocalBroker) -> None:
    broker.placement.create_error = 36  # TOPIC_ALREADY_EXISTS: created through another broker
    assert metadata(broker, "raced", allow=True) == {"raced": KafkaErrorCode.leader_not_available}
    broker.placement.create_error = 38  # INVALID_REPLICATION_FACTOR: no live broker
    assert metadata(broker, "nowhere", allow=True) == {
        "nowhere": KafkaErrorCode.invalid_replication_factor
    }


def test_auto_create_topics_enable_false_creates_nothing(tmp_path: Path) -> None:
    broker = LocalBroker(tmp_path, **{"auto.create.topics.enable": "false"})
    try:
        assert metadata(broker, "new", allow=True) == {
            "new": KafkaErrorCode.unknown_topic_or_partition
        }
        assert broker.placement.created == []
    finally:
        broker.close()


def test_broker_config_keys() -> None:
    assert TopicAutoCreation.from_properties({}) == TopicAutoCreation(True, 1)
    assert TopicAutoCreation.from_properties(
        {
            "auto.create.topics.enable": "false",
            "num.partitions": "4",
            "default.replication.factor": "1",
        }
    ) == TopicAutoCreation(False, 4)
    bad = {
        "auto.create.topics.enable": "yes",
        "num.partitions": "0",
        "default.replication.factor": "3",
    }
    for key, value in bad.items():
        with pytest.raises(ValueError, match=f"{key}.*valid"):
            TopicAutoCreation.from_properties({key: value})
