#include "support.hpp"

#include <cstdio>
#include <cstdlib>
#include <stdexcept>

#include "graphql.hpp"
#include "ids.hpp"

namespace flow {

bool Checks::check(bool ok, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    ++count_;
    if (!ok) {
        failures_.push_back(what);
        std::fprintf(stderr, "CHECK FAILED: %s\n", what.c_str());
    }
    return ok;
}

int Checks::count() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return count_;
}

std::vector<std::string> Checks::failures() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return failures_;
}

std::function<void(const std::string&)> LogCapture::sink() {
    return [this](const std::string& line) {
        std::lock_guard<std::mutex> lock(mutex_);
        lines_.push_back(line);
        std::fprintf(stderr, "[adapter log] %s\n", line.c_str());
    };
}

std::size_t LogCapture::size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_.size();
}

std::string LogCapture::last() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return lines_.empty() ? std::string() : lines_.back();
}

Storage::Storage(convograph::Config config) : log_(std::make_shared<LogCapture>()) {
    config.log = log_->sink();
    api_ = convograph::make_storage_interface(config);
}

Storage::~Storage() { convograph::destroy_storage_interface(api_); }

struct Probe::Impl {
    convograph::detail::GraphQL gql;
};

Probe::Probe(std::string url, std::string token)
    : impl_(new Impl{convograph::detail::GraphQL(
          url, token, std::chrono::seconds(5),
          convograph::detail::RetryPolicy{1, {}, std::chrono::seconds(30)})}) {}

Probe::~Probe() = default;

json Probe::operator()(const char* query, const json& variables) const {
    const auto out = impl_->gql.run(convograph::detail::request_body(query, variables),
                                    convograph::detail::Repeat::IfNotSent);
    if (!out.ok) {
        throw std::runtime_error(std::string("probe failed: ") + out.error + " for " + query);
    }
    return out.data;
}

double ms_since(std::chrono::steady_clock::time_point start) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
        .count();
}

std::string env_or(const char* name, const char* fallback) {
    const char* value = std::getenv(name);
    return value != nullptr && *value != '\0' ? value : fallback;
}

std::string random_tag() { return convograph::detail::uuid4().substr(0, 8); }

}  // namespace flow
