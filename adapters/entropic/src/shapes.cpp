#include "shapes.hpp"

#include "exact_json.hpp"

#include <cctype>
#include <stdexcept>

namespace convograph::detail {
namespace {

// The id of a nested {id} object, or null.
json id_of(const json& object, const char* key) {
    if (object.contains(key) && object[key].is_object() && object[key].contains("id")) {
        return object[key]["id"];
    }
    return nullptr;
}

json field_or_null(const json& object, const char* key) {
    return object.contains(key) ? object[key] : json();
}

}  // namespace

const json& member(const json& object, const char* key) noexcept {
    static const json null_value;
    if (!object.is_object()) {
        return null_value;
    }
    const auto found = object.find(key);
    return found == object.end() ? null_value : *found;
}

std::string lower_status(const std::string& status) {
    std::string out = status;
    for (char& c : out) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return out;
}

json engine_messages(const json& transcript) {
    json out = json::array();
    if (!transcript.is_array()) {
        throw std::invalid_argument("the child transcript is not a JSON array");
    }
    for (const json& message : transcript) {
        if (!message.is_object()) {
            throw std::invalid_argument("a transcript entry is not a JSON object");
        }
        json copy = message;
        auto content = copy.find("content");
        if (content == copy.end() || content->is_null()) {
            copy["content"] = "";
        } else if (!content->is_string() || is_marked_integer(*content)) {
            // An integer past 64 bits is a number too, though kept as a marked string.
            *content = exact_dump(*content);
        }
        out.push_back(std::move(copy));
    }
    return out;
}

json load_result(const json& d) {
    const std::string target = d.value("targetTier", std::string());
    if (target.empty()) {
        throw std::invalid_argument("target_tier missing in storage");
    }
    const json& child = d.at("childConversation");
    const json status = d.contains("status") && d["status"].is_string()
                            ? json(lower_status(d["status"].get<std::string>()))
                            : json();
    return json{
        {"delegation_id", d.at("id")},
        {"parent_conversation_id", id_of(d, "parentConversation")},
        {"child_conversation_id", child.at("id")},
        {"delegating_tier", field_or_null(d, "delegatingTier")},
        {"target_tier", target},
        {"task", field_or_null(d, "task")},
        {"status", status},
        {"result_summary", field_or_null(d, "summary")},
        {"max_turns", field_or_null(d, "maxTurns")},
        {"created_at", field_or_null(d, "createdAt")},
        {"completed_at", field_or_null(d, "completedAt")},
        {"messages", engine_messages(child.at("transcript"))},
        {"conversation",
         {{"id", child.at("id")},
          {"title", field_or_null(child, "title")},
          {"created_at", field_or_null(child, "createdAt")},
          {"updated_at", field_or_null(child, "updatedAt")},
          {"metadata", field_or_null(child, "metadata")}}},
    };
}

json followup_entries(const json& delegations) {
    json out = json::array();
    if (!delegations.is_array()) {
        throw std::invalid_argument("searchDelegations is not a JSON array");
    }
    for (const json& d : delegations) {
        const json status = d.contains("status") && d["status"].is_string()
                                ? json(lower_status(d["status"].get<std::string>()))
                                : json();
        out.push_back(json{
            {"id", d.at("id")},
            {"parent_conversation_id", id_of(d, "parentConversation")},
            {"child_conversation_id", id_of(d, "childConversation")},
            {"delegating_tier", field_or_null(d, "delegatingTier")},
            {"target_tier", field_or_null(d, "targetTier")},
            {"task", field_or_null(d, "task")},
            {"status", status},
            {"result_summary", field_or_null(d, "summary")},
            {"completed_at", field_or_null(d, "completedAt")},
        });
    }
    return out;
}

}  // namespace convograph::detail
