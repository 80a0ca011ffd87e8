"""The dataclasses against the checked-in schema document generated from the server's Rust types
(``crates/mnemo-server/schema/protocol.json``): same members, same required ones, same JSON types.
A type changed on the server and regenerated into the document fails here until the client follows.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any, Union

import pytest

import mnemo_client
from conftest import REPO

SCHEMA = REPO / "crates" / "mnemo-server" / "schema" / "protocol.json"

#: Every dataclass the client reads or writes, by the name of its Rust type.
DATACLASSES = [
    getattr(mnemo_client, name)
    for name in mnemo_client.__all__
    if dataclasses.is_dataclass(getattr(mnemo_client, name))
]


def definitions() -> dict[str, dict[str, Any]]:
    """Every named type of the document: each schema's root (by its title) and its ``$defs``."""
    document = json.loads(SCHEMA.read_text())
    found: dict[str, dict[str, Any]] = {}
    roots = [part for method in document["methods"].values() for part in (method["params"], method["result"])]
    # The server's own requests (the seams) and notifications, which a client reads and answers.
    for message in [*document["server_requests"].values(), *document["notifications"].values()]:
        roots.extend(part for key, part in message.items() if key in ("params", "result"))
    for root in roots:
        if "title" in root and "properties" in root:
            found[root["title"]] = root
        found.update(root.get("$defs", {}))
    return found


def json_types(tp: Any) -> set[str]:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return set().union(*(json_types(option) for option in typing.get_args(tp)))
    if tp is type(None):
        return {"null"}
    if origin is list:
        return {"array"}
    if origin is dict or dataclasses.is_dataclass(tp):
        return {"object"}
    if tp is Any:
        return set()
    return {{bool: "boolean", int: "integer", str: "string"}[tp]}


def schema_types(prop: dict[str, Any], defs: dict[str, dict[str, Any]]) -> set[str]:
    if "$ref" in prop:
        return schema_types(defs[prop["$ref"].rsplit("/", 1)[1]], defs)
    if "anyOf" in prop or "oneOf" in prop:
        return set().union(*(schema_types(p, defs) for p in prop.get("anyOf", prop.get("oneOf", []))))
    kind = prop.get("type")
    if kind is None:
        return {"object"} if "properties" in prop else set()
    return set(kind) if isinstance(kind, list) else {kind}


def test_every_dataclass_is_a_type_of_the_document() -> None:
    defs = definitions()
    missing = [cls.__name__ for cls in DATACLASSES if cls.__name__ not in defs]
    assert not missing, f"{SCHEMA} has no type named {missing}"
    assert len(DATACLASSES) >= 15


@pytest.mark.parametrize("cls", DATACLASSES, ids=lambda cls: cls.__name__)
def test_dataclass_members_match_the_schema(cls: Any) -> None:
    defs = definitions()
    schema = defs[cls.__name__]
    fields = {mnemo_client.types.wire_name(f): f for f in dataclasses.fields(cls)}
    assert set(fields) == set(schema["properties"]), cls.__name__
    required = {
        name
        for name, f in fields.items()
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    }
    assert required == set(schema.get("required", [])), cls.__name__
    hints = typing.get_type_hints(cls)
    for name, prop in schema["properties"].items():
        hint = hints[fields[name].name]
        if hint is Any or Any in typing.get_args(hint):
            # A union the generator does not type (an enum of objects): any JSON is read as is.
            continue
        declared = json_types(hint)
        stated = schema_types(prop, defs)
        # An optional member with a default may be absent rather than null.
        if name not in required and "null" not in stated:
            declared.discard("null")
        assert declared == stated, f"{cls.__name__}.{name}: {declared} here, {stated} in the schema"


def test_every_method_of_the_schema_has_a_method_of_the_clients() -> None:
    # A method only `call` reaches is one a user must find in the protocol document and type
    # by hand (`capture` and `memory/start_block` were). Each is generated, or written in
    # client.py and listed as written there; the handshake is the client's own.
    import inspect

    from test_generated import generator

    from mnemo_client import AsyncClient, Client, client

    hand_written = generator().HAND_WRITTEN
    source = inspect.getsource(client)
    missing = []
    for method, entry in json.loads(SCHEMA.read_text())["methods"].items():
        if entry["client"] is None or method in hand_written:
            if json.dumps(method) not in source:
                missing.append(method)
            continue
        for cls in (Client, AsyncClient):
            if not callable(getattr(cls, entry["client"]["name"], None)):
                missing.append(f"{cls.__name__}.{entry['client']['name']}")
    assert missing == [], f"methods without a typed method: {missing}"
