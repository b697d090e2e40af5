// GraphQL over HTTP POST with the retry policy of the adapter.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "http.hpp"

namespace convograph::detail {

// Answers keep the order of their object keys (a stored message reads back as it was sent).
using json = nlohmann::ordered_json;

// When an attempt may be repeated. Whatever the kind, a request the server certainly did not
// run is repeated: one that never left (no connection), one refused with 429 (a rate limit runs
// nothing), one answered 503 by convograph's own check before execution.
enum class Repeat {
    // Also after a timeout, a cut answer, 408 or 5xx: running it twice does no harm (a read, a
    // create with an idempotency key). Its connection may be reused.
    Safe,
    // Repeated as Safe, but each attempt over a connection of its own, so that libcurl never
    // re-sends it unseen: the caller reconciles a repeat's refusal (CONFLICT over an expected
    // version, INVALID_TRANSITION) using earlier_attempt_maybe_applied, which must then count
    // every attempt that may have reached the server.
    Reconciled,
    // Not repeated once the server may have run it (it would store twice), and never re-sent by
    // libcurl: each attempt over a connection of its own.
    IfNotSent,
};

struct Outcome {
    bool ok = false;        // HTTP 200, a JSON object, no GraphQL `errors`
    json data;    // the response's `data` when ok
    json errors;  // the GraphQL `errors` array when the server sent one
    std::string error;      // one-line reason when not ok
    int attempts = 0;
    // An earlier attempt may have been executed by the server (its answer was lost).
    bool earlier_attempt_maybe_applied = false;
};

struct RetryPolicy {
    int max_attempts = 3;
    std::chrono::milliseconds backoff{100};
    // One attempt's timeout. A call's attempts, waits included, end within max_attempts of
    // them (plus the backoffs): a Retry-After that would not leave room for one more attempt
    // is not waited for.
    std::chrono::milliseconds attempt_timeout{10000};
};

class GraphQL {
public:
    // retry.attempt_timeout is the HTTP timeout of each attempt.
    GraphQL(const std::string& url, const std::string& token,
            std::chrono::milliseconds connect_timeout, RetryPolicy retry);

    // POSTs `body` (a complete {"query", "variables"} document). Throws only std::bad_alloc.
    Outcome run(const std::string& body, Repeat repeat) const;

private:
    HttpClient http_;
    RetryPolicy retry_;
};

// The n-th retry's backoff (n from 1): between half and all of `base` doubled (n - 1) times,
// at most `max_doublings` times, so that threads failing together spread.
std::chrono::milliseconds backoff(std::chrono::milliseconds base, int retry_number,
                                  int max_doublings = 10);

// {"query": query, "variables": variables}. Throws json::type_error on invalid UTF-8.
std::string request_body(const char* query, const json& variables);

// A mutation's payload `data[field]` when it has no userErrors; else the reason, and the
// userError codes.
struct Payload {
    bool ok = false;
    json value;
    std::string why;
    std::vector<std::string> codes;
    std::vector<std::string> fields;  // each userError's field path, joined by dots
};
Payload payload_of(const Outcome& outcome, const char* field);

}  // namespace convograph::detail
