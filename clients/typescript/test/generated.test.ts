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
  METHODS_OUTPUT_PATH: string;
  HAND_WRITTEN: Record<string, string>;
  generate(document: unknown): string;
  generateFromFile(path?: string): string;
  generateMethods(document: unknown): string;
  generateMethodsFromFile(path?: string): string;
}

const generator = (await import(pathToFileURL(join(PACKAGE_DIR, "scripts", "generate-types.mjs")).href)) as Generator;

/** Fails naming the first line where a checked-in generated file differs from the generator's output. */
function sameAsGenerated(file: string, checkedIn: string, generated: string): void {
  if (checkedIn !== generated) {
    const have = checkedIn.split("\n");
    const want = generated.split("\n");
    const line = want.findIndex((text, i) => have[i] !== text);
    assert.fail(
      `${file} differs from the generator's output at line ${line + 1}:\n` +
        `  checked in: ${have[line]}\n  generated:  ${want[line]}\nrun \`npm run generate\` in clients/typescript`,
    );
  }
}

test("the checked-in src/protocol.ts is what the generator makes from the checked-in schema", () => {
  sameAsGenerated("src/protocol.ts", readFileSync(generator.OUTPUT_PATH, "utf8"), generator.generateFromFile());
});

test("the checked-in src/methods.ts is what the generator makes from the checked-in schema", () => {
  sameAsGenerated("src/methods.ts", readFileSync(generator.METHODS_OUTPUT_PATH, "utf8"), generator.generateMethodsFromFile());
});

test("a stale src/methods.ts is reported with the line that differs", () => {
  const generated = generator.generateMethodsFromFile();
  const stale = generated.replace("async logHead(", "async logHeadOld(");
  assert.notEqual(stale, generated);
  assert.throws(() => sameAsGenerated("src/methods.ts", stale, generated), /differs from the generator's output at line \d+:\n  checked in: .*logHeadOld/);
});

test("every method of the schema has its params and result in the generated types", () => {
  const schema = JSON.parse(readFileSync(join(PACKAGE_DIR, "..", "..", "crates", "mnemo-server", "schema", "protocol.json"), "utf8"));
  const generated = generator.generateFromFile();
  for (const method of Object.keys(schema.methods)) {
    assert.match(generated, new RegExp(`  ${JSON.stringify(method).replace("/", "\\/")}: \\{\\n    params: `), method);
  }
});

test("every method of the schema has a typed method of the client: generated, or written in src/client.ts", () => {
  // A method only `call` reaches is one a user must find in the protocol document and type by
  // hand (`capture`, `memory/start_block` and `memory/cursor` were).
  const schema = JSON.parse(readFileSync(join(PACKAGE_DIR, "..", "..", "crates", "mnemo-server", "schema", "protocol.json"), "utf8"));
  const generated = generator.generateMethodsFromFile();
  const source = readFileSync(join(PACKAGE_DIR, "src", "client.ts"), "utf8");
  const missing = [];
  for (const [method, entry] of Object.entries(schema.methods as Record<string, { client: { name: string } | null }>)) {
    if (entry.client === null) {
      assert.ok(source.includes(JSON.stringify(method)), `${method}: the client's own code sends it`);
      continue;
    }
    const camel = entry.client.name.replace(/_([a-z0-9])/g, (_, letter: string) => letter.toUpperCase());
    const wrapper = method in generator.HAND_WRITTEN ? source : generated;
    if (!wrapper.includes(`  async ${camel}(`) && !source.includes(JSON.stringify(method))) missing.push(method);
  }
  assert.deepEqual(missing, [], `methods without a typed method: ${missing.join(", ")}`);
  for (const method of Object.keys(generator.HAND_WRITTEN)) {
    assert.ok(method in schema.methods, `HAND_WRITTEN names ${method}, which the schema does not have`);
    assert.ok(!generated.includes(`this.call(${JSON.stringify(method)}`), `${method} is written by hand and generated`);
  }
});

test("a method's wrapper takes its arguments first and its other members as options", () => {
  const params = (properties: string[], required: string[]) => ({
    title: "P",
    type: "object",
    properties: Object.fromEntries(properties.map((name) => [name, { type: "string" }])),
    required,
  });
  const document = {
    protocol_version: 1,
    methods: {
      "a/b": { repeatable: true, description: "Does b.", client: { name: "do_b", arguments: ["session_id"] }, params: params(["session_id", "x"], ["session_id"]), result: { title: "Empty", type: "object" } },
      "a/c": { repeatable: true, client: { name: "do_c", arguments: ["x"] }, params: params(["x"], []), result: { type: "object" } },
    },
  };
  assert.throws(() => generator.generateMethods(document), /methods\["a\/c"\]\.client\.arguments: x is not a required member/);
  delete (document.methods as Record<string, unknown>)["a/c"];
  const module = generator.generateMethods(document);
  assert.match(module, /\/\*\* Does b\. \*\/\n  async doB\(sessionId: Methods\["a\/b"\]\["params"\]\["session_id"\], options: Omit<Methods\["a\/b"\]\["params"\], "session_id"> = \{\}\): Promise<void> \{/);
  assert.match(module, /await this\.call\("a\/b", present\(\{ session_id: sessionId, \.\.\.options \}\)\);/);
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
