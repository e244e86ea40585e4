// parseRouting: the x-turnout-* headers read into a GatewayRouting (the Python helper's
// tests/unit/client/test_client_routing.py, same cases).
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { errorCodeOf, parseRouting, routingAttributes, routingOf } from "../src/index.js";

const SERVED = {
  "x-request-id": "rid-1",
  "x-turnout-provider": "sim-west",
  "x-turnout-model": "gpt-x",
  "x-turnout-attempts": "3",
  "x-turnout-fallback": "1",
  "x-turnout-reroute": "0",
  "x-turnout-byok-fallback": "1",
  "x-turnout-plan-fallback": "1",
  "x-turnout-strategy": "cost",
  "x-turnout-idempotent-replay": "1",
};

describe("parseRouting", () => {
  it("reads every header", () => {
    const event = parseRouting(200, new Headers(SERVED), { requestedModel: "demo-gpt" });
    assert.deepEqual(event, {
      status: 200,
      requestId: "rid-1",
      provider: "sim-west",
      model: "gpt-x",
      attempts: 3,
      fallback: true,
      reroute: false,
      byokFallback: true,
      planFallback: true,
      strategy: "cost",
      idempotentReplay: true,
      exhaustedAnswer: null,
      attemptSummary: null,
      shouldRetry: null,
      retryAfterS: null,
      requestedModel: "demo-gpt",
      chainIndex: 0,
      errorCode: null,
      chainExhausted: false,
    });
    assert.ok(Object.isFrozen(event));
  });

  const cases: [string, number, Record<string, string>, boolean][] = [
    ["provider-failed", 502, { "x-turnout-attempts": "4", "x-should-retry": "false" }, true],
    ["budget-exhausted", 504, { "x-turnout-attempts": "2", "x-should-retry": "false" }, true],
    ["all-rate-limited", 429, { "x-turnout-attempts": "2", "x-should-retry": "true", "retry-after": "3" }, true],
    ["circuit-open", 503, { "x-turnout-attempts": "0", "retry-after": "5" }, true],
    ["queue-full-no-attempts", 503, { "x-should-retry": "false", "retry-after": "1" }, false],
    ["exhausted-answer-last", 500, { "x-turnout-attempts": "3", "x-turnout-exhausted-answer": "last" }, true],
    ["exhausted-answer-original", 400, { "x-turnout-attempts": "2", "x-turnout-exhausted-answer": "original" }, true],
    ["terminal-4xx", 400, { "x-turnout-attempts": "1" }, false],
    ["unauthenticated", 401, {}, false],
  ];
  for (const [name, status, headers, exhausted] of cases) {
    it(`chain exhausted only after the attempt loop: ${name}`, () => {
      assert.equal(parseRouting(status, new Headers(headers)).chainExhausted, exhausted);
    });
  }

  it("counts circuit_open before any attempt as exhausted too", () => {
    assert.ok(parseRouting(503, new Headers(), { errorCode: "circuit_open" }).chainExhausted);
    assert.ok(!parseRouting(503, new Headers(), { errorCode: "queue_full" }).chainExhausted);
  });

  it("reads the plan fallback and the exhausted answer", () => {
    const summary = "1 pa/m1 500 server 12ms, 2 pb/m2 500 server 9ms";
    const event = parseRouting(500, {
      "x-turnout-attempts": "2",
      "x-turnout-plan-fallback": "0",
      "x-turnout-exhausted-answer": "last",
      "x-turnout-attempt-summary": summary,
    });
    assert.deepEqual([event.planFallback, event.exhaustedAnswer, event.attemptSummary], [false, "last", summary]);
    const served = parseRouting(200, { "x-turnout-plan-fallback": "1" });
    assert.equal(routingAttributes(served)["turnout.plan_fallback"], true);
  });

  const hints: [string, Record<string, string>, boolean | null, number | null][] = [
    ["seconds", { "x-should-retry": "false", "retry-after": "7" }, false, 7],
    ["http-date-is-not-read", { "x-should-retry": "TRUE", "retry-after": "Wed, 21 Oct 2015 07:28:00 GMT" }, true, null],
    ["malformed", { "retry-after": "-1", "x-turnout-attempts": "many" }, null, null],
  ];
  for (const [name, headers, shouldRetry, retryAfterS] of hints) {
    it(`reads retry hints and malformed values: ${name}`, () => {
      const event = parseRouting(429, new Headers(headers));
      assert.deepEqual([event.shouldRetry, event.retryAfterS, event.attempts], [shouldRetry, retryAfterS, null]);
    });
  }

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
