// UTF-8 validation of the C strings the engine hands over.
#pragma once

#include <cstddef>
#include <string_view>

namespace convograph::detail {

// The offset of the first byte that is not part of well-formed UTF-8 (RFC 3629: no overlong
// forms, no surrogates, nothing above U+10FFFF), or npos when the text is valid.
std::size_t invalid_utf8_at(std::string_view text) noexcept;

}  // namespace convograph::detail
