#!/usr/bin/env python3
"""Generates ``src/mnemo_client/protocol_types.py`` — a frozen dataclass for every object type of the
protocol — from the schema document the server generates from its Rust types
(``crates/mnemo-server/schema/protocol.json``). Never edit the output by hand: run
``python3 scripts/generate_types.py`` in ``clients/python``. ``tests/test_generated.py`` fails when
the checked-in module differs from what this script makes from the checked-in schema.

Only what the server's generator emits is understood: objects with properties, arrays, ``$ref``s
into ``$defs``, ``oneOf``/``anyOf`` (string constants read as ``str``, ``X | null`` as
``Optional[X]``, any other union as ``Any``), and ``type`` lists with ``null``. Anything else is
refused with the path to it, so a new construct is noticed, not mistyped.
"""

from __future__ import annotations

import json
import keyword
import sys
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parents[1]
SCHEMA_PATH = PACKAGE.parents[1] / "crates" / "mnemo-server" / "schema" / "protocol.json"
OUTPUT_PATH = PACKAGE / "src" / "mnemo_client" / "protocol_types.py"

#: Keywords that describe values, not their Python shape.
IGNORED = {"$schema", "description", "default", "format", "minimum", "maximum", "title", "$defs",
           "additionalProperties", "required", "properties", "type", "items", "const", "enum"}


class SchemaError(ValueError):
    pass


def collect(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every named object type: each root schema whose title names one, and every ``$defs`` entry."""
    roots: list[tuple[str, dict[str, Any]]] = []
    for name, method in document["methods"].items():
        roots += [(f"methods[{name!r}].params", method["params"]), (f"methods[{name!r}].result", method["result"])]
    for section in ("server_requests", "notifications"):
        for name, message in document.get(section, {}).items():
            roots += [(f"{section}[{name!r}].{part}", message[part]) for part in ("params", "result") if part in message]
    named: dict[str, tuple[str, dict[str, Any]]] = {}

    def add(name: str, schema: dict[str, Any], where: str) -> None:
        seen = named.get(name)
        if seen is not None and comparable(seen[1]) != comparable(schema):
            raise SchemaError(f"{where}: type {name} differs from its definition at {seen[0]}")
        named.setdefault(name, (where, schema))

    for where, root in roots:
        for name, schema in root.get("$defs", {}).items():
            add(name, schema, f"{where}.$defs.{name}")
        title = root.get("title")
        if isinstance(title, str) and "properties" in root and title.isidentifier():
            add(title, root, where)
    return {name: schema for name, (_, schema) in sorted(named.items())}


def comparable(schema: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in schema.items() if k not in ("$schema", "$defs", "title")}


def py_type(schema: Any, defs: dict[str, dict[str, Any]], where: str) -> str:
    if schema is True or schema == {}:
        return "Any"
    if not isinstance(schema, dict):
        raise SchemaError(f"{where}: not a schema")
    for key in schema:
        if key not in IGNORED and key not in ("$ref", "oneOf", "anyOf"):
            raise SchemaError(f"{where}: the keyword {key!r} is not understood")
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        target = defs.get(name)
        if target is None:
            raise SchemaError(f"{where}: $ref to unknown {name}")
        return name if "properties" in target else py_type(target, defs, f"{where}->{name}")
    options = schema.get("oneOf", schema.get("anyOf"))
    if options is not None:
        if all(isinstance(o, dict) and "const" in o and o.get("type") == "string" for o in options):
            return "str"
        nulls = [o for o in options if o == {"type": "null"}]
        rest = [o for o in options if o != {"type": "null"}]
        if nulls and len(rest) == 1:
            return f"Optional[{py_type(rest[0], defs, where)}]"
        return "Any"
    kind = schema.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        if len(others) != 1:
            raise SchemaError(f"{where}: the type list {kind} is not understood")
        inner = py_type({**schema, "type": others[0]}, defs, where)
        return f"Optional[{inner}]" if "null" in kind else inner
    if kind == "string":
        return "str"
    if kind == "integer":
        return "int"
    if kind == "number":
        return "float"
    if kind == "boolean":
        return "bool"
    if kind == "array":
        return f"list[{py_type(schema.get('items', True), defs, where + '.items')}]"
    if kind == "object":
        return "JsonObject"
    if kind == "null":
        return "None"
    if kind is None and "const" in schema:
        return "str"
    raise SchemaError(f"{where}: the type {kind!r} is not understood")


def comment(text: Any, indent: str) -> list[str]:
    if not isinstance(text, str) or not text.strip():
        return []
    return [f"{indent}#: {line}".rstrip() for line in text.strip().splitlines()]


def dataclass(name: str, schema: dict[str, Any], defs: dict[str, dict[str, Any]]) -> list[str]:
    required = set(schema.get("required", []))
    lines = ["", "", "@dataclass(frozen=True)", f"class {name}:"]
    description = schema.get("description")
    if isinstance(description, str) and description.strip():
        text = description.strip().replace('"""', "'''").replace("\\", "\\\\")
        lines.append(f'    """{text}"""' if "\n" not in text else f'    """{text}\n    """')
        lines.append("")
    properties = schema["properties"]
    ordered = [p for p in properties if p in required] + [p for p in properties if p not in required]
    for wire in ordered:
        prop = properties[wire]
        where = f"{name}.{wire}"
        tp = py_type(prop, defs, where)
        field = wire + "_" if keyword.iskeyword(wire) else wire
        metadata = f'metadata={{"wire": "{wire}"}}' if field != wire else ""
        lines += comment(prop.get("description") if isinstance(prop, dict) else None, "    ")
        if wire in required:
            value = f" = field({metadata})" if metadata else ""
            lines.append(f"    {field}: {tp}{value}")
            continue
        default = prop.get("default") if isinstance(prop, dict) else None
        if isinstance(default, (bool, int, float, str)) and not tp.startswith("Optional["):
            literal = repr(default)
        else:
            literal = "None"
            if not tp.startswith("Optional["):
                tp = f"Optional[{tp}]"
        value = f"field(default={literal}, {metadata})" if metadata else literal
        lines.append(f"    {field}: {tp} = {value}")
    return lines


def generate(document: dict[str, Any]) -> str:
    defs = collect(document)
    out = [
        '"""The protocol\'s object types as frozen dataclasses, generated from',
        "``crates/mnemo-server/schema/protocol.json`` by ``scripts/generate_types.py``. Do not edit:",
        'regenerate (``python3 scripts/generate_types.py``)."""',
        "",
        "from __future__ import annotations",
        "",
        "from dataclasses import dataclass, field",
        "from typing import Any, Optional",
        "",
        "JsonObject = dict[str, Any]",
        "",
        f"#: The protocol version the schema describes.",
        f"SCHEMA_PROTOCOL_VERSION = {int(document['protocol_version'])}",
    ]
    classes = [name for name, schema in defs.items() if "properties" in schema and schema["properties"]]
    for name in classes:
        out += dataclass(name, defs[name], defs)
    out += ["", "", "__all__ = [", '    "JsonObject",', '    "SCHEMA_PROTOCOL_VERSION",']
    out += [f'    "{name}",' for name in classes]
    out += ["]", ""]
    return "\n".join(out)


def generate_from_file(path: Path = SCHEMA_PATH) -> str:
    return generate(json.loads(path.read_text()))


def main() -> int:
    try:
        text = generate_from_file()
    except SchemaError as error:
        print(f"{SCHEMA_PATH}: {error}", file=sys.stderr)
        return 1
    OUTPUT_PATH.write_text(text)
    print(f"wrote {OUTPUT_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
