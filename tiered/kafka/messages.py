"""Build kio messages without caring which version of an API the client chose.

kio generates one frozen dataclass per (API, version, struct); handlers answer in the request's
version. ``build`` takes the union of every version's fields and keeps those the target class
has, the way Kafka's generated Java messages ignore fields a version cannot carry; ``nested``
finds a struct class (``MetadataResponseTopic``, ...) of the same version as a message class.
"""

from __future__ import annotations

import dataclasses
import functools
import sys
from typing import Any, TypeVar

from kio.index import load_response_schema
from kio.static.protocol import RequestPayload, ResponsePayload

__all__ = ["build", "has_field", "nested"]

_E = TypeVar("_E")


def build(entity_type: type[_E], **values: Any) -> _E:
    """An ``entity_type`` from ``values``, dropping names the type has no field for.

    Raises TypeError when a field without a default is missing from ``values``.
    """
    names = _field_names(entity_type)
    return entity_type(**{name: value for name, value in values.items() if name in names})


def has_field(entity_type: type[object], name: str) -> bool:
    """Whether this version of the message carries field ``name``."""
    return name in _field_names(entity_type)


def nested(message_type: type[object], struct_name: str) -> type[Any]:
    """The struct class ``struct_name`` from the same generated module (same version) as
    ``message_type``; raises AttributeError if that version has no such struct."""
    found: type[Any] = getattr(sys.modules[message_type.__module__], struct_name)
    return found


# Per class, once: a Metadata answer for 100k topics builds 200k structs of a few classes.
_FIELD_NAMES: dict[type[object], frozenset[str]] = {}


def _field_names(entity_type: type[object]) -> frozenset[str]:
    names = _FIELD_NAMES.get(entity_type)
    if names is None:
        fields = dataclasses.fields(entity_type)  # type: ignore[arg-type]
        names = _FIELD_NAMES[entity_type] = frozenset(field.name for field in fields)
    return names


def response_type_for(request: RequestPayload) -> type[ResponsePayload]:
    """kio's response class matching ``request``'s api key and version."""
    return _response_type_of(type(request))


@functools.cache
def _response_type_of(request_type: type[RequestPayload]) -> type[ResponsePayload]:
    # kio resolves it by module name on every call: a cost on each small request's path
    return load_response_schema(request_type.__api_key__, request_type.__version__)
