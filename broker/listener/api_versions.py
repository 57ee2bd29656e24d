"""Which Kafka APIs and versions a listener supports, and the ApiVersions answer built from it.

Every advertised version must exist in kio (the request is decoded by kio's generated class),
so the registry checks that at construction. The default set covers what the broker serves for
issue 14; versions that switch topics to topic ids (Produce 13, Fetch 13+) are left out because
the cluster addresses topics by name.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType

from kio.index import KioIndexError, load_request_schema, load_response_schema
from kio.schema.api_versions.v0 import response as api_versions_v0
from kio.schema.api_versions.v1 import response as api_versions_v1
from kio.schema.api_versions.v2 import response as api_versions_v2
from kio.schema.api_versions.v3 import response as api_versions_v3
from kio.schema.api_versions.v4 import response as api_versions_v4
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map
from kio.serial import entity_reader
from kio.serial.readers import Reader
from kio.static.primitive import i16, i32Timedelta
from kio.static.protocol import RequestPayload, ResponsePayload

__all__ = [
    "API_VERSIONS_KEY",
    "DEFAULT_API_VERSIONS",
    "ApiSchema",
    "ApiVersionRegistry",
    "UnsupportedApiError",
]

API_VERSIONS_KEY = 18
PRODUCE_KEY = 0

# api key -> (min version, max version), inclusive.
DEFAULT_API_VERSIONS: Mapping[int, tuple[int, int]] = {
    0: (3, 11),  # Produce
    1: (4, 12),  # Fetch
    2: (1, 8),  # ListOffsets (v8 adds earliest-local -4; v9's latest-tiered -5 is not served)
    3: (0, 12),  # Metadata
    8: (2, 9),  # OffsetCommit (v10 names topics by id)
    9: (1, 9),  # OffsetFetch (v10 names topics by id)
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 5),  # ListGroups
    18: (0, 4),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics
    21: (0, 2),  # DeleteRecords
    22: (0, 5),  # InitProducerId
    29: (1, 3),  # DescribeAcls
    30: (1, 3),  # CreateAcls
    31: (1, 3),  # DeleteAcls
    32: (1, 4),  # DescribeConfigs
    33: (0, 2),  # AlterConfigs
    # SaslHandshake from v0, as Kafka advertises it (older librdkafka, as in kcat, needs v0); v0's raw
    # tokens without SaslAuthenticate are not served.
    17: (0, 1),
    35: (1, 4),  # DescribeLogDirs
    36: (0, 2),  # SaslAuthenticate
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    44: (0, 1),  # IncrementalAlterConfigs
    47: (0, 0),  # OffsetDelete
    50: (0, 0),  # DescribeUserScramCredentials
    51: (0, 0),  # AlterUserScramCredentials
    60: (0, 1),  # DescribeCluster
}

_API_VERSIONS_MODULES: Mapping[int, ModuleType] = {
    0: api_versions_v0,
    1: api_versions_v1,
    2: api_versions_v2,
    3: api_versions_v3,
    4: api_versions_v4,
}
_NO_THROTTLE = i32Timedelta.parse(datetime.timedelta(0))


class UnsupportedApiError(LookupError):
    """The (api key, version) pair is not served by this listener."""


@dataclass(frozen=True, slots=True)
class ApiSchema:
    """kio's generated classes for one (api key, version), with a cached body reader."""

    api_key: int
    version: int
    name: str
    request_type: type[RequestPayload]
    response_type: type[ResponsePayload]
    read_request: Reader[RequestPayload]


class ApiVersionRegistry:
    """The (api key -> version range) table a listener advertises and decodes."""

    def __init__(self, versions: Mapping[int, tuple[int, int]] = DEFAULT_API_VERSIONS) -> None:
        """Raises ValueError for an empty or inverted range, an api key kio does not know,
        a version kio has no schema for, or a table without ApiVersions."""
        if API_VERSIONS_KEY not in versions:
            raise ValueError("every Kafka listener must support ApiVersions (key 18)")
        self._ranges = dict(sorted(versions.items()))
        self._schemas: dict[tuple[int, int], ApiSchema] = {}
        for api_key, (low, high) in self._ranges.items():
            if api_key not in api_key_map or not 0 <= low <= high:
                raise ValueError(f"bad api key or version range: {api_key} {low}..{high}")
            for version in range(low, high + 1):
                self._schemas[(api_key, version)] = _load_schema(api_key, version)

    @property
    def ranges(self) -> Mapping[int, tuple[int, int]]:
        return self._ranges

    def api_names(self) -> list[str]:
        """kio's snake_case name of every supported API (the handler method names)."""
        return [api_key_map[api_key] for api_key in self._ranges]

    def schema(self, api_key: int, version: int) -> ApiSchema:
        """Raises UnsupportedApiError for an api key or version outside the table."""
        try:
            return self._schemas[(api_key, version)]
        except KeyError:
            raise UnsupportedApiError(
                f"api key {api_key} version {version} is not supported"
            ) from None

    def api_versions_response(self, version: int) -> ResponsePayload:
        """The ApiVersions answer for a request of ``version``.

        An unsupported version gets Kafka's fallback: a v0 response with UNSUPPORTED_VERSION
        that still lists the supported ranges, so the client retries with a version it finds
        there (KIP-511).
        """
        supported = version in _API_VERSIONS_MODULES and self.supports(API_VERSIONS_KEY, version)
        module = _API_VERSIONS_MODULES[version if supported else 0]
        api_keys = tuple(
            module.ApiVersion(api_key=i16(key), min_version=i16(low), max_version=i16(high))
            for key, (low, high) in self._ranges.items()
        )
        fields: dict[str, object] = {
            "error_code": ErrorCode.none if supported else ErrorCode.unsupported_version,
            "api_keys": api_keys,
        }
        response_type = module.ApiVersionsResponse
        if "throttle_time" in {f.name for f in dataclasses.fields(response_type)}:
            fields["throttle_time"] = _NO_THROTTLE
        response: ResponsePayload = response_type(**fields)
        return response

    def supports(self, api_key: int, version: int) -> bool:
        return (api_key, version) in self._schemas


def _load_schema(api_key: int, version: int) -> ApiSchema:
    try:
        request_type = load_request_schema(api_key, version)
        response_type = load_response_schema(api_key, version)
    except KioIndexError as e:
        raise ValueError(f"kio has no schema for api key {api_key} version {version}") from e
    return ApiSchema(
        api_key=api_key,
        version=version,
        name=api_key_map[api_key],
        request_type=request_type,
        response_type=response_type,
        read_request=entity_reader(request_type),
    )
