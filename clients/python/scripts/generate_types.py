#!/usr/bin/env python3
"""Generates ``src/mnemo_client/protocol_types.py`` — a frozen dataclass for every object type of the
protocol — and ``src/mnemo_client/methods.py`` — the clients' typed method for every protocol
method — from the schema document the server generates from its Rust types
(``crates/mnemo-server/schema/protocol.json``). Never edit the output by hand: run
``python3 scripts/generate_types.py`` in ``clients/python``. ``tests/test_generated.py`` fails when
a checked-in module differs from what this script makes from the checked-in schema.

Each method's entry in the schema names its wrapper (``client.name``) and the params members it
takes positionally (``client.arguments``); the other members are keyword-only, with the schema's
default. :data:`HAND_WRITTEN` lists the wrappers ``client.py`` writes itself.

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
METHODS_OUTPUT_PATH = PACKAGE / "src" / "mnemo_client" / "methods.py"

#: The methods whose wrapper ``client.py`` writes itself, and why: each does more than send its
#: params. Every other method with a ``client`` entry gets its wrapper from :func:`generate_methods`.
HAND_WRITTEN = {
    "append": "takes the expected revision as 'any', 'no_stream' or a bare int, checked before sending",
    "seams/register": "installs the seams' handlers on the connection",
}

#: Keyword arguments named other than their member, where the member's name is a Python keyword.
ARGUMENT_NAMES = {"from": "start"}

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


def decoder(method: str, result: dict[str, Any], defs: dict[str, dict[str, Any]]) -> str:
    """The expression that reads ``method``'s result (see ``mnemo_client.decode``)."""
    title = result.get("title")
    where = f"methods[{method!r}].result"
    if title == "Empty":
        return "nothing"
    if isinstance(title, str) and result.get("properties"):
        return f"typed({title}, {method!r})"
    kind = result.get("type")
    if kind == "array":
        items = result.get("items", {})
        if "$ref" in items:
            name = items["$ref"].rsplit("/", 1)[1]
            if name in defs and defs[name].get("properties"):
                return f"typed(list[{name}], {method!r})"
        if isinstance(items, dict) and items.get("type") == "object" and not items.get("properties"):
            return f"objects({method!r})"
    if kind == "object" and not result.get("properties"):
        return f"json_object({method!r})"
    if kind == ["object", "null"] and not result.get("properties"):
        return f"optional_object({method!r})"
    raise SchemaError(f"{where}: no reader for this result")


def docstring(text: Any, indent: str) -> list[str]:
    if not isinstance(text, str) or not text.strip():
        return []
    lines = text.strip().replace('"""', "'''").replace("\\", "\\\\").splitlines()
    if len(lines) == 1:
        return [f'{indent}"""{lines[0]}"""']
    return [f'{indent}"""{lines[0]}', *[f"{indent}{line}".rstrip() for line in lines[1:]], f'{indent}"""']


def wrapper(method: str, entry: dict[str, Any], defs: dict[str, dict[str, Any]]) -> list[str]:
    where = f"methods[{method!r}]"
    client = entry["client"]
    name, positional = client.get("name"), client.get("arguments")
    if not isinstance(name, str) or not isinstance(positional, list):
        raise SchemaError(f"{where}.client is not {{name, arguments}}")
    params = entry["params"]
    properties: dict[str, Any] = params.get("properties", {})
    required = set(params.get("required", []))
    for argument in positional:
        if argument not in properties:
            raise SchemaError(f"{where}.client.arguments: {argument} is not a member of the params")
        if argument not in required:
            raise SchemaError(f"{where}.client.arguments: {argument} is not a required member")
    title = params.get("title", "")
    signature = ["self"]
    for argument in positional:
        signature.append(f"{argument}: {py_type(properties[argument], defs, f'{title}.{argument}')}")
    keywords = [m for m in properties if m not in positional and m in required]
    keywords += [m for m in properties if m not in positional and m not in required]
    if keywords:
        signature.append("*")
    for member in keywords:
        prop = properties[member]
        argument = ARGUMENT_NAMES.get(member, member)
        if keyword.iskeyword(argument):
            raise SchemaError(f"{where}: the member {member} is a Python keyword; name its argument in ARGUMENT_NAMES")
        tp = py_type(prop, defs, f"{title}.{member}")
        if member in required:
            signature.append(f"{argument}: {tp}")
            continue
        default = prop.get("default") if isinstance(prop, dict) else None
        if isinstance(default, (bool, int, float, str)) and not tp.startswith("Optional["):
            signature.append(f"{argument}: {tp} = {default!r}")
        else:
            signature.append(f"{argument}: {tp if tp.startswith('Optional[') else f'Optional[{tp}]'} = None")
    lines = ["", f"    def {name}({', '.join(signature)}) -> Any:"]
    lines += docstring(entry.get("description"), "        ")
    read = decoder(method, entry["result"], defs)
    if not properties:
        lines.append(f"        return self._invoke({method!r}, None, {read})")
        return lines
    members = ", ".join(f"{m!r}: {ARGUMENT_NAMES.get(m, m) if m not in positional else m}" for m in [*positional, *keywords])
    lines.append(f"        params = {{{members}}}")
    lines.append(f"        return self._invoke({method!r}, present(params), {read})")
    return lines


def generate_methods(document: dict[str, Any]) -> str:
    defs = collect(document)
    out = [
        '"""The typed method of every protocol method, generated from',
        "``crates/mnemo-server/schema/protocol.json`` by ``scripts/generate_types.py``. Do not edit:",
        'change the server\'s table of methods, regenerate the schema, then ``python3 scripts/generate_types.py``."""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any, Optional",
        "",
        "from .decode import Decode, json_object, nothing, objects, optional_object, present, typed",
        "from .protocol_types import *  # noqa: F403 (the params and result types)",
        "from .protocol_types import JsonObject",
        "",
        "",
        "class ProtocolMethods:",
        '    """A typed method for every protocol method: the params members the method\'s entry names',
        "    come first, the others are keyword-only. :class:`~mnemo_client.Client` and",
        "    :class:`~mnemo_client.AsyncClient` supply ``_invoke`` (each method returns its result, or an",
        '    awaitable of it) and write the methods of ``HAND_WRITTEN`` (``scripts/generate_types.py``)."""',
        "",
        "    def _invoke(self, method: str, params: Optional[JsonObject], decode: Decode) -> Any:",
        "        raise NotImplementedError",
    ]
    for method, entry in document["methods"].items():
        if entry.get("client") is None or method in HAND_WRITTEN:
            continue
        out += wrapper(method, entry, defs)
    out += ["", "", '__all__ = ["ProtocolMethods"]', ""]
    return "\n".join(out)


def generate_methods_from_file(path: Path = SCHEMA_PATH) -> str:
    return generate_methods(json.loads(path.read_text()))


def main() -> int:
    try:
        text = generate_from_file()
        methods = generate_methods_from_file()
    except SchemaError as error:
        print(f"{SCHEMA_PATH}: {error}", file=sys.stderr)
        return 1
    OUTPUT_PATH.write_text(text)
    print(f"wrote {OUTPUT_PATH}")
    METHODS_OUTPUT_PATH.write_text(methods)
    print(f"wrote {METHODS_OUTPUT_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
