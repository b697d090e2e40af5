// Shared pieces of the test program: checks, captured log lines, a GraphQL probe, clocks.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convograph/entropic.hpp"

namespace flow {

using json = nlohmann::ordered_json;

// Records every check; thread-safe. A failed check is printed to stderr at once.
class Checks {
public:
    bool check(bool ok, const std::string& what);
    int count() const;
    std::vector<std::string> failures() const;

private:
    mutable std::mutex mutex_;
    int count_ = 0;
    std::vector<std::string> failures_;
};

// The log lines a storage client wrote (also echoed to stderr, marked as expected).
class LogCapture {
public:
    std::function<void(const std::string&)> sink();
    std::size_t size() const;
    std::string last() const;

private:
    mutable std::mutex mutex_;
    std::vector<std::string> lines_;
};

// A storage made from a config, destroyed at scope exit; its log lines are captured.
class Storage {
public:
    explicit Storage(convograph::Config config);
    ~Storage();
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;

    entropic::StorageInterface& api() { return api_; }
    void* user_data() { return api_.user_data; }
    const LogCapture& log() const { return *log_; }

private:
    std::shared_ptr<LogCapture> log_;
    entropic::StorageInterface api_;
};

// Reads (and a few writes the engine does not make) straight over GraphQL, for checking
// what the callbacks stored. Throws std::runtime_error on any error.
class Probe {
public:
    Probe(std::string url, std::string token);
    ~Probe();
    json operator()(const char* query, const json& variables = json::object()) const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// Milliseconds since `start`.
double ms_since(std::chrono::steady_clock::time_point start);

std::string env_or(const char* name, const char* fallback);
std::string random_tag();

}  // namespace flow
