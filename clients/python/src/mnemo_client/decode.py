"""How a typed method's params are written and its result read: the helpers the generated methods
(:mod:`mnemo_client.methods`) and the client's own code share.

Params are sent without their ``None`` members (absent is the protocol's default), dataclasses as
their wire members, paths as text. A result is read strictly against its type: a missing required
member or a member of the wrong JSON type raises :class:`ProtocolError`.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from .errors import ProtocolError
from .types import JsonObject, WireError, from_wire, to_wire

#: Reads a call's decoded JSON result as the method's result type.
Decode = Callable[[Any], Any]


def present(params: dict[str, Any]) -> JsonObject:
    """``params`` without its ``None`` members, each value in its wire form."""
    return {k: _wire(v) for k, v in params.items() if v is not None}


def _wire(value: Any) -> Any:
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return to_wire(value)


def typed(tp: Any, method: str) -> Decode:
    """Reads the result as ``tp`` (a dataclass, or a list of them)."""

    def decode(value: Any) -> Any:
        try:
            return from_wire(tp, value, method)
        except WireError as error:
            raise ProtocolError(f"the result of {error}") from None

    return decode


def json_object(method: str) -> Decode:
    """Reads the result as a JSON object whose members the facade's output defines."""

    def decode(value: Any) -> JsonObject:
        if not isinstance(value, dict):
            raise ProtocolError(f"{method}: the result is not a JSON object")
        return value

    return decode


def optional_object(method: str) -> Decode:
    """Reads the result as a JSON object or ``None``."""
    inner = json_object(method)
    return lambda value: None if value is None else inner(value)


def objects(method: str) -> Decode:
    """Reads the result as a list of JSON objects."""

    def decode(value: Any) -> list[JsonObject]:
        if not isinstance(value, list) or not all(isinstance(e, dict) for e in value):
            raise ProtocolError(f"{method}: the result is not an array of objects")
        return value

    return decode


def nothing(value: Any) -> None:
    """An empty result (``{}``) read as ``None``."""
    return None
