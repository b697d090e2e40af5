// One line per failed callback, to the configured sink or stderr.
#pragma once

#include <functional>
#include <mutex>
#include <string>

namespace convograph::detail {

class Logger {
public:
    explicit Logger(std::function<void(const std::string&)> sink);

    // "convograph-entropic: <what>: <why>", control characters replaced, at most a few hundred
    // characters. Never throws; a sink that throws is ignored.
    void line(const char* what, const char* why) const noexcept;
    void line(const char* what, const std::string& why) const noexcept;

private:
    std::function<void(const std::string&)> sink_;
    mutable std::mutex mutex_;
};

}  // namespace convograph::detail
