// The end-to-end test program of the entropic adapter, run against a live convograph server.
//
//   CONVOGRAPH_URL=http://127.0.0.1:8000/graphql CONVOGRAPH_TOKEN=cvg_... build/engine_flow
//
// Optional: CONVOGRAPH_REVOKED_TOKEN (a token that was revoked), CONVOGRAPH_MAX_BODY_BYTES
// (the server's body limit, to provoke a 413). Prints a JSON summary of what it created on
// stdout, diagnostics on stderr; exits 1 when a check failed, 2 on a usage error.
#include <cstdio>
#include <exception>

#include "scenario.hpp"

namespace flow {

void Context::stored(const std::string& conversation_id, const json& messages) {
    json& sent = summary["sent"];
    if (!sent.contains(conversation_id)) {
        sent[conversation_id] = json::array();
    }
    for (const json& m : messages) {
        sent[conversation_id].push_back(m);
    }
}

void Context::created_root(const std::string& conversation_id) {
    summary["root_conversations"].push_back(conversation_id);
}

}  // namespace flow

int main() {
    using namespace flow;
    const std::string url = env_or("CONVOGRAPH_URL", "");
    const std::string token = env_or("CONVOGRAPH_TOKEN", "");
    if (url.empty() || token.empty()) {
        std::fprintf(stderr, "set CONVOGRAPH_URL and CONVOGRAPH_TOKEN (a WRITE token)\n");
        return 2;
    }
    json summary = {{"url", url},
                    {"sent", json::object()},
                    {"root_conversations", json::array()},
                    {"skipped", json::array()},
                    {"measured_ms", json::object()}};
    Checks checks;
    try {
        convograph::Config config;
        config.url = url;
        config.token = token;
        config.connect_timeout = std::chrono::seconds(2);
        config.timeout = std::chrono::seconds(15);
        Storage storage(config);
        Probe probe(url, token);
        Context ctx{checks, probe, config, storage.api(), storage.log(), random_tag(), summary};
        summary["tag"] = ctx.tag;
        run_engine_flow(ctx);
        run_threads(ctx);
        run_faults(ctx);
    } catch (const std::exception& e) {
        checks.check(false, std::string("the test program stopped: ") + e.what());
    }
    const auto failures = checks.failures();
    summary["checks"] = checks.count();
    summary["failures"] = failures;
    summary["ok"] = failures.empty();
    std::printf("%s\n", summary.dump(2).c_str());
    std::fprintf(stderr, "%d checks, %zu failed\n", checks.count(), failures.size());
    return failures.empty() ? 0 : 1;
}
