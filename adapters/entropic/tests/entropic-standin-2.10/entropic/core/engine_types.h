// A stand-in for <entropic/core/engine_types.h> of entropic v2.10.4, whose StorageInterface
// ends at load_delegation_with_messages: latest_delegation_for_target came with v2.13.0
// (gh#162; the seed document's header is tests/entropic-standin). Used only to check that
// `make CONVOGRAPH_ENTROPIC_HEADERS=<dir>` compiles against an engine of that release.
// kStandInHeader tells the consumer which header it got.
#pragma once

#include <string>

namespace entropic {

inline constexpr bool kStandInHeader = true;

struct StorageInterface {
    bool (*create_conversation)(const char* title, std::string& conversation_id,
                                void* user_data) = nullptr;
    bool (*save_snapshot)(const char* conversation_id, const char* messages_json,
                          void* user_data) = nullptr;
    bool (*create_delegation)(const char* parent_id, const char* delegating_tier,
                              const char* target_tier, const char* task, int max_turns,
                              std::string& delegation_id, std::string& child_conversation_id,
                              void* user_data) = nullptr;
    bool (*complete_delegation)(const char* delegation_id, const char* status,
                                const char* summary, void* user_data) = nullptr;
    bool (*save_conversation)(const char* conversation_id, const char* messages_json,
                              void* user_data) = nullptr;
    bool (*load_delegation_with_messages)(const char* delegation_id, std::string& result_json,
                                          void* user_data) = nullptr;
    void* user_data = nullptr;
};

}  // namespace entropic
