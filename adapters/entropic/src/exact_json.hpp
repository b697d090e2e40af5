// JSON read from the server and written to the engine with every integer as it was sent.
//
// nlohmann reads an integer past 64 bits as a double: 123456789012345678901234567890 would
// reach the engine as 1.2345678901234568e+29. The server keeps such numbers exactly (they
// are a tool's arguments, an id from another system), and so must the adapter: parse_exact
// keeps each one as a marked string, and exact_dump writes it back as the number it was.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace convograph::detail {

// The parsed text, integers past 64 bits kept as marked strings; a discarded value when the
// text is not JSON.
nlohmann::ordered_json parse_exact(const std::string& text);

// value.dump(), with each integer parse_exact marked written back as its digits.
std::string exact_dump(const nlohmann::ordered_json& value);

// Whether `value` is an integer parse_exact marked (a string to nlohmann, a number in JSON).
bool is_marked_integer(const nlohmann::ordered_json& value);

}  // namespace convograph::detail
