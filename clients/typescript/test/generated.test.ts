// The generated types against the generator and the checked-in schema document: a schema changed
// on the server and regenerated fails here until `npm run generate` follows it.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";

import { PACKAGE_DIR } from "./support.js";

interface Generator {
  OUTPUT_PATH: string;
  generate(document: unknown): string;
  generateFromFile(path?: string): string;
}

const generator = (await import(pathToFileURL(join(PACKAGE_DIR, "scripts", "generate-types.mjs")).href)) as Generator;

test("the checked-in src/protocol.ts is what the generator makes from the checked-in schema", () => {
  const checkedIn = readFileSync(generator.OUTPUT_PATH, "utf8");
  const generated = generator.generateFromFile();
  if (checkedIn !== generated) {
    const have = checkedIn.split("\n");
    const want = generated.split("\n");
    const line = want.findIndex((text, i) => have[i] !== text);
    assert.fail(
      `src/protocol.ts differs from the generator's output at line ${line + 1}:\n` +
        `  checked in: ${have[line]}\n  generated:  ${want[line]}\nrun \`npm run generate\` in clients/typescript`,
    );
  }
});

test("every method of the schema has its params and result in the generated types", () => {
  const schema = JSON.parse(readFileSync(join(PACKAGE_DIR, "..", "..", "crates", "mnemo-server", "schema", "protocol.json"), "utf8"));
  const generated = generator.generateFromFile();
  for (const method of Object.keys(schema.methods)) {
    assert.match(generated, new RegExp(`  ${JSON.stringify(method).replace("/", "\\/")}: \\{\\n    params: `), method);
  }
});

test("every method of the schema has a method of the client", () => {
  // A method only `call` reaches is one a user must find in the protocol document and type by
  // hand (`capture`, `memory/start_block` and `memory/cursor` were).
  const schema = JSON.parse(readFileSync(join(PACKAGE_DIR, "..", "..", "crates", "mnemo-server", "schema", "protocol.json"), "utf8"));
  const source = readFileSync(join(PACKAGE_DIR, "src", "client.ts"), "utf8");
  const missing = Object.keys(schema.methods).filter((method) => !source.includes(JSON.stringify(method)));
  assert.deepEqual(missing, [], `methods without a method in src/client.ts: ${missing.join(", ")}`);
});

test("a schema construct the generator does not know is refused with where it is", () => {
  const document = {
    protocol_version: 1,
    methods: {
      ping: {
        repeatable: true,
        params: { title: "PingParams", type: "object", properties: { at: { type: "string", pattern: "^x" } } },
        result: { title: "Empty", type: "object", additionalProperties: false },
      },
    },
  };
  assert.throws(() => generator.generate(document), /methods\["ping"\]\.params\.properties\.at: the keyword "pattern" is not understood/);
});

test("two methods that define one type differently are refused", () => {
  const def = (type: string) => ({ $defs: { Row: { type: "object", properties: { a: { type } }, required: ["a"] } }, title: "X", type: "array", items: { $ref: "#/$defs/Row" } });
  const document = {
    protocol_version: 1,
    methods: {
      one: { repeatable: true, params: { title: "Empty", type: "object" }, result: def("string") },
      two: { repeatable: true, params: { title: "Empty", type: "object" }, result: def("integer") },
    },
  };
  assert.throws(() => generator.generate(document), /type Row differs/);
});
