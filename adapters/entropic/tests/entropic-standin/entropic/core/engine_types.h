// A stand-in for entropic's own <entropic/core/engine_types.h>, reconstructed from the seed
// document (shared/seeds/entropic-StorageInterface.txt), used only to check that
// `make CONVOGRAPH_ENTROPIC_HEADERS=<dir>` compiles against an engine header instead of the
// adapter's own declaration. kStandInHeader tells the consumer which header it got.
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
    bool (*latest_delegation_for_target)(const char* target_tier, std::string& delegation_id,
                                         void* user_data) = nullptr;
    void* user_data = nullptr;
};

}  // namespace entropic
