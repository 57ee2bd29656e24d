"""Topic auto-creation, as Kafka's Metadata does it (``KafkaApis.handleTopicMetadataRequest`` and
``AutoTopicCreationManager``): a Metadata request that allows it (always in v0 to v3, the flag
``allow_auto_topic_creation`` from v4) naming a topic that does not exist creates it, when the
broker's ``auto.create.topics.enable`` is true, with ``num.partitions`` partitions and no
configs of its own. The requester needs Create on the cluster or on the topic (else
TOPIC_AUTHORIZATION_FAILED); internal names (``__consumer_offsets``...) and invalid ones are
INVALID_TOPIC_EXCEPTION. The topic is created through the active controller, which judges the
client again, as for CreateTopics; it is answered LEADER_NOT_AVAILABLE in that response (created,
not served yet: the client asks again), as Kafka's ZooKeeper-mode brokers answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from broker.admin_forwarder import ControllerAdmin
from broker.cluster_view import ClusterView
from broker.config import TopicAutoCreation
from broker.kafka.topics_api import forward_create_topics
from tiered.config import INTERNAL_TOPICS
from tiered.errors import ErrorCode, TieredError
from tiered.rpc.v1 import controller_pb2 as pb
from tiered.security.access import AccessControl
from tiered.security.acl import AclOperation, ResourceType
from tiered.security.forwarding import forwarding_for
from tiered.security.principal import RequestContext

__all__ = ["TopicAutoCreator"]


class TopicAutoCreator:
    def __init__(
        self,
        controller: ControllerAdmin,
        view: ClusterView,
        access: AccessControl,
        settings: TopicAutoCreation,
    ) -> None:
        self._controller = controller
        self._view = view
        self._access = access
        self._settings = settings

    def allowed(self, request_allows: bool) -> bool:
        """Whether a Metadata request (``request_allows``: its flag, true before v4) may create
        the missing topics it names."""
        return request_allows and self._settings.enabled

    def create(self, names: Sequence[str], requester: RequestContext) -> dict[str, TieredError]:
        """Creates the missing topics ``names`` (valid names, Describe already allowed) for
        ``requester``; each name's answer in the Metadata response."""
        answers: dict[str, TieredError] = {}
        creatable: list[str] = []
        may_create_any = self._access.allowed(requester, AclOperation.CREATE, ResourceType.CLUSTER)
        for name in names:
            if name in INTERNAL_TOPICS:
                answers[name] = TieredError(
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    f"topic {name!r} is internal: it is not created on demand",
                )
                continue
            denied = (
                None
                if may_create_any
                else self._access.denial(requester, AclOperation.CREATE, ResourceType.TOPIC, name)
            )
            if denied is not None:
                answers[name] = denied
                continue
            creatable.append(name)
        if not creatable:
            return answers
        topics = [pb.NewTopic(name=n, partitions=self._settings.partitions) for n in creatable]
        with forwarding_for(requester):
            results = forward_create_topics(self._controller, topics)
        self._view.invalidate()
        for name, ((code, message), _) in zip(creatable, results, strict=True):
            if code in (0, ErrorCode.TOPIC_ALREADY_EXISTS):  # created, here or elsewhere
                answers[name] = TieredError(
                    ErrorCode.LEADER_NOT_AVAILABLE,
                    f"topic {name!r} was created; its partitions are not served yet",
                )
            else:
                answers[name] = _error_of(int(code), message)
        return answers


def _error_of(code: int, message: str | None) -> TieredError:
    """The controller's refusal as a domain error (a Kafka code this side does not name is
    UNKNOWN_SERVER_ERROR, its number in the message)."""
    try:
        return TieredError(ErrorCode(code), message or "")
    except ValueError:
        return TieredError(ErrorCode.UNKNOWN_SERVER_ERROR, f"Kafka error {code}: {message}")
