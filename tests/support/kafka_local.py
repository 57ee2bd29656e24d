"""One broker's Kafka handler over a real ``Broker`` in the test process, built without network
listeners: requests are handed to the handler's methods directly (no socket), and the controller
is a fixed placement, so the record APIs' rules can be checked quickly and precisely."""

from __future__ import annotations

import uuid
from concurrent.futures import Future
from pathlib import Path
from typing import Any, cast

from kio.schema.index import api_key_map
from kio.schema.request_header.v2.header import RequestHeader
from kio.static.primitive import i16, i32
from kio.static.protocol import RequestPayload

from broker.admin_forwarder import ControllerAdmin
from broker.broker import Broker
from broker.config import BrokerConfig
from broker.kafka.handler import ALLOW_ALL
from broker.kafka.this_broker import ThisBroker
from broker.listener.handler import RequestContext
from tiered.api import TopicIdPartition
from tiered.net import PLAINTEXT, Listener
from tiered.rpc.v1 import broker_pb2
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.security.access import AccessControl

NODE_ID = 1
OTHER_BROKER = 2


class FixedPlacement:
    """Answers ``ControllerAdmin.call("DescribeMetadata", ...)`` from ``topics``; a CreateTopics
    (auto-creation) is recorded in ``created`` and adds the topic on another broker, or is
    answered ``create_error`` (a code) when set."""

    def __init__(self) -> None:
        self.topics: dict[str, tuple[uuid.UUID, tuple[int, ...]]] = {}
        self.created: list[pb.NewTopic] = []
        self.create_error: int | None = None

    def call(
        self, method: str, request: Any, response_type: type[Any], waits_s: float = 0.0
    ) -> Any:
        if method == "CreateTopics":
            return self._create(request)
        assert method == "DescribeMetadata", method
        names = list(self.topics) if request.all_topics else list(request.topics)
        response = pb.DescribeMetadataResponse(cluster_id="local")
        for name in names:
            placement = self.topics.get(name)
            if placement is None:
                response.topics.append(
                    pb.TopicPlacement(
                        name=name,
                        error=broker_pb2.Error(code=3, message=f"topic {name!r} does not exist"),
                    )
                )
            else:
                topic_id, replicas = placement
                response.topics.append(
                    pb.TopicPlacement(name=name, topic_id=topic_id.bytes, replicas=replicas)
                )
        return response

    def _create(self, request: pb.CreateTopicsRequest) -> pb.CreateTopicsResponse:
        response = pb.CreateTopicsResponse()
        for topic in request.topics:
            self.created.append(topic)
            code = self.create_error or 0
            if not code:
                self.topics[topic.name] = (uuid.uuid4(), (OTHER_BROKER,) * topic.partitions)
            response.results.add(name=topic.name, error=broker_pb2.Error(code=code))
        return response


class LocalBroker:
    def __init__(
        self, tmp_path: Path, access: AccessControl = ALLOW_ALL, **properties: str
    ) -> None:
        self.log_dir = tmp_path / "logs"
        config = BrokerConfig.from_properties(
            {
                "node.id": str(NODE_ID),
                "log.dirs": str(self.log_dir),
                "remote.log.storage.system.enable": "false",
                **properties,
            }
        )
        self.broker = Broker(config)
        self.placement = FixedPlacement()
        self.handler = self.broker.kafka_handler(
            ThisBroker(NODE_ID, (Listener(PLAINTEXT, "127.0.0.1", 9092),), self.log_dir),
            cast(ControllerAdmin, self.placement),
            access,
            metadata_max_age_s=0.0,
        )

    def host(self, topic: str, partitions: int = 1, **configs: str) -> uuid.UUID:
        """A topic whose partitions this broker hosts."""
        topic_id = uuid.uuid4()
        self.broker.hosting.assign(
            (TopicIdPartition(topic_id, topic, p), configs, 0) for p in range(partitions)
        )
        self.placement.topics[topic] = (topic_id, (NODE_ID,) * partitions)
        return topic_id

    def led_elsewhere(self, topic: str) -> None:
        """A topic of one partition that another broker leads."""
        self.placement.topics[topic] = (uuid.uuid4(), (OTHER_BROKER,))

    def call(self, request: RequestPayload, timeout_s: float = 10.0) -> Any:
        """The handler's answer; a delayed one (a waiting Fetch) is waited for."""
        result = self.start(request)
        return result.result(timeout_s) if isinstance(result, Future) else result

    def start(self, request: RequestPayload) -> Any:
        """The handler's immediate result: an answer, None, or a Future."""
        header = RequestHeader(
            request_api_key=i16(request.__api_key__),
            request_api_version=i16(request.__version__),
            correlation_id=i32(1),
            client_id="local-test",
        )
        method = getattr(self.handler, api_key_map[request.__api_key__])
        return method(request, RequestContext(header, "127.0.0.1:1"))

    def close(self) -> None:
        self.handler.close()
        self.broker.close()
