// Reading answers strictly against the schema the server generates: a missing required member or a
// member of the wrong JSON type is refused, naming where; unknown members are ignored (a newer
// server may add some).

import type { Json } from "./protocol.js";

type Schema = { [key: string]: Json };

/** Checks `value` against `schema`; returns a description of the first mismatch, or `undefined`. */
export function mismatch(value: unknown, schema: Json, where = "result"): string | undefined {
  const defs = (isObject(schema) && isObject(schema.$defs) ? schema.$defs : {}) as Schema;
  return check(value, schema, where, defs);
}

function check(value: unknown, schema: Json, where: string, defs: Schema): string | undefined {
  if (schema === true || !isObject(schema)) return undefined;
  if (typeof schema.$ref === "string") {
    const name = schema.$ref.replace(/^#\/\$defs\//, "");
    const target = defs[name];
    if (target === undefined) return `${where}: the schema refers to an unknown type ${name}`;
    return check(value, target, where, defs);
  }
  if ("const" in schema) {
    return value === schema.const ? undefined : `${where}: expected ${JSON.stringify(schema.const)}`;
  }
  for (const key of ["oneOf", "anyOf"]) {
    const options = schema[key];
    if (Array.isArray(options)) {
      const failures = options.map((option) => check(value, option, where, defs));
      if (failures.some((failure) => failure === undefined)) return undefined;
      return failures.find((failure) => failure !== undefined);
    }
  }
  const types = Array.isArray(schema.type) ? schema.type : typeof schema.type === "string" ? [schema.type] : [];
  if (types.length > 0 && !types.some((type) => typeof type === "string" && isType(value, type))) {
    return `${where}: expected ${types.join(" or ")}, got ${describe(value)}`;
  }
  if (Array.isArray(value) && schema.items !== undefined) {
    for (let i = 0; i < value.length; i++) {
      const failure = check(value[i], schema.items, `${where}[${i}]`, defs);
      if (failure) return failure;
    }
  }
  if (isObject(value) && !Array.isArray(value)) {
    const required = Array.isArray(schema.required) ? schema.required : [];
    for (const name of required) {
      if (typeof name === "string" && !(name in value)) return `${where}: the member ${name} is missing`;
    }
    const properties = isObject(schema.properties) ? schema.properties : {};
    for (const [name, property] of Object.entries(properties)) {
      if (name in value) {
        const failure = check(value[name], property, `${where}.${name}`, defs);
        if (failure) return failure;
      }
    }
  }
  return undefined;
}

function isObject(value: unknown): value is { [key: string]: Json } {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isType(value: unknown, type: string): boolean {
  switch (type) {
    case "null":
      return value === null;
    case "boolean":
      return typeof value === "boolean";
    case "integer":
      return Number.isInteger(value);
    case "number":
      return typeof value === "number";
    case "string":
      return typeof value === "string";
    case "array":
      return Array.isArray(value);
    case "object":
      return isObject(value);
    default:
      return false;
  }
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return `a ${typeof value}`;
}
