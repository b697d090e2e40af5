// convograph storage for the entropic engine: an entropic::StorageInterface whose callbacks
// call a convograph server over GraphQL (HTTP POST, bearer token).
//
//     convograph::Config config;
//     config.url = "http://127.0.0.1:8000/graphql";
//     config.token = std::getenv("CONVOGRAPH_TOKEN");
//     entropic::StorageInterface storage = convograph::make_storage_interface(config);
//     ...  // hand `storage` to the engine; its callbacks may run on several threads
//     convograph::destroy_storage_interface(storage);  // once no callback is running
//
// Every callback catches everything: it returns false and logs one line on a failure and
// never throws.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "convograph/entropic_types.hpp"

namespace convograph {

struct Config {
    // The GraphQL endpoint, e.g. "http://127.0.0.1:8000/graphql". A URL without a path
    // ("http://host:8000" or "http://host:8000/") gets "/graphql" appended.
    std::string url;
    // A bearer token with WRITE scope (`convograph token create ... --scope write`).
    std::string token;
    // Per attempt: establishing the connection, and the whole request.
    std::chrono::milliseconds connect_timeout{2000};
    std::chrono::milliseconds timeout{10000};
    // Attempts per request (1 = no retry). Every request is repeated when the server certainly
    // ran nothing of it: it never left (no connection), a 429 (after its Retry-After, when that
    // leaves room for one more attempt within max_attempts * timeout), convograph's
    // DATABASE_UNAVAILABLE before the operation started. After a timeout, a dropped
    // connection, 408, 5xx or a DATABASE_UNAVAILABLE during the operation, only the requests
    // safe to repeat are: reads, create_* with their idempotency key, save_conversation's
    // append (after the count of messages it read) and complete_delegation; save_snapshot
    // is not. One request takes at most max_attempts * timeout plus the backoffs.
    // save_conversation makes several: a read of the count, then the append and, after a
    // CONFLICT, the read again (and a read of the batch, when an attempt of its own may have
    // stored it), for up to max_attempts rounds in which other writers added messages; a
    // CONFLICT with no message added (a seed's replaceTranscript, which goes over the
    // version) is no round, and the batch is sent again (from the second such CONFLICT on,
    // after a retry_backoff wait doubled up to four times it) while the call is within
    // max_attempts * timeout of its start, or fewer than max_attempts times. See
    // adapters/entropic/README.md.
    int max_attempts = 3;
    // Wait before the first retry, doubled for each further one (with jitter); also between
    // the re-sends of a save_conversation whose CONFLICTs added no message.
    std::chrono::milliseconds retry_backoff{100};
    // Receives one line (no newline) per failed callback; stderr when empty. Called under a
    // mutex, so it need not be thread-safe; it must not call back into the storage.
    std::function<void(const std::string& line)> log{};
};

// The storage callbacks over convograph. Throws std::invalid_argument when url or token is
// empty, the token holds a control character (a line break read with it from a file or the
// environment), max_attempts < 1 or a timeout not positive; std::runtime_error when libcurl
// cannot be initialised.
// Copies of the returned struct share one client; destroy it once.
entropic::StorageInterface make_storage_interface(const Config& config);

// Frees what make_storage_interface put in user_data and resets every member to nullptr.
// Call it when no callback is running. Harmless on a struct it did not make (nothing is freed)
// and on one already destroyed.
void destroy_storage_interface(entropic::StorageInterface& storage) noexcept;

// The engine's `followup` tool: COMPLETED delegations whose summary contains `query`, newest
// completion first, at most `max_results` (clamped to 1..10). Fills `result_json` with a JSON
// array of {id, parent_conversation_id, child_conversation_id, delegating_tier, target_tier,
// task, status, result_summary, completed_at}. False (one log line) on a failure, or when
// `storage` was not made by make_storage_interface.
constexpr int kFollowupDefaultMaxResults = 3;
bool search_delegations(const entropic::StorageInterface& storage, const char* query,
                        int max_results, std::string& result_json) noexcept;
inline bool search_delegations(const entropic::StorageInterface& storage, const char* query,
                               std::string& result_json) noexcept {
    return search_delegations(storage, query, kFollowupDefaultMaxResults, result_json);
}

}  // namespace convograph
