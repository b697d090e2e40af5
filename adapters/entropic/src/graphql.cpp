#include "graphql.hpp"

#include "exact_json.hpp"

#include <random>
#include <thread>

namespace convograph::detail {
namespace {

constexpr std::size_t kMaxBodyInReason = 200;

// The server's own error message in an error response, else the start of the body.
std::string http_reason(const HttpResult& r) {
    std::string reason = "HTTP " + std::to_string(r.status);
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

void sleep_backoff(std::chrono::milliseconds base, int retry_number) {
    if (base.count() <= 0) {
        return;
    }
    const long long full = base.count() << std::min(retry_number - 1, 10);
    thread_local std::minstd_rand jitter{std::random_device{}()};
    // Between half and all of the doubled backoff, so that threads failing together spread.
    std::uniform_int_distribution<long long> pick(full / 2, full);
    std::this_thread::sleep_for(std::chrono::milliseconds(pick(jitter)));
}

// One attempt's answer. Sets `retry` when another attempt may help and is allowed.
Outcome interpret(const HttpResult& r, Repeat repeat, bool& retry, bool& maybe_applied) {
    Outcome out;
    retry = false;
    maybe_applied = false;
    if (r.code != CURLE_OK) {
        out.error = std::string(r.maybe_sent ? "request failed: " : "no connection: ") + r.error;
        retry = !r.maybe_sent || repeat == Repeat::Safe;
        maybe_applied = r.maybe_sent;
        return out;
    }
    if (r.status != 200) {
        out.error = http_reason(r);
        retry = retryable_status(r.status) && repeat == Repeat::Safe;
        maybe_applied = r.status >= 500;
        return out;
    }
    json parsed = parse_exact(r.body);  // a stored message's numbers as they were sent
    if (!parsed.is_object()) {
        out.error = "the server's answer is not a JSON object";
        return out;
    }
    if (parsed.contains("errors") && parsed["errors"].is_array() && !parsed["errors"].empty()) {
        out.errors = parsed["errors"];
        const json& first = out.errors[0];
        out.error = "GraphQL error: ";
        out.error += first.is_object() && first.contains("message") && first["message"].is_string()
                         ? first["message"].get<std::string>()
                         : first.dump();
        return out;
    }
    if (!parsed.contains("data") || !parsed["data"].is_object()) {
        out.error = "the server's answer has no `data`";
        return out;
    }
    out.ok = true;
    out.data = std::move(parsed["data"]);
    return out;
}

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

GraphQL::GraphQL(const std::string& url, const std::string& token,
                 std::chrono::milliseconds connect_timeout, std::chrono::milliseconds timeout,
                 RetryPolicy retry)
    : http_(url, token, connect_timeout, timeout), retry_(retry) {}

Outcome GraphQL::run(const std::string& body, Repeat repeat) const {
    bool maybe_applied_before = false;
    for (int attempt = 1;; ++attempt) {
        const HttpResult r = http_.post(body);
        bool retry = false;
        bool maybe_applied = false;
        Outcome out = interpret(r, repeat, retry, maybe_applied);
        out.attempts = attempt;
        out.earlier_attempt_maybe_applied = maybe_applied_before;
        if (out.ok || !retry || attempt >= retry_.max_attempts) {
            if (!out.ok && attempt > 1) {
                out.error += " (" + std::to_string(attempt) + " attempts)";
            }
            return out;
        }
        maybe_applied_before = maybe_applied_before || maybe_applied;
        sleep_backoff(retry_.backoff, attempt);
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
