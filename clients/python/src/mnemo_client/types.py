"""The protocol's parameter and result types, and how they are read from and written to the wire.

The dataclasses are generated from the checked-in schema document
(``crates/mnemo-server/schema/protocol.json``, itself generated from the server's Rust types) into
:mod:`mnemo_client.protocol_types` by ``scripts/generate_types.py``; ``tests/test_generated.py``
fails when that module is stale, and ``tests/test_schema.py`` checks every dataclass against the
schema member by member. Results are read with :func:`from_wire`, which refuses a missing required member or a
member of the wrong JSON type, naming the type and the member, and ignores members it does not know
(a newer server may add some).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Optional, Union

from .protocol_types import *  # noqa: F403 (the generated types are this module's)
from .protocol_types import JsonObject
from .protocol_types import __all__ as _GENERATED

#: The revision an append expects its stream at: ``"any"``, ``"no_stream"`` or an exact revision.
ExpectedRevision = Union[Literal["any", "no_stream"], int]


class WireError(ValueError):
    """A result that does not have the shape the protocol states."""


def wire_name(f: "dataclasses.Field[Any]") -> str:
    """A field's member name on the wire (``from_`` is ``from``)."""
    return f.metadata.get("wire", f.name)


def from_wire(cls: type, value: Any, where: str = "") -> Any:
    """Reads ``value`` (decoded JSON) as ``cls``, checking every member's JSON type."""
    return _read(cls, value, where or cls.__name__)


def _read(tp: Any, value: Any, where: str) -> Any:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        options = typing.get_args(tp)
        if value is None and type(None) in options:
            return None
        errors = []
        for option in options:
            if option is type(None):
                continue
            try:
                return _read(option, value, where)
            except WireError as error:
                errors.append(str(error))
        raise WireError("; ".join(errors))
    if origin is Literal:
        if value in typing.get_args(tp):
            return value
        raise WireError(f"{where}: {value!r} is not one of {typing.get_args(tp)}")
    if origin is list:
        if not isinstance(value, list):
            raise WireError(f"{where}: expected an array, got {_json_type(value)}")
        (item,) = typing.get_args(tp)
        return [_read(item, v, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise WireError(f"{where}: expected an object, got {_json_type(value)}")
        return value
    if dataclasses.is_dataclass(tp):
        if not isinstance(value, dict):
            raise WireError(f"{where}: expected an object, got {_json_type(value)}")
        hints = typing.get_type_hints(tp)
        members = {}
        for f in dataclasses.fields(tp):
            name = wire_name(f)
            if name in value:
                members[f.name] = _read(hints[f.name], value[name], f"{where}.{name}")
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise WireError(f"{where}: the required member {name!r} is missing")
        return tp(**members)
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        raise WireError(f"{where}: expected a number, got {_json_type(value)}")
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is str:
        if isinstance(value, str):
            return value
    elif tp is Any:
        return value
    else:
        raise WireError(f"{where}: no reader for {tp!r}")
    raise WireError(f"{where}: expected {tp.__name__}, got {_json_type(value)}")


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def to_wire(value: Any) -> Any:
    """A dataclass (or list of them) as the JSON members the protocol takes; ``None`` members of a
    dataclass are left out."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {
            wire_name(f): to_wire(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) is not None
        }
    if isinstance(value, list):
        return [to_wire(v) for v in value]
    return value


__all__ = [
    *_GENERATED,
    "ExpectedRevision",
    "WireError",
    "from_wire",
    "to_wire",
    "wire_name",
]
