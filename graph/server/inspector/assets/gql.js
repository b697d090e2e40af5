// GraphQL over HTTP: POST with the bearer token, lossless JSON, errors as exceptions.

import { parseLossless } from "./json.js";

/** The server refused the token (HTTP 401): sign in again. */
export class AuthError extends Error {
  constructor(message) {
    super(message || "The server did not accept the token.");
    this.name = "AuthError";
  }
}

/** The request failed below GraphQL (network, 4xx/5xx other than 401). */
export class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.name = "HttpError";
    this.status = status;
  }
}

/** The response carried GraphQL errors; `data` is whatever part did resolve. */
export class GraphQLError extends Error {
  constructor(errors, data) {
    super(errors.map((e) => e.message).join("; ") || "GraphQL error");
    this.name = "GraphQLError";
    this.errors = errors;
    this.data = data ?? null;
  }
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
      );
    }
    if (!body || typeof body !== "object") {
      throw new HttpError(response.status, "The server's answer was not JSON.");
    }
    if (Array.isArray(body.errors) && body.errors.length) {
      throw new GraphQLError(body.errors, body.data);
    }
    return body.data;
  };
}

/** A sentence for any error a request may throw. */
export function describeError(err) {
  if (!err) return "Something went wrong.";
  if (err instanceof AuthError) return `The token was refused: ${err.message}`;
  if (err instanceof GraphQLError || err instanceof HttpError) return err.message;
  return String(err.message || err);
}
