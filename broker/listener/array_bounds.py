"""Reject array lengths a frame cannot hold *before* kio decodes it.

kio's native reader reserves memory for an array from its claimed element count
(``Vec::with_capacity``): a 5-byte compact-array length of 2**32-2 asks for 32 GiB and the
allocation failure aborts the whole process. A request is untrusted input, so every array
count is checked first against the bytes left in the frame (every element takes at least one
byte), which bounds what kio can reserve by the frame size.

The walk is compiled once per kio message class from the same generated dataclasses kio
decodes with (field order, ``kafka_type`` metadata, tags, flexible versions): no layout is
written by hand here. It only skips bytes; values are never built.
"""

from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Callable
from types import NoneType, UnionType
from typing import Any, Union, get_args, get_origin

from kio.serial.readers import read_unsigned_varint

__all__ = ["ArrayBoundsError", "check_array_bounds"]

# (buffer, position, end) -> position after the value
_Skip = Callable[[bytes | memoryview, int, int], int]

_FIXED_SIZES = {
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class ArrayBoundsError(ValueError):
    """The frame claims more array elements (or bytes) than it holds."""


def check_array_bounds(entity_type: type[Any], buffer: bytes | memoryview, offset: int) -> int:
    """Walk the ``entity_type`` message at ``offset`` and return the position after it.

    Raises ArrayBoundsError when an array count or a length runs past the end of ``buffer``,
    or a varint does not decode.
    """
    try:
        return _entity_skipper(entity_type, nullable=False)(buffer, offset, len(buffer))
    except (ValueError, struct.error) as e:
        raise ArrayBoundsError(str(e)) from e


def _advance(position: int, size: int, end: int) -> int:
    position += size
    if position > end:
        raise ArrayBoundsError(f"a {size}-byte value runs past the end of the frame")
    return position


_compiled: dict[tuple[type[Any], bool], _Skip] = {}


def _entity_skipper(entity_type: type[Any], *, nullable: bool) -> _Skip:
    key = (entity_type, nullable)
    if key not in _compiled:
        _compiled[key] = _compile_entity(entity_type, nullable)
    return _compiled[key]


def _compile_entity(entity_type: type[Any], nullable: bool) -> _Skip:
    flexible: bool = entity_type.__flexible__
    regular: list[_Skip] = []
    tagged: dict[int, _Skip] = {}
    for field in dataclasses.fields(entity_type):
        skip = _field_skipper(field, flexible)
        if "tag" in field.metadata:
            tagged[int(field.metadata["tag"])] = skip
        else:
            regular.append(skip)
    fields = tuple(_merge_fixed(regular))
    fixed_size = _fixed_size(fields[0]) if len(fields) == 1 else None
    if fixed_size is not None and not nullable and not flexible:
        return fields[0]  # arrays of it are skipped in one step
    if fixed_size is not None and not nullable:
        return functools.partial(_skip_fixed_then_tags, fixed_size, tagged)

    def skip_entity(buffer: bytes | memoryview, position: int, end: int) -> int:
        if nullable:
            position = _advance(position, 1, end)
            if buffer[position - 1] == 0xFF:
                return position
        for skip in fields:
            position = skip(buffer, position, end)
        if flexible:
            position = _skip_tagged_fields(tagged, buffer, position, end)
        return position

    return skip_entity


def _skip_fixed_then_tags(
    size: int, tagged: dict[int, _Skip], buffer: bytes | memoryview, position: int, end: int
) -> int:
    return _skip_tagged_fields(tagged, buffer, _advance(position, size, end), end)


def _skip_tagged_fields(
    tagged: dict[int, _Skip], buffer: bytes | memoryview, position: int, end: int
) -> int:
    if position < end and buffer[position] == 0:  # the usual case: no tagged fields
        return position + 1
    count, size = read_unsigned_varint(buffer, position)
    position += size
    if count > end - position:
        raise ArrayBoundsError(f"{count} tagged fields cannot fit in the frame")
    for _ in range(count):
        tag, size = read_unsigned_varint(buffer, position)
        position += size
        length, size = read_unsigned_varint(buffer, position)
        position += size
        skip = tagged.get(tag)
        position = skip(buffer, position, end) if skip else _advance(position, length, end)
    return position


def _field_skipper(field: dataclasses.Field[Any], flexible: bool) -> _Skip:
    field_type, optional = _strip_optional(field.type)
    if get_origin(field_type) is tuple:
        item_type, _ = _strip_optional(get_args(field_type)[0])
        if isinstance(item_type, type) and dataclasses.is_dataclass(item_type):
            entity = _entity_skipper(item_type, nullable=False)
            return _array_skipper(entity, _fixed_size(entity), flexible)
        kafka_type = field.metadata["kafka_type"]
        item = _primitive_skipper(kafka_type, flexible)
        return _array_skipper(item, _FIXED_SIZES.get(kafka_type), flexible)
    if isinstance(field_type, type) and dataclasses.is_dataclass(field_type):
        return _entity_skipper(field_type, nullable=optional)
    return _primitive_skipper(field.metadata["kafka_type"], flexible)


def _strip_optional(field_type: Any) -> tuple[Any, bool]:
    if get_origin(field_type) in (UnionType, Union):
        members = [arg for arg in get_args(field_type) if arg is not NoneType]
        return members[0], len(members) != len(get_args(field_type))
    return field_type, False


def _array_skipper(item: _Skip, item_size: int | None, flexible: bool) -> _Skip:
    def skip_array(buffer: bytes | memoryview, position: int, end: int) -> int:
        if flexible:
            encoded, size = read_unsigned_varint(buffer, position)
            position += size
            count = encoded - 1
        else:
            position = _advance(position, 4, end)
            count = _INT32.unpack_from(buffer, position - 4)[0]
        if count < 0:  # null (or Kafka's -1 for legacy arrays)
            return position
        if count > end - position:
            raise ArrayBoundsError(f"an array of {count} elements cannot fit in the frame")
        if item_size is not None:
            return _advance(position, count * item_size, end)
        for _ in range(count):
            position = item(buffer, position, end)
        return position

    return skip_array


def _primitive_skipper(kafka_type: str, flexible: bool) -> _Skip:
    fixed = _FIXED_SIZES.get(kafka_type)
    if fixed is not None:
        return functools.partial(_skip_fixed, fixed)
    if kafka_type not in ("string", "bytes", "records"):
        raise TypeError(f"no size rule for kafka type {kafka_type!r}")
    if flexible:
        return _skip_compact_bytes
    return _skip_legacy_string if kafka_type == "string" else _skip_legacy_bytes


def _skip_fixed(size: int, buffer: bytes | memoryview, position: int, end: int) -> int:
    return _advance(position, size, end)


def _skip_compact_bytes(buffer: bytes | memoryview, position: int, end: int) -> int:
    encoded, size = read_unsigned_varint(buffer, position)
    return _advance(position + size, max(encoded - 1, 0), end)


def _skip_legacy_string(buffer: bytes | memoryview, position: int, end: int) -> int:
    position = _advance(position, 2, end)
    return _advance(position, max(_INT16.unpack_from(buffer, position - 2)[0], 0), end)


def _skip_legacy_bytes(buffer: bytes | memoryview, position: int, end: int) -> int:
    position = _advance(position, 4, end)
    return _advance(position, max(_INT32.unpack_from(buffer, position - 4)[0], 0), end)


def _fixed_size(skip: _Skip) -> int | None:
    if isinstance(skip, functools.partial) and skip.func is _skip_fixed:
        size: int = skip.args[0]
        return size
    return None


def _merge_fixed(skippers: list[_Skip]) -> list[_Skip]:
    """Fold runs of fixed-size fields into one skip (most of a message is fixed-size)."""
    merged: list[_Skip] = []
    run = 0
    for skip in skippers:
        size = _fixed_size(skip)
        if size is not None:
            run += size
            continue
        if run:
            merged.append(functools.partial(_skip_fixed, run))
            run = 0
        merged.append(skip)
    if run:
        merged.append(functools.partial(_skip_fixed, run))
    return merged
