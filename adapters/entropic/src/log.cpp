#include "log.hpp"

#include <cstdio>
#include <utility>

namespace convograph::detail {
namespace {

constexpr std::size_t kMaxReason = 400;

// Server messages can echo input back: keep the line short and on one line.
std::string one_line(const char* what, const char* why) {
    std::string out = "convograph-entropic: ";
    out += what;
    out += ": ";
    std::string reason = why != nullptr ? why : "(no reason)";
    if (reason.size() > kMaxReason) {
        std::size_t cut = kMaxReason;
        while (cut > 0 && (static_cast<unsigned char>(reason[cut]) & 0xC0) == 0x80) {
            --cut;  // do not split a UTF-8 sequence
        }
        reason.resize(cut);
        reason += "...";
    }
    for (char& c : reason) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
            c = ' ';
        }
    }
    out += reason;
    return out;
}

}  // namespace

Logger::Logger(std::function<void(const std::string&)> sink) : sink_(std::move(sink)) {}

void Logger::line(const char* what, const char* why) const noexcept {
    try {
        const std::string text = one_line(what, why);
        std::lock_guard<std::mutex> lock(mutex_);
        if (sink_) {
            sink_(text);
        } else {
            std::fprintf(stderr, "%s\n", text.c_str());
        }
    } catch (...) {
        // Out of memory, or the sink threw: nothing sensible is left to report it to.
        std::fputs("convograph-entropic: (a log line was lost)\n", stderr);
    }
}

void Logger::line(const char* what, const std::string& why) const noexcept {
    line(what, why.c_str());
}

}  // namespace convograph::detail
