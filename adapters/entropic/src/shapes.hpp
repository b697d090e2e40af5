// convograph's GraphQL answers in the JSON shapes entropic's engine parses.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace convograph::detail {

using json = nlohmann::ordered_json;

// object[key] when `object` is an object holding `key`, else a null value. (nlohmann's
// const operator[] on a missing key is undefined behaviour; an answer is never trusted.)
const json& member(const json& object, const char* key) noexcept;

// "COMPLETED" -> "completed": entropic's own backend stores statuses in lower case.
std::string lower_status(const std::string& status);

// A transcript for the engine: every message an object whose `content` is a string. A string
// stays as it is, a missing or null content becomes "", any other value its JSON text.
// Every other field is kept. Throws std::invalid_argument on an entry that is not an object.
json engine_messages(const json& transcript);

// load_delegation_with_messages' object from `delegation { ... }` (queries::kLoadDelegation).
// Throws std::invalid_argument when targetTier is empty (the engine would refuse it).
json load_result(const json& delegation);

// The followup tool's array from `searchDelegations { ... }` (queries::kSearchDelegations).
json followup_entries(const json& delegations);

}  // namespace convograph::detail
