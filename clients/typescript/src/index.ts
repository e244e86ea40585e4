/**
 * Turnout's client helper for Node: the official SDKs' view of how the gateway routed.
 *
 * Plug it into `openai` / `@anthropic-ai/sdk` through their `fetch` option (no patching):
 *
 *     import OpenAI from "openai";
 *     import { gatewayFetch, routingOf } from "@turnout/client";
 *
 *     const client = new OpenAI({
 *       baseURL: "http://127.0.0.1:8080/v1", apiKey: "tk-...",
 *       fetch: gatewayFetch({ onRouting: (e) => console.log(e), modelChain: { "gpt-5": ["small"] } }),
 *     });
 *
 * No runtime dependency; Node 20 or later (global `fetch`, `node:crypto`).
 */

export { chainModels, IdempotencyKeys, type ModelChain, planSteps, type Step } from "./chain.js";
export { type Fetch, gatewayFetch, type GatewayFetchOptions, type RoutingCallback, routingOf } from "./fetch.js";
export {
  errorCodeOf,
  EXHAUSTED_STATUSES,
  type GatewayRouting,
  type HeadersLike,
  parseRouting,
  type ParseOptions,
  routingAttributes,
} from "./routing.js";
