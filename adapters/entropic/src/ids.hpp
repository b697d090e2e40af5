// Random UUIDv4 strings, used as idempotency keys.
#pragma once

#include <string>

namespace convograph::detail {

// "xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx" from 122 bits of std::random_device.
std::string uuid4();

}  // namespace convograph::detail
