// GraphQL over HTTP: POST with the bearer token, lossless JSON, errors as exceptions.

import { parseLossless } from "./json.js";

/** The server refused the token (HTTP 401): sign in again. */
export class AuthError extends Error {
  constructor(message) {
    super(message || "The server did not accept the token.");
    this.name = "AuthError";
  }
}

/** The request failed below GraphQL (network, 4xx/5xx other than 401). `retryAfterMs`: the
 * wait the server asked for (Retry-After), or null. */
export class HttpError extends Error {
  constructor(status, message, retryAfterMs = null) {
    super(message);
    this.name = "HttpError";
    this.status = status;
    this.retryAfterMs = retryAfterMs;
  }
}

/** The response carried GraphQL errors; `data` is whatever part did resolve. `retryAfterMs`:
 * the wait the server asked for (Retry-After, or an error's retryAfterSeconds), or null;
 * `status`: the HTTP status they came with (200 for a stream's). */
export class GraphQLError extends Error {
  constructor(errors, data, retryAfterMs = null, status = 200) {
    super(errors.map((e) => e.message).join("; ") || "GraphQL error");
    this.name = "GraphQLError";
    this.errors = errors;
    this.data = data ?? null;
    this.status = status;
    const asked = errors.map((e) => e.extensions && e.extensions.retryAfterSeconds).find((s) => typeof s === "number");
    this.retryAfterMs = retryAfterMs ?? (asked === undefined ? null : asked * 1000);
  }
}

/** Retry-After (seconds, or an HTTP date) in milliseconds; null without one. */
function retryAfter(response) {
  const value = response.headers.get("Retry-After");
  if (!value) return null;
  const at = /^\d+$/.test(value.trim()) ? Date.now() + Number(value) * 1000 : Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - Date.now());
}

function serverMessage(body) {
  const first = body && Array.isArray(body.errors) ? body.errors[0] : null;
  return first && typeof first.message === "string" ? first.message : null;
}

/**
 * A request function: `await request(query, variables)` resolves to `data`.
 * `getToken()` is asked for the token at each call (it is never part of a URL).
 */
export function createClient(endpoint, getToken) {
  return async function request(query, variables = {}, { signal, token } = {}) {
    const bearer = token ?? getToken();
    let response;
    try {
      response = await fetch(endpoint, {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          // Plain JSON: errors then come with HTTP 200 and a body to show (the
          // graphql-response+json media type would turn some into bare 4xx responses).
          Accept: "application/json",
          Authorization: `Bearer ${bearer}`,
        },
        body: JSON.stringify({ query, variables }),
        credentials: "omit",
        cache: "no-store",
        signal,
      });
    } catch (err) {
      if (err && err.name === "AbortError") throw err;
      throw new HttpError(0, "The server cannot be reached.");
    }
    const text = await response.text();
    let body = null;
    try {
      body = text ? parseLossless(text) : null;
    } catch {
      body = null;
    }
    if (response.status === 401) throw new AuthError(serverMessage(body));
    if (!response.ok && !(body && (body.data || body.errors))) {
      throw new HttpError(
        response.status,
        serverMessage(body) || `The server answered HTTP ${response.status}.`,
        retryAfter(response),
      );
    }
    if (!body || typeof body !== "object") {
      throw new HttpError(response.status, "The server's answer was not JSON.", retryAfter(response));
    }
    if (Array.isArray(body.errors) && body.errors.length) {
      throw new GraphQLError(body.errors, body.data, retryAfter(response), response.status);
    }
    return body.data;
  };
}

/** A sentence for any error a request may throw. */
/** `err` in the error element `el` (hidden when `err` is null), after `prefix`. */
export function showErrorIn(el, err, prefix = "") {
  el.hidden = !err;
  el.textContent = err ? prefix + describeError(err) : "";
}

export function describeError(err) {
  if (!err) return "Something went wrong.";
  if (err instanceof AuthError) return `The token was refused: ${err.message}`;
  if (err instanceof GraphQLError || err instanceof HttpError) return err.message;
  return String(err.message || err);
}

// What may pass if the same request is sent later: the server's trouble, not the request's.
const TRANSIENT_CODES = new Set(["DATABASE_UNAVAILABLE", "INTERNAL", "RATE_LIMITED"]);
const BACKOFF_FIRST_MS = 1_000;
const BACKOFF_MAX_MS = 30_000;

/** Whether a failed request may succeed later (the network, a restart, the database away, a
 * rate limit), as opposed to one that would fail the same way (a refused token, a bad id). */
export function isTransient(err) {
  const status = err && err.status;
  // A refusal before GraphQL ran may carry errors without a code (the server's 408 for a
  // body that came too slowly): its status says what it is.
  if (status === 0 || status === 408 || status === 429 || status >= 500) return true;
  if (err instanceof GraphQLError) {
    return err.errors.every((e) => TRANSIENT_CODES.has(e && e.extensions && e.extensions.code));
  }
  return false;
}

/** The wait before try number `attempt` (0, 1, …) after `err`: what the server asked for, else
 * a delay doubling from 1 s up to 30 s, with jitter (pages that failed together, at a restart,
 * do not all come back at once). */
export function retryDelayMs(err, attempt) {
  // Retry-After: 0 (a proxy's, or a date already past) is no wait at all: taken at its word,
  // an outage becomes a loop of requests; the backoff applies instead.
  if (err && typeof err.retryAfterMs === "number" && err.retryAfterMs > 0) return err.retryAfterMs;
  const cap = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** attempt);
  return Math.round(cap / 2 + Math.random() * (cap / 2));
}
