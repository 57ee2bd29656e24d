"""The consumer protocol's member bytes (``tiered.kafka.consumer_protocol``): subscriptions of
any version read as version 0, assignments, and bytes that are neither."""

from __future__ import annotations

import struct

import pytest

from tests.support.group_requests import assignment, subscription
from tiered.kafka.consumer_protocol import decode_assignment, decode_subscription


def test_a_subscription_of_any_version_is_read_as_version_0() -> None:
    assert decode_subscription(subscription(["orders", "payments"])) == {"orders", "payments"}
    # A v1+ subscription adds owned partitions (and more) after version 0's fields.
    newer = struct.pack(">h", 3) + subscription(["orders"])[2:] + struct.pack(">i", 0)
    assert decode_subscription(newer) == {"orders"}


def test_an_assignment_is_its_sorted_partitions() -> None:
    assert decode_assignment(assignment({"b": [1, 0], "a": [2]})) == [("a", 2), ("b", 0), ("b", 1)]
    assert decode_assignment(b"") == []


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00", "needs at least its version"),
        (struct.pack(">h", -1), "version -1 is negative"),
        (struct.pack(">hi", 0, 5), "does not decode"),
    ],
)
def test_bytes_that_are_not_a_subscription_or_assignment(data: bytes, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_subscription(data)
    with pytest.raises(ValueError, match=message):
        decode_assignment(data)
