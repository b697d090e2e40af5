// entropic::StorageInterface, the engine's storage callbacks (entropic v2.10.4 plus
// latest_delegation_for_target from the seed document).
//
// Built with CONVOGRAPH_ENTROPIC_HEADERS=<dir> (make variable or environment variable), the
// Makefile adds -I<dir> -DCONVOGRAPH_ENTROPIC_HEADERS and entropic's own header is used.
// Code that includes this header must then be compiled with the same macro. Without it, the
// declaration below is layout-compatible with entropic's: the same members in the same order
// (engine_types.h lines 612, 622, 637, 653, 664, 681, 695, 700), each defaulting to nullptr.
#pragma once

#if defined(CONVOGRAPH_ENTROPIC_HEADERS)
#include <entropic/core/engine_types.h>
#else
#include <string>

namespace entropic {

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
#endif
