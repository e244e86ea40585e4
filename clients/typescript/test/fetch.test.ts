// gatewayFetch under the official SDKs, against a mock gateway (an inner fetch): the
// Python helper's tests/unit/client/test_client_transport.py, same cases. The SDKs'
// own retry loops run for real (a retry waits `retry-after-ms: 1`).
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

import { type Fetch, gatewayFetch, type GatewayFetchOptions, type GatewayRouting, IdempotencyKeys, routingOf } from "../src/index.js";

const MESSAGES = [{ role: "user" as const, content: "hi" }];

function json(status: number, headers: Record<string, string>, body: unknown): Response {
  return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json", ...headers } });
}

function completion(model: string): unknown {
  return {
    id: "c1",
    object: "chat.completion",
    created: 0,
    model,
    choices: [{ index: 0, message: { role: "assistant", content: `from ${model}` }, finish_reason: "stop" }],
    usage: { prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 },
  };
}

/** Answers by the requested model; records every request it saw as [model, key, retry count]. */
class MockGateway {
  readonly seen: [string, string | null, string | null][] = [];
  failuresLeft = 1;

  readonly fetch: Fetch = async (input, init) => {
    const body = JSON.parse(String(init?.body)) as { model: string };
    const headers = new Headers(init?.headers);
    const model = body.model;
    this.seen.push([model, headers.get("idempotency-key"), headers.get("x-stainless-retry-count")]);
    const served = {
      "x-request-id": `r${this.seen.length}`,
      "x-turnout-attempts": "1",
      "x-turnout-provider": "p1",
      "x-turnout-model": `${model}-v1`,
      "x-turnout-fallback": "0",
    };
    const error = (message: string, type: string, code: string | null) => ({ error: { message, type, code } });
    switch (model) {
      case "exhausted":
        return json(502, { ...served, "x-turnout-attempts": "3", "x-should-retry": "false" }, error("no provider", "upstream_error", "provider_failed"));
      case "limited":
        return json(429, { ...served, "x-turnout-attempts": "2", "x-should-retry": "false", "retry-after": "9" }, error("slow down", "rate_limit_error", "rate_limit_exceeded"));
      case "upstream-500": // `fallback.on_exhausted: last`: the last attempt's own status
        return json(500, { ...served, "x-turnout-attempts": "2", "x-should-retry": "false", "x-turnout-exhausted-answer": "last" }, error("upstream broke", "server_error", null));
      case "open":
      case "queue-full": // refused before any attempt: no x-turnout-attempts
        return json(503, { "x-request-id": "r0", "retry-after": "5", "x-should-retry": "false" }, error("later", "service_unavailable", model === "open" ? "circuit_open" : "queue_full"));
      case "bad":
        return json(400, { ...served, "x-should-retry": "false" }, error("bad", "invalid_request_error", null));
    }
    if (model === "once-500" && this.failuresLeft > 0) {
      this.failuresLeft -= 1;
      return json(500, { "x-should-retry": "true", "retry-after-ms": "1" }, error("lost", "server_error", null));
    }
    const url = input instanceof Request ? input.url : String(input);
    if (url.endsWith("/messages")) {
      return json(200, served, {
        id: "m1", type: "message", role: "assistant", model, stop_reason: "end_turn", stop_sequence: null,
        content: [{ type: "text", text: `from ${model}` }], usage: { input_tokens: 1, output_tokens: 2 },
      });
    }
    return json(200, served, completion(model));
  };
}

function openai(gateway: MockGateway, events: GatewayRouting[], options: GatewayFetchOptions = {}): OpenAI {
  const fetch = gatewayFetch({ onRouting: (e) => events.push(e), fetch: gateway.fetch, ...options });
  return new OpenAI({ baseURL: "http://gw/v1", apiKey: "tk-x", fetch, maxRetries: 2 });
}

describe("gatewayFetch under the SDKs (mock gateway)", () => {
  it("makes every answer an event on the callback and on the raw response", async () => {
    const events: GatewayRouting[] = [];
    const { data, response } = await openai(new MockGateway(), events).chat.completions
      .create({ model: "ok", messages: MESSAGES }).withResponse();
    assert.equal(data.choices[0]?.message.content, "from ok");
    assert.equal(events.length, 1);
    const [event] = events;
    assert.deepEqual([event?.provider, event?.model, event?.attempts, event?.requestId], ["p1", "ok-v1", 1, "r1"]);
    assert.equal(routingOf(response), event);
    assert.equal(routingOf({ data, response }), event);
  });

  it("reuses the call's Idempotency-Key on a retry by the SDK", async () => {
    const gateway = new MockGateway();
    const client = openai(gateway, []);
    await client.chat.completions.create({ model: "once-500", messages: MESSAGES });
    await client.chat.completions.create({ model: "once-500", messages: MESSAGES });
    const [[, first, c0], [, retry, c1], [, secondCall, c2]] = gateway.seen as unknown as [[unknown, string, string], [unknown, string, string], [unknown, string, string]];
    assert.deepEqual([c0, c1, c2], ["0", "1", "0"]);
    assert.ok(first && retry === first, "the SDK's retry carried another key");
    assert.ok(secondCall && secondCall !== first, "a new logical call reused the previous key");
  });

  it("keeps a caller's own Idempotency-Key", async () => {
    const gateway = new MockGateway();
    await openai(gateway, []).chat.completions.create(
      { model: "ok", messages: MESSAGES }, { headers: { "Idempotency-Key": "mine" } });
    assert.deepEqual(gateway.seen, [["ok", "mine", "0"]]);
  });

  for (const exhausted of ["exhausted", "limited", "upstream-500"]) {
    it(`moves an exhausted chain to the next model once: ${exhausted}`, async () => {
      const gateway = new MockGateway();
      const events: GatewayRouting[] = [];
      const client = openai(gateway, events, { modelChain: { [exhausted]: ["exhausted", "ok", "never"] } });
      const { data, response } = await client.chat.completions.create({ model: exhausted, messages: MESSAGES }).withResponse();
      assert.equal(data.choices[0]?.message.content, "from ok");
      const models = gateway.seen.map(([m]) => m);
      assert.deepEqual(models, exhausted === "exhausted" ? [exhausted, "ok"] : [exhausted, "exhausted", "ok"]);
      const keys = gateway.seen.map(([, k]) => k);
      assert.deepEqual(keys.slice(1), keys.slice(1).map((_, i) => `${keys[0]}.${i + 1}`)); // one key per model
      assert.deepEqual(events.map((e) => e.chainIndex), models.map((_, i) => i));
      assert.ok(events[0]?.chainExhausted && !events.at(-1)?.chainExhausted);
      assert.equal(routingOf(response), events.at(-1));
      assert.equal(events.at(-1)?.requestedModel, "ok");
    });
  }

  it("answers the original error and no SDK retry when every model is exhausted", async () => {
    const gateway = new MockGateway();
    const client = openai(gateway, [], { modelChain: ["exhausted"] });
    const error = await client.chat.completions.create({ model: "limited", messages: MESSAGES }).then(() => null, (e: unknown) => e);
    assert.ok(error instanceof OpenAI.RateLimitError);
    assert.equal(error.headers?.get("retry-after"), "9"); // the original error, its hints intact
    assert.deepEqual(gateway.seen.map(([m]) => m), ["limited", "exhausted"]); // x-should-retry: false: no second round
  });

  it("moves down the chain when every target is out of rotation", async () => {
    const events: GatewayRouting[] = [];
    const answer = await openai(new MockGateway(), events, { modelChain: ["ok"] }).chat.completions
      .create({ model: "open", messages: MESSAGES });
    assert.equal(answer.choices[0]?.message.content, "from ok");
    assert.deepEqual([events[0]?.errorCode, events[0]?.attempts, events[0]?.chainExhausted], ["circuit_open", null, true]);
  });

  for (const [model, type] of [["bad", OpenAI.BadRequestError], ["queue-full", OpenAI.InternalServerError]] as const) {
    it(`never moves down the chain on a terminal error or an overloaded gateway: ${model}`, async () => {
      const gateway = new MockGateway();
      const client = openai(gateway, [], { modelChain: ["ok"] });
      await assert.rejects(client.chat.completions.create({ model, messages: MESSAGES }), type);
      assert.deepEqual(gateway.seen.map(([m]) => m), [model]);
    });
  }

  it("never fails the request for a failing callback", async () => {
    const events: GatewayRouting[] = [];
    const reported: unknown[] = [];
    const fetch = gatewayFetch({
      onRouting: [() => { throw new Error("boom"); }, (e) => events.push(e)],
      onCallbackError: (error) => reported.push(error),
      fetch: new MockGateway().fetch,
    });
    const client = new OpenAI({ baseURL: "http://gw/v1", apiKey: "tk-x", fetch });
    assert.equal((await client.chat.completions.create({ model: "ok", messages: MESSAGES })).id, "c1");
    assert.equal(events.length, 1);
    assert.equal(reported.length, 1);
  });

  it("gives the Anthropic SDK events and the chain too", async () => {
    const events: GatewayRouting[] = [];
    const fetch = gatewayFetch({ onRouting: (e) => events.push(e), fetch: new MockGateway().fetch, modelChain: { exhausted: ["ok"] } });
    const client = new Anthropic({ baseURL: "http://gw", apiKey: "tk-x", fetch });
    const message = await client.messages.create({ model: "exhausted", max_tokens: 5, messages: MESSAGES });
    assert.deepEqual(message.content[0]?.type === "text" ? message.content[0].text : null, "from ok");
    assert.deepEqual(events.map((e) => [e.chainIndex, e.requestedModel]), [[0, "exhausted"], [1, "ok"]]);
  });

  it("keeps one key per concurrent call (each with its own body) across its retries", async () => {
    const gateway = new MockGateway();
    gateway.failuresLeft = 2;
    let counter = 0;
    const client = openai(gateway, [], { idempotency: new IdempotencyKeys(() => `k${counter++}`) });
    await Promise.all([0, 1, 2].map((n) =>
      client.chat.completions.create({ model: "once-500", messages: [{ role: "user", content: `call ${n}` }] })));
    const byKey = new Map<string | null, (string | null)[]>();
    for (const [, key, count] of gateway.seen) byKey.set(key, [...(byKey.get(key) ?? []), count]);
    assert.equal(byKey.size, 3, "each concurrent call has its own key");
    assert.deepEqual([...byKey.values()].map((c) => c.sort().join(",")).sort(), ["0", "0,1", "0,1"]);
  });

  it("adds no key when told not to", async () => {
    const gateway = new MockGateway();
    await openai(gateway, [], { idempotency: false }).chat.completions.create({ model: "ok", messages: MESSAGES });
    assert.deepEqual(gateway.seen, [["ok", null, "0"]]);
  });
});
