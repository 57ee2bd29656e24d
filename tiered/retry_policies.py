"""The product's named retry schedules and policies (``tiered.retry``), each with who uses it and
why its values; product modules import them from here, tests inject faster ones.

An ``ExponentialBackoff`` here paces a loop that owns its waiting (through ``Backoff``); a
``RetryPolicy`` runs the retries of one operation. Most loops retry for as long as their process
runs, so their schedules are capped well below the timeouts that would notice the silence (a
ZooKeeper session, a broker's heartbeats), and jittered where a whole cluster retries at once
after the same outage.
"""

from __future__ import annotations

from tiered.retry import ExponentialBackoff, RetryPolicy

__all__ = [
    "ASSIGNMENT_PERSIST_BACKOFF",
    "BROKER_REQUEST_BACKOFF",
    "BROKER_REREGISTRATION_BACKOFF",
    "BULK_DELETE_RETRY",
    "CONTROLLER_CAMPAIGN_BACKOFF",
    "CONTROLLER_FORWARD_RETRY",
    "CONTROLLER_LINK_BACKOFF",
    "DELETE_JOB_BACKOFF",
    "DELETE_JOB_HOLD_BACKOFF",
    "KAFKA_ACCEPT_BACKOFF",
    "LIVE_BROKERS_READ_BACKOFF",
    "PARTITION_CLIENT_MAX_ATTEMPTS",
    "PARTITION_CLIENT_RETRY",
    "RLMM_CONFLICT_RETRY",
    "SPARK_SESSION_BACKOFF",
    "ZOOKEEPER_ELECTION_BACKOFF",
    "ZOOKEEPER_RLMM_READ_RETRY",
    "kafka_client_retry",
    "remote_storage_retry",
    "zookeeper_connection_retry",
]

# ------------------------------------------------------------------------------- controller

CONTROLLER_CAMPAIGN_BACKOFF = ExponentialBackoff(initial_s=0.1, max_s=5.0, jitter=0.5)
"""``controller.leadership`` between failed campaigns (the store unreachable, or an activation
that failed, e.g. loading the image): jittered so that a cluster's controllers do not retry in
step."""

ZOOKEEPER_ELECTION_BACKOFF = ExponentialBackoff(initial_s=0.05, max_s=1.0, jitter=0.5)
"""The ZooKeeper store's election between attempts that did not reach ZooKeeper: first as short
as the election's poll of its stop event, at most a second, jittered so that the controllers of a
cluster that lost ZooKeeper do not all come back at once."""

LIVE_BROKERS_READ_BACKOFF = ExponentialBackoff(initial_s=0.05, max_s=2.0, jitter=0.5)
"""The ZooKeeper store's live-brokers watch between failed reads of the registrations: every
controller of the cluster retries, so jittered; capped well below a session timeout."""

BROKER_REQUEST_BACKOFF = ExponentialBackoff(initial_s=0.1, max_s=10.0, jitter=0.2)
"""Each controller-to-broker channel between failed rounds while its broker is unreachable, as
``controller.retry.backoff.ms`` and ``controller.retry.backoff.max.ms`` default to: a broker that
stays down is asked at most every ten seconds, and one that re-registers starts over."""

DELETE_JOB_BACKOFF = ExponentialBackoff(initial_s=1.0, max_s=60.0, jitter=0.2)
"""The delete-job runner between failed attempts of one job: an attempt lists and deletes whole
partitions, so a failing store is retried within seconds, and at most once a minute."""

DELETE_JOB_HOLD_BACKOFF = ExponentialBackoff(initial_s=0.1, max_s=2.0, jitter=0.2)
"""The delete-job runner between checks of a held job (its brokers not let go of the topic yet):
a check costs no attempt and no storage call, so it is made often, at most two seconds apart."""

SPARK_SESSION_BACKOFF = ExponentialBackoff(initial_s=1.0, max_s=60.0, jitter=0.2)
"""The SparkSession provider between starts after a failed start or a lost session: a start
against an unreachable standalone master takes about a minute to fail by itself (Spark's three
registration attempts), so waiting much longer than that gains nothing."""

BULK_DELETE_RETRY = RetryPolicy(
    max_tries=4, deadline_s=None, delay_s=0.5, max_delay_s=30.0, jitter=0.2
)
"""A Spark bulk delete's attempts: the first and three retries of the keys that failed, jittered
so that many executors' failed keys do not hit a throttling store again in step; no deadline, as
one attempt of a large job may take longer than any sensible one."""

# ------------------------------------------------------------------------------- broker

CONTROLLER_LINK_BACKOFF = ExponentialBackoff(initial_s=0.1, max_s=2.0, jitter=0.2)
"""A KRaft-mode broker between failed registrations and after a metadata fetch ends: capped at
the default heartbeat interval, so that a controller that is back hears from the broker soon."""

BROKER_REREGISTRATION_BACKOFF = ExponentialBackoff(initial_s=0.05, max_s=2.0, jitter=0.5)
"""A ZooKeeper-mode broker between failed re-registrations: every broker re-registers after a
ZooKeeper outage, so jittered; capped well below a session timeout."""

ASSIGNMENT_PERSIST_BACKOFF = ExponentialBackoff(initial_s=0.1, max_s=5.0, jitter=0.2)
"""The broker's assignment persister between failed background persists (a full or failing
disk): soon at first, then no busier than the log's own retries."""

KAFKA_ACCEPT_BACKOFF = ExponentialBackoff(initial_s=0.01, max_s=1.0, jitter=0.2)
"""The Kafka listener between failed accepts (out of file descriptors and the like): quick, as
one closed connection is enough to accept again, and less often the longer it lasts."""

CONTROLLER_FORWARD_RETRY = RetryPolicy(deadline_s=10.0, max_delay_s=0.5)
"""A broker's own admin requests (its Kafka listener's admin APIs) while no controller is known
or reachable: ten seconds, at most half a second apart, let an election finish meanwhile."""

# ------------------------------------------------------------------------------- metadata and storage

RLMM_CONFLICT_RETRY = RetryPolicy(
    max_tries=8, deadline_s=10.0, delay_s=0.005, max_delay_s=0.25, jitter=1.0
)
"""The RLMM re-reading and re-applying after losing a race: bounded tries and a deadline, full
jitter so that many brokers racing on one partition record do not retry in step."""

ZOOKEEPER_RLMM_READ_RETRY = RetryPolicy(
    max_tries=5, deadline_s=None, delay_s=0.05, max_delay_s=1.0, jitter=0.4
)
"""The RLMM's ZooKeeper backend re-sending a read that lost its connection: a few quick tries,
as kazoo's own recipes do, then the last error, which the caller wraps."""


def zookeeper_connection_retry(session_timeout_s: float) -> RetryPolicy:
    """Every ZooKeeper client's reconnection: forever and quickly, as kazoo's default backoff
    grows to an hour, far longer than any session, and a client would miss the window in which
    its session can still be resumed; each wait stays under a third of the session timeout, so
    that several attempts fit in it."""
    initial_s = 0.05
    return RetryPolicy(
        max_tries=None,
        deadline_s=None,
        delay_s=initial_s,
        backoff=2.0,
        max_delay_s=max(initial_s, min(1.0, session_timeout_s / 3)),
        jitter=0.4,
    )


def remote_storage_retry(max_attempts: int, backoff_ms: int, backoff_max_ms: int) -> RetryPolicy:
    """The remote storage plugin's calls (S3 and the other object stores), from its
    ``remote.storage.retry.*`` configs: bounded by attempts, as those configs count them, not by
    a deadline; half-range jitter so that a broker's partitions do not retry a throttling store
    in step."""
    return RetryPolicy(
        max_tries=max_attempts,
        deadline_s=None,
        delay_s=backoff_ms / 1000,
        max_delay_s=backoff_max_ms / 1000,
        jitter=0.5,
    )


# ------------------------------------------------------------------------------- clients

PARTITION_CLIENT_MAX_ATTEMPTS = 6
"""The console producer's and consumer's tries of one partition request, the first included: the
producer's ``--retries`` default is one less, as Kafka's counts only the retries."""

PARTITION_CLIENT_RETRY = RetryPolicy(
    max_tries=PARTITION_CLIENT_MAX_ATTEMPTS,
    deadline_s=None,
    delay_s=0.1,
    max_delay_s=2.0,
    jitter=0.2,
)
"""The console producer's and consumer's partition requests after a leader moved or a broker went
away: bounded by attempts, not a deadline, because the producer's ``--retries`` counts them."""


def kafka_client_retry(timeout_s: float) -> RetryPolicy:
    """The Kafka protocol client's calls answered by a moved leader or coordinator: retried
    within the client's own ``timeout_s``, at most a second apart."""
    return RetryPolicy(deadline_s=timeout_s, max_delay_s=1.0)
