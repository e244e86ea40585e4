/**
 * The routing facts a Turnout gateway puts on every answer, as one typed event.
 *
 * Owns: reading the `x-turnout-*`, `x-request-id`, `x-should-retry` and
 * `Retry-After` response headers into a `GatewayRouting`. Pure: no I/O, no
 * clock. The same fields and parsing rules as the Python helper
 * (`turnout_client.routing`), in camelCase.
 *
 * Header meanings (the gateway's README, "Response headers"):
 *
 *     x-request-id                the gateway's request id
 *     x-turnout-provider          provider that served (or was tried last)
 *     x-turnout-model             the provider's model name that served
 *     x-turnout-attempts          upstream attempts the gateway made (>= 0)
 *     x-turnout-fallback          1 when a fallback target served
 *     x-turnout-reroute           1 when a reroute model served
 *     x-turnout-byok-fallback     1 when the platform key served after the
 *                                 caller's own key was rejected
 *     x-turnout-plan-fallback     1 when a `plan_fallbacks` model served after
 *                                 a quota or usage-cap failure
 *     x-turnout-comparable        1 when a comparable alternate (a model of the
 *                                 requested model's class) served
 *     x-turnout-strategy          the spend strategy rule whose model served
 *     x-turnout-idempotent-replay 1 when the answer replays an earlier request
 *                                 with the same Idempotency-Key
 *     x-turnout-exhausted-answer  `last` / `original`: every attempt failed and
 *                                 the error is that upstream attempt's own
 *     x-turnout-attempt-summary   with it, one entry per attempt
 *     x-should-retry              "false": the gateway already retried and fell
 *                                 back; a client retry would multiply attempts
 *     Retry-After                 delta-seconds (RFC 9110 §10.2.3)
 */

/**
 * Statuses with which the gateway answers when its whole chain failed (every
 * provider rate limiting, `provider_failed`, `circuit_open`, `budget_exhausted`).
 */
export const EXHAUSTED_STATUSES: ReadonlySet<number> = new Set([429, 502, 503, 504]);

/** How the gateway routed one HTTP answer (immutable). */
export interface GatewayRouting {
  /** The HTTP status of the answer. */
  readonly status: number;
  /** `x-request-id`, null when absent. */
  readonly requestId: string | null;
  /** Who served (or was tried last); null when no attempt was made. */
  readonly provider: string | null;
  readonly model: string | null;
  /** Upstream attempts the gateway made; null when the answer did not come from
   * the attempt loop (auth, validation, overload). */
  readonly attempts: number | null;
  readonly fallback: boolean;
  readonly reroute: boolean;
  readonly byokFallback: boolean;
  /** A `plan_fallbacks` model served after a quota or usage-cap failure. */
  readonly planFallback: boolean;
  /** A comparable alternate served (`fallback.comparable`). */
  readonly comparable: boolean;
  /** The spend strategy rule named by the gateway, null when none fired. */
  readonly strategy: string | null;
  /** The answer replays an earlier identical request (same Idempotency-Key). */
  readonly idempotentReplay: boolean;
  /** `last` / `original`: every attempt failed and the answer is that upstream
   * attempt's own status and error (`policy.fallback.on_exhausted`); else null. */
  readonly exhaustedAnswer: string | null;
  /** `x-turnout-attempt-summary` (sent with `exhaustedAnswer`), else null. */
  readonly attemptSummary: string | null;
  /** `x-should-retry` as a boolean, null when absent. */
  readonly shouldRetry: boolean | null;
  /** `Retry-After` in seconds (delta-seconds form only), null when absent or not a number. */
  readonly retryAfterS: number | null;
  /** The model this HTTP request asked for (with a client-side chain: the chain's
   * model); null without a chain (the body is then never parsed). */
  readonly requestedModel: string | null;
  /** 0 for the caller's own model, n for the n-th model of the client-side chain. */
  readonly chainIndex: number;
  /** The error body's `error.code` where the helper read it (an error answer that
   * may end a chain), else null. */
  readonly errorCode: string | null;
  /** No target of the model could serve: the attempt loop ran and failed (the answer
   * carries `x-turnout-attempts`) with 429/502/503/504 or as an exhausted answer in
   * the upstream's own status, or every target is out of rotation (`circuit_open`). */
  readonly chainExhausted: boolean;
}

/** Response headers: the fetch `Headers`, or a record with lower-case names. */
export type HeadersLike = Headers | Readonly<Record<string, string>>;

/** What `parseRouting` cannot read from the headers. */
export interface ParseOptions {
  requestedModel?: string | null;
  chainIndex?: number;
  errorCode?: string | null;
}

function header(headers: HeadersLike, name: string): string | null {
  if (headers instanceof Headers) return headers.get(name);
  return headers[name] ?? null;
}

function flag(value: string | null): boolean {
  return value !== null && ["1", "true"].includes(value.trim());
}

function int(value: string | null): number | null {
  if (value === null || !/^[+-]?\d+$/.test(value.trim())) return null;
  return Number.parseInt(value.trim(), 10);
}

function seconds(value: string | null): number | null {
  if (value === null || !/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(value.trim())) {
    return null; // the HTTP-date form too: the gateway never sends it
  }
  const n = Number(value.trim());
  return n >= 0 ? n : null;
}

function exhausted(status: number, attempts: number | null, exhaustedAnswer: string | null, code: string | null): boolean {
  if (exhaustedAnswer !== null && attempts !== null) return true;
  if (!EXHAUSTED_STATUSES.has(status)) return false;
  return attempts !== null || code === "circuit_open";
}

/**
 * The `GatewayRouting` of one answer. Headers that are absent or malformed read
 * as null / false. Never throws.
 */
export function parseRouting(status: number, headers: HeadersLike, options: ParseOptions = {}): GatewayRouting {
  const should = header(headers, "x-should-retry");
  const attempts = int(header(headers, "x-turnout-attempts"));
  const exhaustedAnswer = header(headers, "x-turnout-exhausted-answer");
  const errorCode = options.errorCode ?? null;
  return Object.freeze({
    status,
    requestId: header(headers, "x-request-id"),
    provider: header(headers, "x-turnout-provider"),
    model: header(headers, "x-turnout-model"),
    attempts,
    fallback: flag(header(headers, "x-turnout-fallback")),
    reroute: flag(header(headers, "x-turnout-reroute")),
    byokFallback: flag(header(headers, "x-turnout-byok-fallback")),
    planFallback: flag(header(headers, "x-turnout-plan-fallback")),
    comparable: flag(header(headers, "x-turnout-comparable")),
    strategy: header(headers, "x-turnout-strategy"),
    idempotentReplay: flag(header(headers, "x-turnout-idempotent-replay")),
    exhaustedAnswer,
    attemptSummary: header(headers, "x-turnout-attempt-summary"),
    shouldRetry: should === null ? null : should.trim().toLowerCase() === "true",
    retryAfterS: seconds(header(headers, "retry-after")),
    requestedModel: options.requestedModel ?? null,
    chainIndex: options.chainIndex ?? 0,
    errorCode,
    chainExhausted: exhausted(status, attempts, exhaustedAnswer, errorCode),
  });
}

/** `error.code` of an error body (the OpenAI and the Anthropic shapes both carry it), or null. */
export function errorCodeOf(text: string): string | null {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return null;
  }
  if (typeof body !== "object" || body === null || Array.isArray(body)) return null;
  const error = (body as Record<string, unknown>)["error"];
  if (typeof error !== "object" || error === null) return null;
  const code = (error as Record<string, unknown>)["code"];
  return typeof code === "string" ? code : null;
}

/** Flat `turnout.*` attributes of an event (null fields left out), e.g. for an OpenTelemetry span. */
export function routingAttributes(event: GatewayRouting): Record<string, string | number | boolean> {
  const fields: Record<string, string | number | boolean | null> = {
    "turnout.request_id": event.requestId,
    "turnout.provider": event.provider,
    "turnout.model": event.model,
    "turnout.attempts": event.attempts,
    "turnout.fallback": event.fallback,
    "turnout.reroute": event.reroute,
    "turnout.byok_fallback": event.byokFallback,
    "turnout.plan_fallback": event.planFallback,
    "turnout.comparable": event.comparable,
    "turnout.strategy": event.strategy,
    "turnout.idempotent_replay": event.idempotentReplay,
    "turnout.exhausted_answer": event.exhaustedAnswer,
    "turnout.should_retry": event.shouldRetry,
    "turnout.retry_after_s": event.retryAfterS,
    "turnout.requested_model": event.requestedModel,
    "turnout.chain_index": event.chainIndex,
    "turnout.error_code": event.errorCode,
    "http.response.status_code": event.status,
  };
  const out: Record<string, string | number | boolean> = {};
  for (const [name, value] of Object.entries(fields)) if (value !== null) out[name] = value;
  return out;
}
