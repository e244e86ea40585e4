/**
 * The client-side model chain and the per-call Idempotency-Key: decisions, no I/O.
 *
 * Owns: which request to send next for one logical call, given the answers so
 * far. `gatewayFetch` (./fetch.ts) performs the sends. The same rules as the
 * Python helper (`turnout_client.chain`):
 *
 * - **Idempotency-Key.** A POST without one gets a fresh key (a random UUID by
 *   default). A retry the SDK makes of the same logical call (the official
 *   `openai` and `@anthropic-ai/sdk` packages number their attempts in
 *   `x-stainless-retry-count`; a retry has a count above 0 and the same method,
 *   URL and body) gets the *same* key, so the gateway replays the first answer
 *   instead of paying twice. Node has no per-call context the SDK keeps across
 *   its retries, so the last key is remembered by the request's fingerprint
 *   (sha256 of method, URL and body; at most `maxCalls` of them, oldest
 *   forgotten first).
 * - **Model chain.** When the gateway says its whole chain is exhausted (see
 *   `GatewayRouting.chainExhausted`), the same request is sent once with the
 *   next model of the caller's chain (its own key: `<key>.<n>`). The chain never
 *   re-sends a model: the gateway has already retried and fallen back (that is
 *   what `x-should-retry: false` says), so the client only adds *different*
 *   models. When every model is exhausted the caller gets the answer of its own
 *   model (the original error), with its `x-should-retry` and `Retry-After`,
 *   which the SDK honours as usual.
 */

import { createHash, randomUUID } from "node:crypto";

/**
 * Models to try, in order, after the requested one is exhausted: by requested
 * model (`"*"` for any model), or one list for every model.
 */
export type ModelChain = Readonly<Record<string, readonly string[]>> | readonly string[];

export const IDEMPOTENCY_HEADER = "idempotency-key";
export const RETRY_COUNT_HEADER = "x-stainless-retry-count";

/** The chain after `model`: its entry (else the `"*"` entry), without `model` itself or repeats. */
export function chainModels(chain: ModelChain | undefined, model: string): string[] {
  if (chain === undefined) return [];
  const listed: readonly string[] = isList(chain) ? chain : (chain[model] ?? chain["*"] ?? []);
  const out: string[] = [];
  for (const name of listed) if (name !== model && !out.includes(name)) out.push(name);
  return out;
}

function isList(chain: ModelChain): chain is readonly string[] {
  return Array.isArray(chain);
}

/** The request body as a JSON object, or null (not JSON, not an object). */
export function jsonBody(text: string): Record<string, unknown> | null {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return null;
  }
  return typeof body === "object" && body !== null && !Array.isArray(body) ? (body as Record<string, unknown>) : null;
}

/** One Idempotency-Key per logical call (module doc). */
export class IdempotencyKeys {
  readonly #newKey: () => string;
  readonly #maxCalls: number;
  readonly #byFingerprint = new Map<string, string>();

  /**
   * @param newKey makes a fresh key (injected by tests; default a random UUID without dashes).
   * @param maxCalls fingerprints remembered for the SDK's retries (oldest forgotten first).
   */
  constructor(newKey: () => string = () => randomUUID().replaceAll("-", ""), maxCalls = 1024) {
    this.#newKey = newKey;
    this.#maxCalls = maxCalls;
  }

  /**
   * The key to add to this request, or null (not a POST, or the caller set one).
   *
   * @param body the request body as text; null when it cannot be read without
   *   consuming it (a stream): such a request gets a fresh key on every attempt.
   */
  keyFor(method: string, url: string, headers: Headers, body: string | null): string | null {
    if (method.toUpperCase() !== "POST" || headers.has(IDEMPOTENCY_HEADER)) return null;
    const retry = Number.parseInt(headers.get(RETRY_COUNT_HEADER) ?? "0", 10);
    if (body === null) return this.#newKey();
    const fingerprint = createHash("sha256").update(`${method.toUpperCase()} ${url}\n`).update(body).digest("hex");
    const last = this.#byFingerprint.get(fingerprint);
    if (retry > 0 && last !== undefined) return last;
    const key = this.#newKey();
    this.#byFingerprint.delete(fingerprint);
    this.#byFingerprint.set(fingerprint, key);
    if (this.#byFingerprint.size > this.#maxCalls) {
      const oldest = this.#byFingerprint.keys().next().value;
      if (oldest !== undefined) this.#byFingerprint.delete(oldest);
    }
    return key;
  }
}

/** A request to send: its body (null: unchanged), the model it asks for, its chain position, its key. */
export interface Step {
  readonly body: string | null;
  readonly model: string | null;
  readonly index: number;
  readonly key: string | null;
}

/**
 * The requests one logical call may send: the caller's own, then one per chain model.
 *
 * @param body the caller's request body as text (null: not readable, no chain).
 * @param key the caller's Idempotency-Key (given or added), or null.
 * @returns at least one step; only one when the body names no model or the chain
 *   has nothing after it.
 */
export function planSteps(body: string | null, key: string | null, chain: ModelChain | undefined): Step[] {
  const parsed = body !== null && chain !== undefined ? jsonBody(body) : null; // without a chain, never parsed
  const model = parsed?.["model"];
  if (parsed === null || typeof model !== "string") return [{ body: null, model: null, index: 0, key }];
  const steps: Step[] = [{ body: null, model, index: 0, key }];
  chainModels(chain, model).forEach((name, i) => {
    const index = i + 1;
    steps.push({
      body: JSON.stringify({ ...parsed, model: name }),
      model: name,
      index,
      key: key === null ? null : `${key}.${index}`,
    });
  });
  return steps;
}
