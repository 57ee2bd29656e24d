"""The KRaft store's fenced writes: each write of the contract is one batch of records, checked
against the image, appended (durable on return) only while this process holds the log
directory's lock, then applied to the image."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from controller.store.base import (
    FencedWrites,
    MetadataStoreError,
    PartitionGrowth,
    StoredAcl,
    TopicChange,
    check_delete_job_of,
    check_partition_growth,
    check_scram_alteration,
)
from controller.store.kraft.active_log import ActiveLog
from controller.store.kraft.snapshots import Snapshotter
from controller.store.kraft_log import MetadataLogError
from tiered.cluster import serde
from tiered.cluster.model import BrokerRegistration, DeleteJob, ScramCredentialKey, TopicMetadata
from tiered.rpc.v1 import metadata_pb2
from tiered.security.acl_serde import acl_record, remove_acl_record
from tiered.security.scram import ScramCredential

__all__ = ["FencedWriter"]


class FencedWriter(FencedWrites):
    """``FencedWrites`` into ``active``'s log, and the broker registrations of the store;
    ``snapshotter`` counts what each commit adds."""

    def __init__(self, active: ActiveLog, snapshotter: Snapshotter) -> None:
        self._active = active
        self._snapshotter = snapshotter

    def commit(self, records: Sequence[metadata_pb2.MetadataRecord]) -> None:
        """Appends one batch (durable on return), applies it to the image, wakes followers and
        starts a snapshot when one is due. Caller holds ``active.mu``."""
        active = self._active
        log = active.require_active()
        try:
            base = log.append(records)
        except (OSError, MetadataLogError) as exc:
            raise MetadataStoreError(f"metadata log append failed: {exc}") from exc
        serde.apply_batch(
            active.image, metadata_pb2.MetadataRecordBatch(base_offset=base, records=records)
        )
        active.appended.notify_all()
        self._snapshotter.committed(log, len(records))

    def create_topic(self, topic: TopicMetadata) -> None:
        with self._active.mu:
            self._active.require_active()
            image = self._active.image
            if topic.name in image.topics:
                raise MetadataStoreError(f"topic {topic.name!r} exists already")
            if image.topic_by_id(topic.topic_id) is not None:
                raise MetadataStoreError(f"topic id {topic.topic_id} is in use")
            self.commit(serde.topic_to_records(topic))

    def update_topics(self, changes: Sequence[TopicChange]) -> None:
        """One batch for all of them (one fsync): each topic's ConfigRecord, TieredStateRecord
        and, with a delete job, its DeleteJobRecord."""
        records: list[metadata_pb2.MetadataRecord] = []
        for _, after, delete_job in changes:
            records += serde.topic_update_records(after)
            if delete_job is not None:
                check_delete_job_of(after, delete_job)
                records.append(serde.delete_job_to_record(delete_job))
        if not records:
            return
        with self._active.mu:
            self._active.require_active()
            for _, after, _ in changes:
                if self._active.image.topic_by_id(after.topic_id) is None:
                    raise MetadataStoreError(f"unknown topic {after.name!r} ({after.topic_id})")
            self.commit(records)

    def add_partitions(self, growths: Sequence[PartitionGrowth]) -> None:
        """One batch of PartitionRecords for all of them."""
        records: list[metadata_pb2.MetadataRecord] = []
        for before, after in growths:
            check_partition_growth(before, after)
            records += serde.partition_records(before, after)
        if not records:
            return
        with self._active.mu:
            self._active.require_active()
            for before, _ in growths:
                if self._active.image.topic_by_id(before.topic_id) != before:
                    raise MetadataStoreError(
                        f"topic {before.name!r} ({before.topic_id}) is not as the caller saw it"
                    )
            self.commit(records)

    def put_delete_job(self, job: DeleteJob) -> None:
        """One DeleteJobRecord (whether or not the topic still exists)."""
        record = serde.delete_job_to_record(job)
        with self._active.mu:
            self._active.require_active()
            self.commit([record])

    def delete_topic(self, topic: TopicMetadata, delete_job: DeleteJob | None = None) -> None:
        """One batch: RemoveTopicRecord and, with ``delete_job``, its DeleteJobRecord."""
        records = [serde.remove_topic_record(topic.topic_id)]
        if delete_job is not None:
            check_delete_job_of(topic, delete_job)
            records.append(serde.delete_job_to_record(delete_job))
        with self._active.mu:
            self._active.require_active()
            if self._active.image.topic_by_id(topic.topic_id) is None:
                raise MetadataStoreError(f"unknown topic {topic.name!r} ({topic.topic_id})")
            self.commit(records)

    def alter_scram_credentials(
        self,
        upsertions: Mapping[ScramCredentialKey, ScramCredential],
        deletions: Collection[ScramCredentialKey],
    ) -> None:
        """One batch: a RemoveUserScramCredentialRecord per deletion of a credential that is
        there, a UserScramCredentialRecord per upsertion."""
        check_scram_alteration(upsertions, deletions)
        with self._active.mu:
            self._active.require_active()
            records = [
                serde.remove_scram_credential_record(user, mechanism)
                for user, mechanism in deletions
                if (user, mechanism) in self._active.image.scram_credentials
            ]
            records += [
                serde.scram_credential_record(user, mechanism, credential)
                for (user, mechanism), credential in upsertions.items()
            ]
            if records:
                self.commit(records)

    def create_acls(self, acls: Sequence[StoredAcl]) -> None:
        """One batch of AccessControlEntryRecords."""
        self._commit_if_any([acl_record(acl_id, binding) for acl_id, binding in acls])

    def delete_acls(self, acls: Sequence[StoredAcl]) -> None:
        """One batch of RemoveAccessControlEntryRecords."""
        self._commit_if_any([remove_acl_record(acl_id) for acl_id, _ in acls])

    def register_broker(self, registration: BrokerRegistration) -> None:
        """One RegisterBrokerRecord, replacing the broker's previous one."""
        self._commit_if_any([serde.registration_to_record(registration)])

    def _commit_if_any(self, records: Sequence[metadata_pb2.MetadataRecord]) -> None:
        if records:
            with self._active.mu:
                self._active.require_active()
                self.commit(records)
