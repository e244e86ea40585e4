// gatewayFetch with the official `openai` and `@anthropic-ai/sdk` packages against a REAL
// fleet (redis, simulator, ingress, worker), started by
// tests/integration/test_client_helper_ts.py, which passes its addresses in
// TURNOUT_TEST_BASE_URL and TURNOUT_TEST_SIM_URL and its keys in TURNOUT_TEST_KEY and
// TURNOUT_TEST_KEY_LAST (the suite skips without them). The Python helper's
// tests/integration/test_client_helper.py, same cases: routing events on plain and streamed
// answers, the client-side model chain after an exhausted gateway chain, one
// Idempotency-Key across an SDK retry.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import Anthropic from "@anthropic-ai/sdk";
import OpenAI from "openai";

import { type Fetch, gatewayFetch, type GatewayFetchOptions, type GatewayRouting, routingOf } from "../src/index.js";

const BASE_URL = process.env["TURNOUT_TEST_BASE_URL"];
const SIM_URL = process.env["TURNOUT_TEST_SIM_URL"];
const KEY = process.env["TURNOUT_TEST_KEY"] ?? "";
/** A key whose policy answers an exhausted plan with the last attempt's own error (`on_exhausted: last`). */
const KEY_LAST = process.env["TURNOUT_TEST_KEY_LAST"] ?? "";
const SKIP = BASE_URL === undefined || SIM_URL === undefined
  ? "no fleet: TURNOUT_TEST_BASE_URL / TURNOUT_TEST_SIM_URL unset (tests/integration/test_client_helper_ts.py starts one)"
  : false;
const MESSAGES = [{ role: "user" as const, content: "hello there" }];

/** Attempts the simulator received for upstream `model`. */
async function simLog(model: string): Promise<unknown[]> {
  const response = await fetch(`${SIM_URL}/sim/log?model=${encodeURIComponent(model)}`);
  return (await response.json()) as unknown[];
}

function openai(events: GatewayRouting[], options: GatewayFetchOptions = {}, apiKey = KEY): OpenAI {
  const fetch = gatewayFetch({ onRouting: (e) => events.push(e), ...options });
  return new OpenAI({ baseURL: `${BASE_URL}/v1`, apiKey, fetch, maxRetries: 2 });
}

describe("gatewayFetch against a real fleet", { skip: SKIP }, () => {
  it("gives the OpenAI SDK's answer its routing event", async () => {
    const events: GatewayRouting[] = [];
    const { data, response } = await openai(events).chat.completions
      .create({ model: "down-primary", messages: MESSAGES }).withResponse();
    assert.ok(data.choices[0]?.message.content);
    assert.equal(events.length, 1);
    const [event] = events;
    assert.deepEqual([event?.provider, event?.model, event?.fallback, event?.status], ["sim-b", "ch-dp-b", true, 200]);
    assert.ok((event?.attempts ?? 0) >= 1);
    assert.equal(event?.requestId, response.headers.get("x-request-id"));
    assert.equal(routingOf(response), event);
  });

  it("gives a stream its event before the first chunk is read", async () => {
    const events: GatewayRouting[] = [];
    const stream = await openai(events).chat.completions
      .create({ model: "down-primary", messages: MESSAGES, stream: true, max_tokens: 5 });
    assert.deepEqual(events.map((e) => [e.provider, e.fallback]), [["sim-b", true]]); // nothing read yet
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.delta.content ?? "";
    assert.ok(text.startsWith("tok0"), text);
  });

  it("serves from the client-side chain after the gateway's chain is exhausted", async () => {
    const events: GatewayRouting[] = [];
    const upstreamCalls = async () => (await simLog("ch-af-a~503")).length + (await simLog("ch-af-b~500")).length;
    const before = await upstreamCalls();
    const answer = await openai(events, { modelChain: { "all-fail": ["ok"] } }).chat.completions
      .create({ model: "all-fail", messages: MESSAGES });
    assert.ok(answer.choices[0]?.message.content);
    const [first, served] = events;
    assert.deepEqual([first?.status, first?.shouldRetry, first?.chainExhausted], [502, false, true]);
    assert.deepEqual([served?.status, served?.provider, served?.requestedModel, served?.chainIndex], [200, "sim-a", "ok", 1]);
    // all-fail was sent once: its upstream calls are the gateway's own attempts, no SDK retry on top
    assert.equal((await upstreamCalls()) - before, first?.attempts);
  });

  it("moves the client-side chain on an exhausted answer in the upstream's own status", async () => {
    const events: GatewayRouting[] = [];
    const answer = await openai(events, { modelChain: { "all-fail": ["ok"] } }, KEY_LAST).chat.completions
      .create({ model: "all-fail", messages: MESSAGES });
    assert.ok(answer.choices[0]?.message.content);
    const [first, served] = events;
    assert.deepEqual([first?.status, first?.exhaustedAnswer, first?.shouldRetry, first?.chainExhausted], [500, "last", false, true]);
    assert.ok(first?.attemptSummary?.includes("ch-af-b~500 500"), first?.attemptSummary ?? "no summary");
    assert.deepEqual([served?.status, served?.requestedModel, served?.chainIndex], [200, "ok", 1]);
  });

  it("replays an SDK retry after a lost answer instead of paying twice", async () => {
    let dropped = false;
    const dropsTheFirstAnswer: Fetch = async (input, init) => {
      const response = await fetch(input, init);
      if (dropped) return response;
      dropped = true;
      await response.arrayBuffer(); // the gateway made and sent the answer: only the client lost it
      throw new TypeError("fetch failed: connection lost after the answer was made");
    };
    const events: GatewayRouting[] = [];
    const before = (await simLog("ch-ok")).length;
    const { data, response } = await openai(events, { fetch: dropsTheFirstAnswer }).chat.completions
      .create({ model: "ok", messages: MESSAGES }).withResponse();
    assert.ok(data.choices[0]?.message.content);
    assert.equal(response.headers.get("x-turnout-idempotent-replay"), "1");
    assert.deepEqual(events.map((e) => e.idempotentReplay), [true]); // the lost answer never reached the helper
    assert.equal((await simLog("ch-ok")).length - before, 1, "the provider was called twice");
  });

  it("gives the Anthropic SDK the routing event, streams and asResponse() included", async () => {
    const events: GatewayRouting[] = [];
    const client = new Anthropic({ baseURL: BASE_URL, apiKey: KEY, fetch: gatewayFetch({ onRouting: (e) => events.push(e) }) });
    const message = await client.messages.create({ model: "down-primary", max_tokens: 20, messages: MESSAGES });
    assert.ok(message.content.length > 0);
    assert.deepEqual(events.map((e) => [e.provider, e.fallback]), [["sim-b", true]]);

    const stream = await client.messages.create({ model: "down-primary", max_tokens: 5, messages: MESSAGES, stream: true });
    assert.equal(events.length, 2); // before the first event is read
    let kinds = 0;
    for await (const _ of stream) kinds += 1;
    assert.ok(kinds > 0);

    const raw = await client.messages.create({ model: "ok", max_tokens: 5, messages: MESSAGES }).asResponse();
    assert.deepEqual([routingOf(raw)?.provider, routingOf(raw)?.model], ["sim-a", "ch-ok"]);
    assert.equal(routingOf(raw), events.at(-1));
  });
});
