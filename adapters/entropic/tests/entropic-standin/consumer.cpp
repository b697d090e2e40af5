// Built with -DCONVOGRAPH_ENTROPIC_HEADERS against the stand-in: it compiles only when
// <convograph/entropic.hpp> brought in the engine's header (kStandInHeader), and it links the
// library built the same way. Without a server every callback must fail cleanly: the URL
// points at a port nobody listens on.
#include <cstdio>
#include <string>

#include "convograph/entropic.hpp"

static_assert(entropic::kStandInHeader, "the engine's own header was not used");

int main() {
    {  // README.md's lines, as written there
        const std::string token = "cvg_none";
        entropic::StorageInterface storage =
            convograph::make_storage_interface({"http://127.0.0.1:8000/graphql", token});
        convograph::destroy_storage_interface(storage);  // at shutdown, once no callback runs
    }
    convograph::Config config;
    config.url = "http://127.0.0.1:9/graphql";
    config.token = "cvg_none";
    config.max_attempts = 1;
    int lines = 0;
    config.log = [&lines](const std::string&) { ++lines; };
    entropic::StorageInterface storage = convograph::make_storage_interface(config);
    std::string id;
    const bool created = storage.create_conversation("session", id, storage.user_data);
    convograph::destroy_storage_interface(storage);
    const bool cleared = storage.create_conversation == nullptr && storage.user_data == nullptr;
    std::printf("{\"created\": %s, \"log_lines\": %d, \"cleared\": %s}\n",
                created ? "true" : "false", lines, cleared ? "true" : "false");
    return !created && lines == 1 && cleared ? 0 : 1;
}
