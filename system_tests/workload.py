"""The clients of a randomized run, one operation at a time, each recorded in the run's history
(``system_tests.history``): records produced with an idempotent confluent-kafka producer
(acks=all), a consumer group's offsets committed, topics disabled (under ``retain`` or
``delete``) and re-enabled, deleted and created again. An answer that proves nothing (a timeout,
a lost connection) is ``info``; only a refusal is ``fail``."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import grpc
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from system_tests.harness import SystemCluster
from system_tests.history import History, Operation
from tests.support.kafka_cluster import QUIET
from tests.support.polling import poll_until
from tiered.errors import ErrorCode, TieredError

__all__ = ["GROUP", "TOPIC_CONFIGS", "Workload"]

GROUP = "randomized-run"
PARTITIONS = 2
# Infinite retention: only a finished delete-policy job or a topic delete removes records.
TOPIC_CONFIGS = {"remote.storage.enable": "true", "segment.bytes": "2000", "retention.ms": "-1"}
RECORDS_PER_PRODUCE = 8
# Enough produce calls (each a batch or more) to roll a segment of TOPIC_CONFIGS' segment.bytes,
# and the wait for its copy.
PRODUCES_TO_TIER = 12
TIERING_TIMEOUT_S = 60.0
# What a client waits before it calls an answer unknown: a paused leader never answers.
CLIENT_TIMEOUT_S = 4.0
FIRST_COMMIT_TIMEOUT_S = 60.0
# Refusals that say nothing about whether the operation happened.
UNKNOWN_OUTCOME = frozenset(
    {
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.NOT_CONTROLLER,
        ErrorCode.UNKNOWN_SERVER_ERROR,
    }
)


class Workload:
    def __init__(
        self, cluster: SystemCluster, history: History, rng: random.Random, topics: list[str]
    ) -> None:
        self._cluster = cluster
        self._history = history
        self._rng = rng
        self.topic_ids: dict[str, str | None] = dict.fromkeys(topics)  # None: none known
        self._committed_next: dict[tuple[str, int], int] = {}
        self._sequence = 0
        self._producer: Producer | None = None
        self._consumer: Consumer | None = None
        self._commits_pending: dict[tuple[str, int, int], Operation] = {}
        self._disabled: set[str] = set()  # topics whose last acknowledged change was a disable

    def prepare(self) -> None:
        """Before any fault: creates every topic and fills each partition until it has tiered
        a segment (so that the first disables have remote data to keep or delete), and commits
        once (the first commit waits for the group's coordinator to come up,
        ``__consumer_offsets`` created, which a client's timeout would not cover)."""
        names = sorted(self.topic_ids)
        for name in names:
            self.create(name)
            for partition in range(PARTITIONS):
                for _ in range(PRODUCES_TO_TIER):
                    self.produce(name, partition)
        self.commit(names[0], timeout_s=FIRST_COMMIT_TIMEOUT_S)

        def tiered() -> bool:
            topics = self._cluster.admin.describe_topics(names)
            return all(p.remote_segment_count >= 1 for t in topics for p in t.partitions)

        poll_until(tiered, timeout=TIERING_TIMEOUT_S, what=f"{names} to tier a segment each")

    def step(self) -> None:
        """One random client operation on a random topic (a create if the topic is gone)."""
        name = self._rng.choice(sorted(self.topic_ids))
        if self.topic_ids[name] is None:
            self.create(name)
            return
        action = self._rng.choices(
            [self.produce, self.commit, self.toggle, self.delete], weights=[8, 2, 4, 1]
        )[0]
        action(name)

    # ----------------------------------------------------------------------------- records

    def produce(
        self, name: str, partition: int | None = None, count: int = RECORDS_PER_PRODUCE
    ) -> None:
        """``count`` records into ``partition`` (a random one if None), one operation each."""
        topic_id = self.topic_ids[name]
        if partition is None:
            partition = self._rng.randrange(PARTITIONS)
        producer = self._producer or self._new_producer()
        pending: list[Operation] = []
        for _ in range(count):
            self._sequence += 1
            value = f"{name}/{partition}/{self._sequence:08d}"
            operation = self._history.invoke(
                "client", "produce", topic=name, topic_id=topic_id, partition=partition,
                value=value,
            )  # fmt: skip
            pending.append(operation)

            def delivered(error: Any, message: Any, operation: Operation = operation) -> None:
                if operation.completion is not None:
                    return  # already called unknown: the history keeps the first answer
                if error is None:
                    operation.ok(offset=message.offset())
                else:
                    operation.info(error)

            try:
                producer.produce(name, value=value.encode(), partition=partition,
                                 on_delivery=delivered)  # fmt: skip
            except (KafkaException, BufferError) as e:
                operation.info(e)
        producer.flush(CLIENT_TIMEOUT_S + 2)
        stuck = [o for o in pending if o.completion is None]
        failed = any(o.completion is not None and o.completion.type != "ok" for o in pending)
        for operation in stuck:
            operation.info("no answer before the client's timeout")
        if stuck or failed:
            self._drop_producer()  # a fresh one, since this one's sequence may be broken

    def _new_producer(self) -> Producer:
        self._producer = Producer(
            {
                "bootstrap.servers": self._cluster.kafka_bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "message.timeout.ms": int(CLIENT_TIMEOUT_S * 1000),
                "linger.ms": 0,
                **QUIET,
            }
        )
        return self._producer

    def _drop_producer(self) -> None:
        if self._producer is not None:
            self._producer.purge()
            self._producer.flush(0)
            self._producer = None

    # ----------------------------------------------------------------------------- offsets

    def commit(self, name: str, timeout_s: float = CLIENT_TIMEOUT_S) -> None:
        partition = self._rng.randrange(PARTITIONS)
        offset = self._committed_next.get((name, partition), 0) + self._rng.randrange(1, 10)
        self._committed_next[(name, partition)] = offset
        operation = self._history.invoke(
            "client", "commit", group=GROUP, topic=name, topic_id=self.topic_ids[name],
            partition=partition, offset=offset,
        )  # fmt: skip
        self._commits_pending[(name, partition, offset)] = operation
        consumer = self._consumer or self._new_consumer()
        try:
            # Asynchronous: a synchronous commit waits for a coordinator without a bound.
            consumer.commit(offsets=[TopicPartition(name, partition, offset)], asynchronous=True)
        except KafkaException as e:
            operation.info(e)
            return
        deadline = time.monotonic() + timeout_s
        while operation.completion is None and time.monotonic() < deadline:
            consumer.poll(0.1)
        if operation.completion is None:
            operation.info("no answer before the client's timeout")

    def _new_consumer(self) -> Consumer:
        """The group's one consumer, kept for the whole run: closing one waits for its
        coordinator, which may be the broker a fault took away."""
        self._consumer = Consumer(
            {
                "bootstrap.servers": self._cluster.kafka_bootstrap,
                "group.id": GROUP,
                "enable.auto.commit": False,
                "on_commit": self._committed,
                **QUIET,
            }
        )
        return self._consumer

    def _committed(self, error: Any, partitions: list[TopicPartition]) -> None:
        """The answer to a commit: completes the operations it names still waiting (one called
        unknown already keeps that)."""
        for tp in partitions:
            operation = self._commits_pending.pop((tp.topic, tp.partition, tp.offset), None)
            if operation is None or operation.completion is not None:
                continue
            failure = error or tp.error
            if failure is None:
                operation.ok()
            else:
                operation.info(failure)

    # ----------------------------------------------------------------------------- topics

    def toggle(self, name: str) -> None:
        """Disables a topic last seen enabled, enables one last seen disabled: a change, not a
        repeat (which the controller answers without doing anything)."""
        if name in self._disabled:
            self.enable(name)
        else:
            self.disable(name)

    def disable(self, name: str) -> None:
        policy = self._rng.choice(["retain", "delete"])
        self._alter(name, "disable", {"remote.storage.enable": "false",
                                      "remote.log.disable.policy": policy}, policy=policy)  # fmt: skip

    def enable(self, name: str) -> None:
        self._alter(name, "enable", {"remote.storage.enable": "true"})

    def _alter(self, name: str, op: str, configs: dict[str, str], **args: str) -> None:
        operation = self._history.invoke(
            "client", op, topic=name, topic_id=self.topic_ids[name], **args
        )

        def call() -> None:
            self._cluster.admin.incremental_alter_configs(name, configs)

        outcome = self._admin_call(operation, call)
        if outcome == "ok":
            (self._disabled.add if op == "disable" else self._disabled.discard)(name)

    def delete(self, name: str) -> None:
        operation = self._history.invoke(
            "client", "delete", topic=name, topic_id=self.topic_ids[name]
        )

        def call() -> None:
            self._cluster.admin.delete_topic(name)

        if self._admin_call(operation, call) != "fail":
            self.topic_ids[name] = None  # found again (or created) by the next create
            self._drop_producer()

    def create(self, name: str) -> None:
        operation = self._history.invoke("client", "create", topic=name, partitions=PARTITIONS)

        def call() -> dict[str, Any]:
            topic_id = self._cluster.admin.create_topic(
                name, PARTITIONS, TOPIC_CONFIGS, wait_hosted=True
            )
            return {"topic_id": str(topic_id)}

        self._disabled.discard(name)
        outcome = self._admin_call(operation, call)
        if outcome == "ok":
            assert operation.completion is not None
            self.topic_ids[name] = operation.completion.result["topic_id"]
        else:
            self.topic_ids[name] = self._existing_id(name)

    def _existing_id(self, name: str) -> str | None:
        """The id of the topic named so, if there is one now (after an unknown create or a
        refused one: it may exist)."""
        try:
            return str(self._cluster.admin.describe_topic(name, False).topic_id)
        except (TieredError, grpc.RpcError):
            return None

    def _admin_call(self, operation: Operation, call: Callable[[], dict[str, Any] | None]) -> str:
        """Runs ``call`` and completes ``operation`` by its outcome (``ok`` with what ``call``
        returned), which it returns."""
        try:
            result = call()
        except TieredError as e:
            if e.code in UNKNOWN_OUTCOME:
                operation.info(e)
                return "info"
            operation.fail(e)
            return "fail"
        except grpc.RpcError as e:
            operation.info(e)
            return "info"
        operation.ok(**(result or {}))
        return "ok"

    def close(self) -> None:
        """After the last heal: every coordinator is back, so closing does not wait long."""
        if self._producer is not None:
            self._producer.flush(CLIENT_TIMEOUT_S)
            self._drop_producer()
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
