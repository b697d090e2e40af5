// Built with -DCONVOGRAPH_ENTROPIC_HEADERS against each stand-in (of the seed's header, and of
// v2.10.4's, without latest_delegation_for_target): it compiles only when
// <convograph/entropic.hpp> brought in the engine's header (kStandInHeader), and it links the
// library built the same way. Without a server every callback must fail cleanly: the URL
// points at a port nobody listens on.
#include <cstdio>
#include <string>

#include "convograph/entropic.hpp"

static_assert(entropic::kStandInHeader, "the engine's own header was not used");

// Whether latest_delegation_for_target is filled in: true for a header without the member
// (entropic before v2.13.0), which the library must compile against all the same.
template <class S>
auto latest_filled(const S& storage, int)
    -> decltype(storage.latest_delegation_for_target != nullptr) {
    return storage.latest_delegation_for_target != nullptr;
}
template <class S>
bool latest_filled(const S&, long) {
    return true;
}

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
    const bool latest = latest_filled(storage, 0);
    std::string id;
    const bool created = storage.create_conversation("session", id, storage.user_data);
    convograph::destroy_storage_interface(storage);
    const bool cleared = storage.create_conversation == nullptr && storage.user_data == nullptr;
    std::printf("{\"created\": %s, \"log_lines\": %d, \"cleared\": %s, \"latest\": %s}\n",
                created ? "true" : "false", lines, cleared ? "true" : "false",
                latest ? "true" : "false");
    return !created && lines == 1 && cleared && latest ? 0 : 1;
}
