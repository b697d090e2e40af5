#include "graphql.hpp"

#include "exact_json.hpp"

#include <algorithm>
#include <random>
#include <thread>

namespace convograph::detail {
namespace {

constexpr std::size_t kMaxBodyInReason = 200;
constexpr const char* kNotRepeated = "; not repeated";

// Where a redirect points, else the server's own error message in an error response, else the
// start of the body.
std::string http_reason(const HttpResult& r) {
    std::string reason = "HTTP " + std::to_string(r.status);
    if (!r.location.empty()) {
        std::string where = r.location.substr(0, kMaxBodyInReason);
        where.erase(std::remove_if(where.begin(), where.end(),
                                   [](char ch) {
                                       const auto byte = static_cast<unsigned char>(ch);
                                       return byte < 0x20 || byte == 0x7F;
                                   }),
                    where.end());
        return reason + ": redirected to " + where +
               " (not followed: configure the storage with that URL)";
    }
    const json parsed = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    if (parsed.is_object() && parsed.contains("errors") && parsed["errors"].is_array() &&
        !parsed["errors"].empty() && parsed["errors"][0].is_object() &&
        parsed["errors"][0].contains("message") && parsed["errors"][0]["message"].is_string()) {
        return reason + ": " + parsed["errors"][0]["message"].get<std::string>();
    }
    if (!r.body.empty()) {
        reason += ": " + r.body.substr(0, kMaxBodyInReason);
    }
    return reason;
}

bool retryable_status(long status) { return status == 408 || status == 429 || status >= 500; }

// Whether every error of a GraphQL answer is convograph's DATABASE_UNAVAILABLE (the database
// went away: retry), and whether one of them has a `path` (a field failed: the operation had
// started, and a write may have been done).
struct Unavailable {
    bool all = false;
    bool ran = false;
};
Unavailable unavailable(const json& parsed) {
    Unavailable u;
    if (!parsed.is_object() || !parsed.contains("errors") || !parsed["errors"].is_array() ||
        parsed["errors"].empty()) {
        return u;
    }
    for (const json& e : parsed["errors"]) {
        if (!e.is_object() || !e.contains("extensions") || !e["extensions"].is_object() ||
            !e["extensions"].contains("code") ||
            e["extensions"]["code"] != "DATABASE_UNAVAILABLE") {
            return u;
        }
        u.ran = u.ran || e.contains("path");
    }
    // An operation that ran has `data` (under application/json, null when a non-null field
    // failed) or an error with a `path`; one stopped before it started has neither.
    u.ran = u.ran || (parsed.contains("data") && !parsed["data"].is_null());
    u.all = true;
    return u;
}

// convograph's own 503 for a request stopped before execution (its token's check found the
// database away): no `data`, and every error DATABASE_UNAVAILABLE without a `path`. A 503
// from anything else (a gateway) may follow a request that ran.
bool stopped_before_execution(const HttpResult& r) {
    if (r.status != 503) {
        return false;
    }
    const json parsed = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
    const Unavailable u = unavailable(parsed);
    return u.all && !u.ran && !parsed.contains("data");
}

// One attempt's answer, and what it says about another attempt.
struct Attempt {
    Outcome out;
    bool transient = false;      // another attempt may succeed (timeout, cut, 408, 429, 5xx)
    bool ran_nothing = false;    // the server certainly did not run it: any request may repeat
    bool maybe_applied = false;  // the server may have run it although the call failed
    std::chrono::seconds retry_after{0};  // how long the server asks to be left alone
};

Attempt interpret(const HttpResult& r) {
    Attempt a;
    Outcome& out = a.out;
    if (r.code != CURLE_OK) {
        out.error = std::string(r.maybe_sent ? "request failed: " : "no connection: ") + r.error;
        a.transient = true;
        a.ran_nothing = !r.maybe_sent;
        a.maybe_applied = r.maybe_sent;
        return a;
    }
    if (r.status != 200) {
        out.error = http_reason(r);
        a.transient = retryable_status(r.status);
        // A rate limit runs nothing of a request it refuses (429 and its Retry-After).
        a.ran_nothing = r.status == 429 || stopped_before_execution(r);
        a.maybe_applied = r.status >= 500 && !a.ran_nothing;
        a.retry_after = std::chrono::seconds(r.retry_after_s);
        return a;
    }
    json parsed = parse_exact(r.body);  // a stored message's numbers as they were sent
    if (!parsed.is_object()) {
        out.error = "the server's answer is not a JSON object";
        return a;
    }
    if (parsed.contains("errors") && parsed["errors"].is_array() && !parsed["errors"].empty()) {
        out.errors = parsed["errors"];
        const json& first = out.errors[0];
        out.error = "GraphQL error: ";
        out.error += first.is_object() && first.contains("message") && first["message"].is_string()
                         ? first["message"].get<std::string>()
                         : first.dump();
        // The database went away (HTTP 200 under application/json): another attempt may find
        // it back. Before the operation started nothing ran, and any call may be repeated;
        // during it, a write may have been done, and only a call safe to repeat is.
        const Unavailable u = unavailable(parsed);
        if (u.all) {
            a.transient = true;
            a.ran_nothing = !u.ran;
            a.maybe_applied = u.ran;
        }
        return a;
    }
    if (!parsed.contains("data") || !parsed["data"].is_object()) {
        out.error = "the server's answer has no `data`";
        return a;
    }
    out.ok = true;
    out.data = std::move(parsed["data"]);
    return a;
}

std::string seconds_text(std::chrono::seconds s) { return std::to_string(s.count()) + " s"; }

std::string join_path(const json& field) {
    if (!field.is_array()) {
        return {};
    }
    std::string path;
    for (const json& part : field) {
        if (!path.empty()) {
            path += '.';
        }
        path += part.is_string() ? part.get<std::string>() : part.dump();
    }
    return path;
}

}  // namespace

std::chrono::milliseconds backoff(std::chrono::milliseconds base, int retry_number,
                                  int max_doublings) {
    if (base.count() <= 0) {
        return std::chrono::milliseconds(0);
    }
    const long long full = base.count() << std::clamp(retry_number - 1, 0, max_doublings);
    thread_local std::minstd_rand jitter{std::random_device{}()};
    std::uniform_int_distribution<long long> pick(full / 2, full);
    return std::chrono::milliseconds(pick(jitter));
}

GraphQL::GraphQL(const std::string& url, const std::string& token,
                 std::chrono::milliseconds connect_timeout, RetryPolicy retry)
    : http_(url, token, connect_timeout, retry.attempt_timeout), retry_(retry) {}

Outcome GraphQL::run(const std::string& body, Repeat repeat) const {
    using std::chrono::milliseconds;
    const auto began = std::chrono::steady_clock::now();
    const milliseconds budget = retry_.attempt_timeout * retry_.max_attempts;
    const Connection connection = repeat == Repeat::Safe ? Connection::Reuse : Connection::Fresh;
    bool maybe_applied_before = false;
    for (int attempt = 1;; ++attempt) {
        Attempt a = interpret(http_.post(body, connection));
        Outcome out = std::move(a.out);
        out.attempts = attempt;
        out.earlier_attempt_maybe_applied = maybe_applied_before;
        if (out.ok) {
            return out;
        }
        // Said when the call gives up on a write: the caller must not take false for "not
        // stored".
        const bool may_have_stored =
            repeat != Repeat::Safe && (maybe_applied_before || a.maybe_applied);
        const auto give_up = [&](const std::string& why) {
            if (attempt > 1) {
                out.error += " (" + std::to_string(attempt) + " attempts)";
            }
            out.error += why;
            if (may_have_stored) {
                out.error += why == kNotRepeated ? ": " : "; ";
                out.error += "the write may have been stored";
            }
            return out;
        };
        const bool repeatable = a.ran_nothing || (a.transient && repeat != Repeat::IfNotSent);
        if (!repeatable) {
            return give_up(a.transient ? kNotRepeated : "");
        }
        if (attempt >= retry_.max_attempts) {
            return give_up("");
        }
        // What the server asks (Retry-After), plus the backoff, so that threads refused
        // together do not come back together.
        const milliseconds wait = a.retry_after + backoff(retry_.backoff, attempt);
        if (a.retry_after.count() > 0) {
            const auto elapsed = std::chrono::duration_cast<milliseconds>(
                std::chrono::steady_clock::now() - began);
            if (elapsed + wait + retry_.attempt_timeout > budget) {
                return give_up("; not repeated: the server asks to wait " +
                               seconds_text(a.retry_after) + ", past this call's budget (" +
                               std::to_string(retry_.max_attempts) + " attempts of " +
                               std::to_string(retry_.attempt_timeout.count()) + " ms)");
            }
        }
        maybe_applied_before = maybe_applied_before || a.maybe_applied;
        std::this_thread::sleep_for(wait);
    }
}

std::string request_body(const char* query, const json& variables) {
    return json{{"query", query}, {"variables", variables}}.dump();
}

Payload payload_of(const Outcome& outcome, const char* field) {
    Payload p;
    if (!outcome.ok) {
        p.why = outcome.error;
        return p;
    }
    const json& data = outcome.data;
    if (!data.contains(field) || !data[field].is_object()) {
        p.why = std::string("the answer has no `") + field + "` payload";
        return p;
    }
    const json& payload = data[field];
    if (payload.contains("userErrors") && payload["userErrors"].is_array() &&
        !payload["userErrors"].empty()) {
        for (const json& e : payload["userErrors"]) {
            const std::string code = e.value("code", std::string("ERROR"));
            const std::string path = join_path(e.value("field", json()));
            if (!p.why.empty()) {
                p.why += "; ";
            }
            p.why += code;
            if (!path.empty()) {
                p.why += " (" + path + ")";
            }
            p.why += ": " + e.value("message", std::string());
            p.codes.push_back(code);
            p.fields.push_back(path);
        }
        return p;
    }
    p.ok = true;
    p.value = payload;
    return p;
}

}  // namespace convograph::detail
