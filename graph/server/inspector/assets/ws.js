// A small graphql-transport-ws client (the protocol of the `graphql-ws` library):
// connection_init / connection_ack, subscribe, next, error, complete, ping / pong; one socket
// for every subscription of the page, reconnected with exponential backoff and jitter.
//
// On reconnect each subscription is sent again with variables computed afresh (so a caller
// can pass the cursor of the last event it saw) and its `onReconnect` is called.

import { parseLossless } from "./json.js";

const PROTOCOL = "graphql-transport-ws";
const ACK_TIMEOUT_MS = 10_000;
const PING_EVERY_MS = 15_000;
const PONG_TIMEOUT_MS = 10_000;
const BACKOFF_FIRST_MS = 500;
const BACKOFF_MAX_MS = 15_000;
const IDLE_CLOSE_MS = 5_000;

// Close codes after which trying again with the same token cannot help.
const FATAL = new Map([
  [4400, "the server did not understand a message"],
  [4401, "the token was refused"],
  [4403, "the token was refused"],
  [4406, "the server does not speak graphql-transport-ws"],
]);

/**
 * new TransportWS({url, connectionParams, onState})
 *   connectionParams(): the connection_init payload (asked at every connect)
 *   onState({state, attempt, delayMs, reason}): "connecting" | "live" | "retrying" | "closed" | "refused"
 */
export class TransportWS {
  constructor({ url, connectionParams, onState }) {
    this.url = url;
    this.connectionParams = connectionParams;
    this.onState = onState || (() => {});
    this.socket = null;
    this.acked = false;
    this.subs = new Map();
    this.nextId = 1;
    this.attempt = 0;
    this.timers = { retry: null, ack: null, ping: null, pong: null, idle: null };
    this.everConnected = false;
    this.stopped = false;
  }

  /**
   * Subscribe; returns a function that ends the subscription.
   * sink: {next(payload), error(errors), complete(), onReconnect()}
   * request: {query, variables: object | () => object}
   */
  subscribe(request, sink) {
    const id = String(this.nextId++);
    const sub = { id, request, sink, active: true };
    this.subs.set(id, sub);
    clearTimeout(this.timers.idle);
    this.stopped = false;
    if (this.acked) this.sendSubscribe(sub);
    else this.ensureSocket();
    return () => {
      if (!sub.active) return;
      sub.active = false;
      this.subs.delete(id);
      if (this.acked) this.send({ id, type: "complete" });
      if (this.subs.size === 0) {
        clearTimeout(this.timers.idle);
        this.timers.idle = setTimeout(() => this.idle(), IDLE_CLOSE_MS);
      }
    };
  }

  /** No subscription for a while: close, and say so (close() silences the socket's onclose,
   * so the indicator would go on saying "Live" with nothing open). */
  idle() {
    this.close();
    if (!this.stopped) this.onState({ state: "closed" });
  }

  /** Close the socket and forget every subscription (sign-out). */
  dispose() {
    this.stopped = true;
    for (const sub of this.subs.values()) sub.active = false;
    this.subs.clear();
    this.close();
    this.onState({ state: "closed" });
  }

  close() {
    for (const key of Object.keys(this.timers)) clearTimeout(this.timers[key]);
    const socket = this.socket;
    this.socket = null;
    this.acked = false;
    if (socket) {
      socket.onopen = socket.onmessage = socket.onerror = socket.onclose = null;
      if (socket.readyState <= WebSocket.OPEN) socket.close(1000, "Normal Closure");
    }
  }

  ensureSocket() {
    if (this.socket || this.stopped || this.timers.retry) return;
    this.onState({ state: "connecting", attempt: this.attempt });
    let socket;
    try {
      socket = new WebSocket(this.url, PROTOCOL);
    } catch (err) {
      this.scheduleRetry(String(err && err.message ? err.message : err));
      return;
    }
    this.socket = socket;
    socket.onopen = () => {
      if (socket.protocol && socket.protocol !== PROTOCOL) {
        this.refuse("the server does not speak graphql-transport-ws");
        return;
      }
      this.send({ type: "connection_init", payload: this.connectionParams() });
      this.timers.ack = setTimeout(() => this.drop("no connection_ack in time"), ACK_TIMEOUT_MS);
    };
    socket.onmessage = (event) => this.receive(event.data);
    socket.onerror = () => {}; // the close event that follows says what to do
    socket.onclose = (event) => {
      this.socket = null;
      const wasAcked = this.acked;
      this.acked = false;
      for (const key of ["ack", "ping", "pong"]) clearTimeout(this.timers[key]);
      if (FATAL.has(event.code)) {
        this.refuse(FATAL.get(event.code), event.code);
        return;
      }
      if (this.subs.size === 0) {
        this.onState({ state: "closed" });
        return;
      }
      this.scheduleRetry(event.reason || `connection closed (${event.code})`, wasAcked);
    };
  }

  refuse(reason, code) {
    this.stopped = true;
    this.close();
    // `final`: the same token over this socket cannot do better, so subscribing again is no use.
    for (const sub of this.subs.values()) {
      if (sub.sink.error) sub.sink.error([{ message: reason, code, final: true }]);
    }
    this.onState({ state: "refused", reason, code });
  }

  /** Close the socket as broken; onclose does not run for it, so retry from here. */
  drop(reason) {
    const socket = this.socket;
    this.close();
    if (socket && this.subs.size) this.scheduleRetry(reason, true);
  }

  scheduleRetry(reason, wasAcked = false) {
    if (this.stopped) return;
    if (wasAcked) this.attempt = 0;
    const cap = Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** this.attempt);
    const delayMs = Math.round(cap / 2 + Math.random() * (cap / 2));
    this.attempt += 1;
    this.onState({ state: "retrying", attempt: this.attempt, delayMs, reason });
    clearTimeout(this.timers.retry);
    this.timers.retry = setTimeout(() => {
      this.timers.retry = null;
      this.ensureSocket();
    }, delayMs);
  }

  /** Try now instead of waiting for the backoff (e.g. the page became visible again). */
  retryNow() {
    if (this.socket || this.stopped || !this.subs.size) return;
    clearTimeout(this.timers.retry);
    this.timers.retry = null;
    this.ensureSocket();
  }

  send(message) {
    if (this.socket && this.socket.readyState === WebSocket.OPEN) {
      this.socket.send(JSON.stringify(message));
    }
  }

  sendSubscribe(sub) {
    const { query, variables } = sub.request;
    const vars = typeof variables === "function" ? variables() : variables || {};
    this.send({ id: sub.id, type: "subscribe", payload: { query, variables: vars } });
  }

  heartbeat() {
    clearTimeout(this.timers.ping);
    this.timers.ping = setTimeout(() => {
      this.send({ type: "ping" });
      clearTimeout(this.timers.pong);
      this.timers.pong = setTimeout(() => this.drop("no pong in time"), PONG_TIMEOUT_MS);
    }, PING_EVERY_MS);
  }

  receive(data) {
    let message;
    try {
      message = parseLossless(String(data));
    } catch {
      this.drop("unreadable message");
      return;
    }
    if (!message || typeof message.type !== "string") return;
    switch (message.type) {
      case "connection_ack": {
        clearTimeout(this.timers.ack);
        const reconnected = this.everConnected;
        this.acked = true;
        this.everConnected = true;
        this.attempt = 0;
        this.onState({ state: "live" });
        for (const sub of this.subs.values()) {
          this.sendSubscribe(sub);
          if (reconnected && sub.sink.onReconnect) sub.sink.onReconnect();
        }
        this.heartbeat();
        break;
      }
      case "ping":
        this.send({ type: "pong", payload: message.payload });
        this.heartbeat();
        break;
      case "pong":
        clearTimeout(this.timers.pong);
        this.heartbeat();
        break;
      case "next": {
        this.heartbeat();
        const sub = this.subs.get(message.id);
        if (sub && sub.active && sub.sink.next) sub.sink.next(message.payload || {});
        break;
      }
      case "error": {
        const sub = this.subs.get(message.id);
        if (sub) {
          sub.active = false;
          this.subs.delete(message.id);
          const errors = Array.isArray(message.payload) ? message.payload : [message.payload];
          if (sub.sink.error) sub.sink.error(errors);
        }
        break;
      }
      case "complete": {
        const sub = this.subs.get(message.id);
        if (sub) {
          sub.active = false;
          this.subs.delete(message.id);
          if (sub.sink.complete) sub.sink.complete();
        }
        break;
      }
      default:
        break;
    }
  }
}

/** ws:// or wss:// URL of an HTTP endpoint path, following the page's scheme. */
export function websocketUrl(endpoint) {
  const url = new URL(endpoint, window.location.href);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return url.href;
}
