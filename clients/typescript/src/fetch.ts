/**
 * `gatewayFetch`: a `fetch` for the official SDKs' `fetch` option (routing events,
 * model chain, Idempotency-Key).
 *
 * Owns: wrapping one inner `fetch` so that every answer's `x-turnout-*` headers
 * become a `GatewayRouting` (given to the callbacks and kept for `routingOf`), a
 * POST gets an Idempotency-Key reused across the SDK's own retries, and an
 * exhausted chain moves on to the caller's next model (rules: ./chain.ts).
 * Streams are covered: the gateway sends its headers with the first chunk, so
 * the event is known before the stream is read. Nothing is patched: the SDK
 * keeps its own retry loop, which reads `x-should-retry` and `Retry-After` from
 * the answer this function returns.
 */

import { IDEMPOTENCY_HEADER, IdempotencyKeys, type ModelChain, planSteps, type Step } from "./chain.js";
import { EXHAUSTED_STATUSES, errorCodeOf, type GatewayRouting, parseRouting } from "./routing.js";

/** The `fetch` signature the `openai` and `@anthropic-ai/sdk` packages take. */
export type Fetch = (input: string | URL | Request, init?: RequestInit) => Promise<Response>;

/** Called with the `GatewayRouting` of every HTTP answer (with a chain: one per model tried). */
export type RoutingCallback = (event: GatewayRouting) => void;

export interface GatewayFetchOptions {
  /** Called with each answer's event; a callback that throws is reported to `onCallbackError`, never raised. */
  onRouting?: RoutingCallback | readonly RoutingCallback[];
  /** Models to try after the requested one is exhausted (`{"gpt-5": ["small"]}`, or `["small"]` for every model). */
  modelChain?: ModelChain;
  /** Add an Idempotency-Key per logical call (true, the default), never (false), or with these keys. */
  idempotency?: boolean | IdempotencyKeys;
  /** The inner fetch (default: the global `fetch`). */
  fetch?: Fetch;
  /** Told about a callback that threw (default: `console.warn`). */
  onCallbackError?: (error: unknown, callback: RoutingCallback) => void;
}

const events = new WeakMap<Response, GatewayRouting>();

/**
 * A `fetch` for `new OpenAI({ fetch })` / `new Anthropic({ fetch })` (module doc).
 *
 * @returns a function with `fetch`'s signature; it rejects only when the inner
 *   fetch rejects (a connection failure), which the SDK retries as usual.
 */
export function gatewayFetch(options: GatewayFetchOptions = {}): Fetch {
  const callbacks = options.onRouting === undefined ? [] : [options.onRouting].flat();
  const keys = options.idempotency instanceof IdempotencyKeys
    ? options.idempotency
    : options.idempotency === false ? null : new IdempotencyKeys();
  const chain = options.modelChain;
  const report = options.onCallbackError ?? ((error: unknown) => console.warn("turnout routing callback failed:", error));

  const observe = (response: Response, step: Step, errorCode: string | null): GatewayRouting => {
    const event = parseRouting(response.status, response.headers, {
      requestedModel: step.model,
      chainIndex: step.index,
      errorCode,
    });
    events.set(response, event);
    for (const callback of callbacks) {
      try {
        callback(event);
      } catch (error) {
        report(error, callback);
      }
    }
    return event;
  };

  return async function turnoutFetch(input: string | URL | Request, init?: RequestInit): Promise<Response> {
    const inner = options.fetch ?? globalThis.fetch;
    const method = (init?.method ?? (input instanceof Request ? input.method : "GET")).toUpperCase();
    const url = typeof input === "string" ? input : input instanceof URL ? input.href : input.url;
    const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
    const body = bodyText(init?.body);
    let key = headers.get(IDEMPOTENCY_HEADER);
    if (key === null && keys !== null) {
      key = keys.keyFor(method, url, headers, body);
      if (key !== null) headers.set(IDEMPOTENCY_HEADER, key);
    }
    const steps = planSteps(body, key, chain);
    let original: Response | null = null;
    for (const [i, step] of steps.entries()) {
      const last = i === steps.length - 1;
      const response = await inner(input, requestInit(init, headers, step));
      const readCode = !last && EXHAUSTED_STATUSES.has(response.status) && !response.headers.has("x-turnout-attempts");
      const event = observe(response, step, readCode ? errorCodeOf(await response.clone().text()) : null);
      if (!event.chainExhausted || last) {
        if (original !== null && event.chainExhausted) {
          await response.body?.cancel();
          return original; // every model exhausted: the caller's own model's error
        }
        return response;
      }
      if (original === null) {
        original = await buffered(response); // kept, to answer with it if every model is exhausted
      } else {
        await response.body?.cancel();
      }
    }
    throw new Error("unreachable: the last step always returns");
  };
}

/** The body as text when it is one the SDKs send (a string or bytes), else null (a stream, a form). */
function bodyText(body: RequestInit["body"] | undefined): string | null {
  if (typeof body === "string") return body;
  if (body instanceof ArrayBuffer) return new TextDecoder().decode(body);
  if (ArrayBuffer.isView(body)) return new TextDecoder().decode(body);
  return null;
}

/** The caller's init, with its headers (the key added) or, for a chain model, that model's body and key. */
function requestInit(init: RequestInit | undefined, headers: Headers, step: Step): RequestInit {
  if (step.body === null) return { ...init, headers };
  const copy = new Headers(headers);
  copy.delete("content-length");
  copy.delete(IDEMPOTENCY_HEADER);
  if (step.key !== null) copy.set(IDEMPOTENCY_HEADER, step.key);
  return { ...init, headers: copy, body: step.body };
}

/** A fully read copy of `response` (its event kept), so that it can be answered later. */
async function buffered(response: Response): Promise<Response> {
  const copy = new Response(await response.arrayBuffer(), {
    status: response.status,
    statusText: response.statusText,
    headers: response.headers,
  });
  const event = events.get(response);
  if (event !== undefined) events.set(copy, event);
  return copy;
}

/**
 * The routing event of a response the SDK returned.
 *
 * Accepts the `Response` of `.asResponse()`, or the `{ data, response }` of
 * `.withResponse()`. The event `gatewayFetch` kept is returned (it knows the
 * chain position); otherwise it is parsed from the headers.
 *
 * @returns the event, or null when `value` carries no response.
 */
export function routingOf(value: unknown): GatewayRouting | null {
  const response = value instanceof Response
    ? value
    : typeof value === "object" && value !== null && (value as { response?: unknown }).response instanceof Response
      ? (value as { response: Response }).response
      : null;
  if (response === null) return null;
  return events.get(response) ?? parseRouting(response.status, response.headers);
}
