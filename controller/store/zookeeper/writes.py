"""The ZooKeeper store's fenced writes.

Every write is one ZooKeeper multi that starts with ``check(/controller_epoch, version our
election wrote)`` and ``check(/controller, version of ours)``, so a deposed controller (another
has since raised the epoch, or our ephemeral went with our session) writes nothing and gets
``ControllerFencedError``. A write after our session has ended is refused without being sent.

Delete jobs live at ``/tiered/delete_jobs/{topic_id}-{tiered_epoch}``, apart from the topic's
znodes because they outlive the topic. A job is written create-or-set: the writer looks whether
the znode exists, then creates or sets it in the fenced multi (only the active controller writes,
so nothing races the look; if something did, the multi would fail whole).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence

from kazoo.exceptions import BadVersionError, NoNodeError

from controller.store.base import (
    ControllerFencedError,
    FencedWrites,
    MetadataStoreError,
    PartialWriteError,
    PartitionGrowth,
    StoredAcl,
    TopicChange,
    check_delete_job_of,
    check_partition_growth,
    check_scram_alteration,
)
from controller.store.zookeeper.acls import acl_change_ops, purge_notifications
from controller.store.zookeeper.leadership import Leadership
from controller.store.zookeeper.znodes import (
    ZnodeOp,
    encode_delete_job,
    topic_assignment_op,
    topic_create_ops,
    topic_delete_ops,
    topic_update_ops,
)
from tiered.cluster import zk_paths
from tiered.cluster.model import DeleteJob, ScramCredentialKey, TopicMetadata
from tiered.cluster.zk_scram_znodes import (
    decode_user_config,
    encode_user_config,
    with_scram_changes,
)
from tiered.security.scram import ScramCredential, ScramMechanism
from tiered.zk_client import TRANSPORT_ERRORS, ZkClient, first_failure

__all__ = ["UPDATE_TOPICS_PER_MULTI", "FencedWriter"]

UPDATE_TOPICS_PER_MULTI = 200  # update_topics: 600+ ops, ~100 KB a multi
_FENCE_OPS = 2  # every fenced multi starts with two checks


class FencedWriter(FencedWrites):
    """``FencedWrites``, each committed only while ``leadership`` holds."""

    def __init__(
        self, zk: ZkClient, leadership: Leadership, check_open: Callable[[], None]
    ) -> None:
        self._zk = zk
        self._leadership = leadership
        self._check_open = check_open

    def create_topic(self, topic: TopicMetadata) -> None:
        self._fenced_multi(f"create topic {topic.name}", topic_create_ops(topic))

    def update_topics(self, changes: Sequence[TopicChange]) -> None:
        """One multi per ``UPDATE_TOPICS_PER_MULTI`` topics, in order (a multi of 10k topics
        would pass ZooKeeper's 1 MB request limit), setting each topic's config, tiered state
        and tiered epoch znodes and, with a delete job, creating or setting the job's znode; a
        failure after the first multi raises ``PartialWriteError`` with what the earlier ones
        committed."""
        for before, after, delete_job in changes:
            _check_change(before, after, delete_job)
        for start in range(0, len(changes), UPDATE_TOPICS_PER_MULTI):
            group = changes[start : start + UPDATE_TOPICS_PER_MULTI]
            what = (
                f"update topic {group[0][1].name}"
                if len(group) == 1
                else f"update {len(group)} topics ({group[0][1].name}..{group[-1][1].name})"
            )
            ops: list[ZnodeOp] = []
            for _, after, delete_job in group:
                ops += topic_update_ops(after)
                if delete_job is not None:
                    ops.append(self._delete_job_op(what, delete_job))
            try:
                self._fenced_multi(what, ops)
            except MetadataStoreError as e:
                if start == 0:
                    raise
                raise PartialWriteError(f"{what}: {e}", committed=start) from e

    def add_partitions(self, growths: Sequence[PartitionGrowth]) -> None:
        """One multi setting each topic's assignment znode (``/brokers/topics/{topic}``)."""
        for before, after in growths:
            check_partition_growth(before, after)
        if growths:
            names = ", ".join(after.name for _, after in growths)
            ops = [topic_assignment_op(after) for _, after in growths]
            self._fenced_multi(f"add partitions to {names}", ops)

    def put_delete_job(self, job: DeleteJob) -> None:
        """One multi creating or setting ``/tiered/delete_jobs/{topic_id}-{tiered_epoch}``."""
        what = f"put delete job {job.topic_id}-{job.tiered_epoch} ({job.topic})"
        self._fenced_multi(what, [self._delete_job_op(what, job)])

    def delete_topic(self, topic: TopicMetadata, delete_job: DeleteJob | None = None) -> None:
        """One multi: the deletes of the topic's znodes and, with ``delete_job``, the creation of
        the job's znode."""
        what = f"delete topic {topic.name}"
        ops = topic_delete_ops(topic.name)
        if delete_job is not None:
            check_delete_job_of(topic, delete_job)
            ops.append(self._delete_job_op(what, delete_job))
        self._fenced_multi(what, ops)

    def alter_scram_credentials(
        self,
        upsertions: Mapping[ScramCredentialKey, ScramCredential],
        deletions: Collection[ScramCredentialKey],
    ) -> None:
        """One multi setting (or creating) the config znode of each user named."""
        check_scram_alteration(upsertions, deletions)
        changes: dict[str, tuple[dict[ScramMechanism, ScramCredential], set[ScramMechanism]]] = {}
        for (user, mechanism), credential in upsertions.items():
            changes.setdefault(user, ({}, set()))[0][mechanism] = credential
        for user, mechanism in deletions:
            changes.setdefault(user, ({}, set()))[1].add(mechanism)
        what = f"alter the SCRAM credentials of {len(changes)} users"
        ops = [
            op
            for user, (upserted, deleted) in sorted(changes.items())
            if (op := self._user_config_op(what, user, upserted, deleted)) is not None
        ]
        if ops:
            self._fenced_multi(what, ops)

    def _user_config_op(
        self,
        what: str,
        user: str,
        upsertions: Mapping[ScramMechanism, ScramCredential],
        deletions: Collection[ScramMechanism],
    ) -> ZnodeOp | None:
        """Create or set ``/config/users/{user}`` with the user's other keys kept; None when
        nothing changes (removing what is not there)."""
        self._check_open()
        self._leadership.require(what)
        path = zk_paths.user_config(user)
        try:
            found = self._zk.get(self._zk.path(path))
        except TRANSPORT_ERRORS as e:
            raise MetadataStoreError(f"{what}: ZooKeeper get {path}: {e!r}") from e
        try:
            config = decode_user_config(None if found is None else found[0])
        except ValueError as e:
            raise MetadataStoreError(f"{what}: {path}: {e}") from e
        changed = with_scram_changes(config, upsertions, deletions)
        if found is not None and changed == config:
            return None
        if found is None and not upsertions:
            return None
        return ("create" if found is None else "set", path, encode_user_config(changed))

    def create_acls(self, acls: Sequence[StoredAcl]) -> None:
        self._change_acls(acls, ())

    def delete_acls(self, acls: Sequence[StoredAcl]) -> None:
        self._change_acls((), acls)

    def _change_acls(self, created: Sequence[StoredAcl], deleted: Sequence[StoredAcl]) -> None:
        """One multi rewriting every pattern's znode the change touches, with their change
        notifications; then old notifications are purged."""
        what = f"change ACLs (+{len(created)} -{len(deleted)})"
        self._check_open()
        self._leadership.require(what)
        try:
            ops = acl_change_ops(self._zk, created, deleted)
        except TRANSPORT_ERRORS as e:
            raise MetadataStoreError(f"{what}: ZooKeeper read: {e!r}") from e
        except ValueError as e:
            raise MetadataStoreError(f"{what}: {e}") from e
        if ops:
            self._fenced_multi(what, ops)
            purge_notifications(self._zk)

    def _delete_job_op(self, what: str, job: DeleteJob) -> ZnodeOp:
        """Create if the job's znode is absent, else set. Refused, without a read, when this
        process is not the active controller (the multi would be refused anyway)."""
        self._check_open()
        self._leadership.require(what)
        path = zk_paths.delete_job(job.topic_id, job.tiered_epoch)
        try:
            stat = self._zk.exists(self._zk.path(path))
        except TRANSPORT_ERRORS as e:
            raise MetadataStoreError(f"{what}: ZooKeeper exists {path}: {e!r}") from e
        return ("create" if stat is None else "set", path, encode_delete_job(job))

    def _fenced_multi(self, what: str, ops: Sequence[ZnodeOp]) -> None:
        """Commits ``ops`` (kind, path in the layout, data) in one multi behind the fence checks."""
        self._check_open()
        leader = self._leadership.require(what)
        zk = self._zk
        txn = zk.kazoo.transaction()
        txn.check(zk.path(zk_paths.CONTROLLER_EPOCH), leader.epoch_version)
        txn.check(zk.path(zk_paths.CONTROLLER), leader.controller_version)
        paths = [zk_paths.CONTROLLER_EPOCH, zk_paths.CONTROLLER]
        for kind, path, data in ops:
            if kind == "create":
                txn.create(zk.path(path), data)
            elif kind == "create_sequential":
                txn.create(zk.path(path), data, sequence=True)
            elif kind == "set":
                txn.set_data(zk.path(path), data)
            else:
                txn.delete(zk.path(path))
            paths.append(path)
        try:
            results = zk.wait(txn.commit_async())
        except TRANSPORT_ERRORS as e:
            raise MetadataStoreError(
                f"{what}: no answer from ZooKeeper, outcome unknown: {e!r}"
            ) from e
        failure = first_failure(results)
        if failure is None:
            return
        index, error = failure
        if index < _FENCE_OPS and isinstance(error, BadVersionError | NoNodeError):
            self._leadership.lost.set()
            raise ControllerFencedError(
                f"{what}: controller {leader.controller_id} of epoch {leader.epoch} is fenced "
                f"({paths[index]}: {type(error).__name__}); nothing was written"
            )
        raise MetadataStoreError(
            f"{what}: {paths[index]}: {type(error).__name__}; nothing was written"
        )


def _check_change(
    before: TopicMetadata, after: TopicMetadata, delete_job: DeleteJob | None
) -> None:
    if before.name != after.name or before.topic_id != after.topic_id:
        raise ValueError(
            f"update_topic: {before.name} ({before.topic_id}) and {after.name} "
            f"({after.topic_id}) are not the same topic"
        )
    if before.replicas != after.replicas:
        raise ValueError(f"update_topic: the assignment of {after.name} cannot change")
    if delete_job is not None:
        check_delete_job_of(after, delete_job)
