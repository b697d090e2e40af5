// What user_data points at: the configured GraphQL client shared by every callback.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "convograph/entropic.hpp"
#include "graphql.hpp"
#include "log.hpp"

namespace convograph::detail {

struct Client {
    static constexpr std::uint64_t kMagic = 0x63766772656e7431ULL;  // "cvgrent1"

    explicit Client(const Config& config);
    ~Client() { magic = 0; }

    std::uint64_t magic = kMagic;
    int max_attempts;  // Config::max_attempts: also how many rounds an append makes
    // max_attempts x Config::timeout: how long an append goes on re-reading a version that
    // moved with no message added.
    std::chrono::milliseconds budget;
    // Config::retry_backoff: also the wait before an append reads the version again after a
    // second CONFLICT with no message added, doubled for each further one, at most
    // kRereadDoublings times (four times retry_backoff), with jitter.
    std::chrono::milliseconds retry_backoff;
    static constexpr int kRereadDoublings = 2;
    Logger log;
    GraphQL gql;

    // Whether the server accepts CreateDelegationInput.idempotencyKey: learnt from the first
    // createDelegation that the server validates.
    enum : int { kKeysUnknown = 0, kKeysAccepted = 1, kKeysRefused = 2 };
    std::atomic<int> delegation_keys{kKeysUnknown};
};

// The client behind user_data, or nullptr when user_data is not one.
Client* client_from(void* user_data) noexcept;

}  // namespace convograph::detail
