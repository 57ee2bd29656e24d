"""The controller's DescribeLogDirs client, at the gRPC edge: what each hosting broker reports
of its partitions (offsets, remote size, remote delete state), asked of many brokers at once
for ``tiered-topics --describe``. Protobuf stops here: callers get ``ReportedPartition``."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import grpc

from tiered.rpc.channels import ChannelCache
from tiered.rpc.v1 import broker_pb2 as pb
from tiered.rpc.v1 import broker_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

DESCRIBE_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ReportedPartition:
    """What the hosting broker reported for one partition (DescribeLogDirs)."""

    log_start_offset: int
    local_log_start_offset: int
    log_end_offset: int
    remote_size_bytes: int
    remote_segment_count: int
    remote_log_start_offset: int = -1
    remote_delete_state: str = ""


# broker -> (topic id, partition) -> what the broker reported
LogDirReports = dict[int, dict[tuple[uuid.UUID, int], ReportedPartition]]


def reported_partitions_from_proto(
    response: pb.DescribeLogDirsResponse,
) -> dict[tuple[uuid.UUID, int], ReportedPartition]:
    return {
        (uuid.UUID(bytes=d.partition.topic_id), d.partition.partition): ReportedPartition(
            d.offsets.log_start_offset,
            d.offsets.local_log_start_offset,
            d.offsets.log_end_offset,
            d.remote_size_bytes,
            d.remote_segment_count,
            d.remote_log_start_offset,
            d.remote_delete_state,
        )
        for d in response.partitions
    }


class LogDirsClient:
    """Keeps one channel per broker endpoint (``--wait`` describes every half second) and asks
    brokers in parallel. Thread-safe."""

    def __init__(
        self, parallelism: int = 8, credentials: grpc.ChannelCredentials | None = None
    ) -> None:
        self._pool = ThreadPoolExecutor(parallelism, thread_name_prefix="controller-describe")
        self._stubs = ChannelCache(pb_grpc.BrokerServiceStub, credentials=credentials)

    def describe(self, brokers: Mapping[int, str]) -> LogDirReports:
        """Each broker's report, by broker id; a broker that does not answer is left out (and
        logged): its partitions show as unavailable, they do not fail the describe."""
        futures = {b: self._pool.submit(self._describe_one, e) for b, e in brokers.items()}
        reports: LogDirReports = {}
        for broker_id, future in futures.items():
            try:
                reports[broker_id] = future.result()
            except Exception as e:
                log.info("Broker %d did not describe its log dirs: %s", broker_id, e)
        return reports

    def close(self) -> None:
        self._pool.shutdown(wait=False)
        self._stubs.close()

    def _describe_one(self, endpoint: str) -> dict[tuple[uuid.UUID, int], ReportedPartition]:
        response: pb.DescribeLogDirsResponse = self._stubs.get(endpoint).DescribeLogDirs(
            pb.DescribeLogDirsRequest(), timeout=DESCRIBE_TIMEOUT_S
        )
        return reported_partitions_from_proto(response)
