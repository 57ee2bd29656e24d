"""The ZooKeeper store's reads: ``load`` and the live brokers.

``load`` lists ``/brokers/topics``, ``/tiered/delete_jobs`` and ``/config/users`` and reads the
four znodes of every topic, the znode of every delete job, every user's config and every ACL
pattern's (``tiered.cluster.zk_acls``) in bulk (``tiered.zk_multi_read``: multiRead where the
server has it). Topics are decoded as the answers arrive, while the next requests are in flight,
and topics with the same config znode share one parsed config mapping.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from itertools import islice

from controller.store.base import MetadataStoreError
from controller.store.zookeeper.znodes import decode_delete_job, decode_topic, parse_int
from tiered.cluster import zk_paths
from tiered.cluster.model import BrokerRegistration, MetadataImage
from tiered.cluster.zk_acls import read_all_acls
from tiered.cluster.zk_scram_znodes import decode_user_config, scram_credentials_of
from tiered.cluster.zk_znodes import decode_broker_registration, decode_controller
from tiered.zk_client import TRANSPORT_ERRORS, ZkClient
from tiered.zk_multi_read import BulkReader

__all__ = ["Loader"]

log = logging.getLogger(__name__)


class Loader:
    """Reads the metadata under ``zk``'s chroot; ``check_open`` raises once the store is closed."""

    def __init__(
        self, zk: ZkClient, reader: BulkReader, check_open: Callable[[], None], name: str
    ) -> None:
        self._zk = zk
        self._reader = reader
        self._check_open = check_open
        self._name = name

    def __repr__(self) -> str:
        return self._name

    def load(self) -> MetadataImage:
        """The whole image; ``MetadataStoreError`` if ZooKeeper fails or holds bad data."""
        self._check_open()
        try:
            # Once more, one znode at a time, if the server just refused multiRead.
            return self._reader.retrying(self._load)
        except TRANSPORT_ERRORS as e:
            raise MetadataStoreError(f"ZooKeeper load: {e!r}") from e

    def _load(self) -> MetadataImage:
        zk = self._zk
        controller = zk.kazoo.get_async(zk.path(zk_paths.CONTROLLER))
        epoch = zk.kazoo.get_async(zk.path(zk_paths.CONTROLLER_EPOCH))
        names = sorted(zk.children(zk.path(zk_paths.BROKER_TOPICS)))
        job_names = sorted(zk.children(zk.path(zk_paths.DELETE_JOBS)))
        user_names = sorted(zk.children(zk.path(zk_paths.CONFIG_USERS)))
        paths: list[str] = []
        for name in names:
            paths += [
                zk.path(zk_paths.topic(name)),
                zk.path(zk_paths.tiered_epoch(name)),
                zk.path(zk_paths.tiered_state(name)),
                zk.path(zk_paths.topic_config(name)),
            ]
        paths += [zk.path(f"{zk_paths.DELETE_JOBS}/{name}") for name in job_names]
        paths += [zk.path(f"{zk_paths.CONFIG_USERS}/{name}") for name in user_names]
        image = MetadataImage()
        # Topics are decoded as their answers arrive, while later reads are still in flight.
        values = (None if found is None else found[0] for found in self._reader.iter(paths))
        for name in names:
            topic_value, epoch_value, state_value, config_value = islice(values, 4)
            if topic_value is None:
                continue  # deleted since the listing
            image.put_topic(decode_topic(name, topic_value, epoch_value, state_value, config_value))
        for job_name in job_names:
            job_value = next(values)
            if job_value is None:
                continue  # deleted since the listing
            job = decode_delete_job(job_name, job_value)
            image.delete_jobs[job.key] = job
        for user_znode, user_value in zip(user_names, values, strict=True):
            self._load_user(image, user_znode, user_value)
        image.brokers = self.live_brokers()
        try:
            image.acls = read_all_acls(zk, self._reader)
        except ValueError as e:
            raise MetadataStoreError(str(e)) from e
        found = zk.data_or_none(controller)
        if found is not None:
            try:
                image.controller_id, image.controller_endpoint = decode_controller(found)
            except ValueError as e:
                raise MetadataStoreError(str(e)) from e
        found = zk.data_or_none(epoch)
        if found is not None:
            image.controller_epoch = parse_int(zk_paths.CONTROLLER_EPOCH, found)
        return image

    def _load_user(self, image: MetadataImage, znode: str, data: bytes | None) -> None:
        """A user's SCRAM credentials into ``image``. A znode that does not parse (written by
        another tool) is logged and left out: the other users still load."""
        try:
            user = zk_paths.desanitize(znode)
            credentials = scram_credentials_of(decode_user_config(data))
        except ValueError as e:
            log.warning("%r: ignoring %s/%s: %s", self, zk_paths.CONFIG_USERS, znode, e)
            return
        for mechanism, credential in credentials.items():
            image.scram_credentials[(user, mechanism)] = credential

    def live_brokers(self) -> dict[int, BrokerRegistration]:
        """The registrations under ``/brokers/ids`` (bad ones are logged and left out); raises
        kazoo's errors."""
        zk = self._zk
        ids = sorted(int(c) for c in zk.children(zk.path(zk_paths.BROKER_IDS)) if c.isdigit())
        values = self._reader.read([zk.path(zk_paths.broker(i)) for i in ids])
        brokers: dict[int, BrokerRegistration] = {}
        for broker_id, found in zip(ids, values, strict=True):
            if found is None:
                continue  # gone since the listing
            try:
                brokers[broker_id] = decode_broker_registration(broker_id, found[0])
            except ValueError as e:
                log.warning("%r: ignoring a broker registration: %s", self, e)
        return brokers

    def check_registration(self, registration: BrokerRegistration) -> None:
        """``MetadataStoreError`` unless ``/brokers/ids/{id}`` holds this very registration (the
        same incarnation)."""
        self._check_open()
        path = self._zk.path(zk_paths.broker(registration.broker_id))
        try:
            found = self._zk.get(path)
        except TRANSPORT_ERRORS as e:
            raise MetadataStoreError(f"ZooKeeper get {path}: {e!r}") from e
        if found is None:
            raise MetadataStoreError(
                f"broker {registration.broker_id} is not registered in ZooKeeper ({path})"
            )
        try:
            present = decode_broker_registration(registration.broker_id, found[0])
        except ValueError as e:
            raise MetadataStoreError(str(e)) from e
        if present != registration:
            raise MetadataStoreError(
                f"{path} holds {present}, not {registration} (a stale or another registration)"
            )
