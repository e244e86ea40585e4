// parseRouting: the x-turnout-* headers read into a GatewayRouting, from the case table the
// Python helper's tests/unit/client/test_client_routing.py reads too.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";

import { errorCodeOf, parseRouting, routingAttributes, routingOf } from "../src/index.js";

interface Case {
  name: string;
  status: number;
  headers: Record<string, string>;
  error_code: string | null;
  expect: Record<string, unknown>;
}

/** Shared with the Python helper's tests (tests/unit/client/test_client_routing.py), fields in snake_case. */
const CASES = (JSON.parse(
  readFileSync(new URL("../../../../tests/data/client_routing_cases.json", import.meta.url), "utf8"),
) as { cases: Case[] }).cases;
const SERVED = CASES[0]?.headers ?? {};

const camel = (name: string) => name.replace(/_([a-z])/g, (_, c: string) => c.toUpperCase());

describe("parseRouting", () => {
  for (const c of CASES) {
    it(`reads the headers as both helpers read them: ${c.name}`, () => {
      const event = parseRouting(c.status, new Headers(c.headers), { errorCode: c.error_code }) as unknown as Record<string, unknown>;
      const expected = Object.fromEntries(Object.entries(c.expect).map(([name, value]) => [camel(name), value]));
      const fields = Object.fromEntries(Object.keys(expected).map((name) => [name, event[name]]));
      assert.deepEqual(fields, expected);
    });
  }

  it("has every field in the shared table, and freezes the event", () => {
    const event = parseRouting(200, new Headers(SERVED), { requestedModel: "demo-gpt", chainIndex: 2 });
    const names = [...Object.keys(CASES[0]?.expect ?? {}).map(camel), "requestedModel", "chainIndex"].sort();
    assert.deepEqual(Object.keys(event).sort(), names);
    assert.deepEqual([event.requestedModel, event.chainIndex], ["demo-gpt", 2]);
    assert.ok(Object.isFrozen(event));
    assert.equal(routingAttributes(event)["turnout.plan_fallback"], true);
  });

  it("reads a record of lower-case names like Headers", () => {
    assert.deepEqual(parseRouting(200, SERVED), parseRouting(200, new Headers(SERVED)));
  });

  it("reads error.code in both shapes", () => {
    assert.equal(errorCodeOf('{"error": {"code": "circuit_open"}}'), "circuit_open");
    assert.equal(errorCodeOf('{"type": "error", "error": {"type": "overloaded_error", "code": "circuit_open"}}'), "circuit_open");
    assert.equal(errorCodeOf('{"error": {"code": null}}'), null);
    assert.equal(errorCodeOf("not json"), null);
    assert.equal(errorCodeOf("[]"), null);
  });

  it("routingOf reads a plain Response and a withResponse() result", () => {
    const response = new Response("{}", { status: 200, headers: SERVED });
    const expected = parseRouting(200, response.headers);
    assert.deepEqual(routingOf(response), expected);
    assert.deepEqual(routingOf({ data: {}, response }), expected);
    assert.equal(routingOf({}), null);
  });

  it("leaves out what is unknown from the attributes", () => {
    const attributes = routingAttributes(parseRouting(502, { "x-turnout-attempts": "2" }));
    assert.equal(attributes["turnout.attempts"], 2);
    assert.equal(attributes["http.response.status_code"], 502);
    assert.ok(!("turnout.provider" in attributes) && !("turnout.request_id" in attributes));
  });
});
