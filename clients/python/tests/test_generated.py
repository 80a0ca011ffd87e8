"""The generated dataclasses against the generator and the checked-in schema document: a schema
changed on the server and regenerated fails here until ``python3 scripts/generate_types.py``
follows it; and a construct the generator does not know is refused, not mistyped."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

import pytest

from conftest import REPO

GENERATOR = REPO / "clients" / "python" / "scripts" / "generate_types.py"


def generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("generate_types", GENERATOR)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["generate_types"] = module
    spec.loader.exec_module(module)
    return module


def test_the_checked_in_module_is_what_the_generator_makes_from_the_checked_in_schema() -> None:
    gen = generator()
    checked_in = gen.OUTPUT_PATH.read_text()
    generated = gen.generate_from_file()
    if checked_in != generated:
        have, want = checked_in.splitlines(), generated.splitlines()
        line = next((i for i, text in enumerate(want) if i >= len(have) or have[i] != text), len(want))
        pytest.fail(
            f"{gen.OUTPUT_PATH} differs from the generator's output at line {line + 1}:\n"
            f"  checked in: {have[line] if line < len(have) else '<end>'}\n"
            f"  generated:  {want[line] if line < len(want) else '<end>'}\n"
            "run `python3 scripts/generate_types.py` in clients/python"
        )


def test_the_checked_in_methods_are_what_the_generator_makes_from_the_checked_in_schema() -> None:
    gen = generator()
    checked_in = gen.METHODS_OUTPUT_PATH.read_text()
    generated = gen.generate_methods_from_file()
    if checked_in != generated:
        have, want = checked_in.splitlines(), generated.splitlines()
        line = next((i for i, text in enumerate(want) if i >= len(have) or have[i] != text), len(want))
        pytest.fail(
            f"{gen.METHODS_OUTPUT_PATH} differs from the generator's output at line {line + 1}:\n"
            f"  checked in: {have[line] if line < len(have) else '<end>'}\n"
            f"  generated:  {want[line] if line < len(want) else '<end>'}\n"
            "run `python3 scripts/generate_types.py` in clients/python"
        )


def test_a_wrapper_takes_its_arguments_first_and_the_other_members_by_keyword() -> None:
    gen = generator()

    def method(arguments: list[str], required: list[str]) -> dict:
        members = {"session_id": {"type": "string"}, "from": {"type": ["integer", "null"]}, "all": {"type": "boolean", "default": False}}
        params = {"title": "P", "type": "object", "properties": members, "required": required}
        return {"repeatable": True, "description": "Does b.", "client": {"name": "do_b", "arguments": arguments},
                "params": params, "result": {"title": "Empty", "type": "object"}}

    module = gen.generate_methods({"protocol_version": 1, "methods": {"a/b": method(["session_id"], ["session_id"])}})
    assert "    def do_b(self, session_id: str, *, start: Optional[int] = None, all: bool = False) -> Any:" in module
    assert "        params = {'session_id': session_id, 'from': start, 'all': all}" in module
    assert "        return self._invoke('a/b', present(params), nothing)" in module
    with pytest.raises(gen.SchemaError, match=r"methods\['a/b'\]\.client\.arguments: session_id is not a required member"):
        gen.generate_methods({"protocol_version": 1, "methods": {"a/b": method(["session_id"], [])}})


def test_every_method_result_type_with_members_is_generated() -> None:
    import json

    import mnemo_client.protocol_types as generated

    document = json.loads(generator().SCHEMA_PATH.read_text())
    for name, method in document["methods"].items():
        for part in ("params", "result"):
            title = method[part].get("title")
            if "properties" in method[part] and method[part]["properties"]:
                assert hasattr(generated, title), f"{name}.{part}: {title} is not generated"


def test_a_construct_the_generator_does_not_know_is_refused_with_where_it_is() -> None:
    gen = generator()
    document = {
        "protocol_version": 1,
        "methods": {
            "ping": {
                "repeatable": True,
                "params": {"title": "PingParams", "type": "object", "properties": {"at": {"type": "string", "pattern": "^x"}}},
                "result": {"title": "Empty", "type": "object"},
            }
        },
    }
    with pytest.raises(gen.SchemaError, match=r"PingParams\.at: the keyword 'pattern' is not understood"):
        gen.generate(document)


def test_two_definitions_of_one_type_are_refused() -> None:
    gen = generator()

    def method(kind: str) -> dict:
        row = {"type": "object", "properties": {"a": {"type": kind}}, "required": ["a"]}
        return {"repeatable": True, "params": {"title": "Empty", "type": "object"},
                "result": {"title": "X", "type": "array", "items": {"$ref": "#/$defs/Row"}, "$defs": {"Row": row}}}

    with pytest.raises(gen.SchemaError, match="type Row differs"):
        gen.generate({"protocol_version": 1, "methods": {"one": method("string"), "two": method("integer")}})
