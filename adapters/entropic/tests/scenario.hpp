// The parts of the test program, each driving the callbacks the way entropic's engine does.
#pragma once

#include <string>

#include "support.hpp"

namespace flow {

struct Context {
    Checks& checks;
    Probe& probe;
    convograph::Config config;      // the server's URL and token; log set per storage
    entropic::StorageInterface& storage;  // the engine's storage for the whole run
    const LogCapture& log;          // its log lines
    std::string tag;                // makes tiers and summaries unique to this run
    json& summary;                  // printed on stdout at the end

    bool check(bool ok, const std::string& what) { return checks.check(ok, what); }
    // Records `messages` as stored in `conversation_id` (appended in this order).
    void stored(const std::string& conversation_id, const json& messages);
    void created_root(const std::string& conversation_id);
};

// create_conversation, save_conversation, save_snapshot, create/complete_delegation,
// load_delegation_with_messages, resume, latest_delegation_for_target, followup, and the
// inputs the adapter must refuse.
void run_engine_flow(Context& ctx);

// Delegations and sessions made from several threads at once through one storage.
void run_threads(Context& ctx);

// The server down or hanging, a revoked token, a body over the server's limit, answers lost
// after the server did the work (retries must not duplicate), a 503 from a gateway.
void run_faults(Context& ctx);

}  // namespace flow
