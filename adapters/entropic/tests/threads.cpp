// Several engine threads on one storage at once.
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "scenario.hpp"

namespace flow {
namespace {

// Releases every thread at once, so that their calls overlap.
class StartLine {
public:
    void wait() {
        std::unique_lock<std::mutex> lock(mutex_);
        ready_.wait(lock, [this] { return open_; });
    }
    void open() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            open_ = true;
        }
        ready_.notify_all();
    }

private:
    std::mutex mutex_;
    std::condition_variable ready_;
    bool open_ = false;
};

}  // namespace

void run_threads(Context& ctx) {
    constexpr int kWorkers = 12;
    constexpr int kSessions = 4;
    entropic::StorageInterface& s = ctx.storage;
    const std::string root = ctx.summary.value("root_conversation_id", std::string());
    const std::string tier = "worker-" + ctx.tag;
    const std::string first = ctx.summary["delegations"]["first"]["id"].get<std::string>();

    struct Worker {
        std::string id, child, summary;
        json messages;
        bool ok = false;
    };
    struct Session {
        std::string id;
        json messages;
        bool ok = false;
    };
    std::vector<Worker> workers(kWorkers);
    std::vector<Session> sessions(kSessions);
    StartLine start;
    std::vector<std::thread> threads;
    // One sub-agent: delegate, write its transcript, read another delegation, complete.
    const auto work = [&](Worker& w, const std::string& task) {
        std::string loaded;
        return s.create_delegation(root.c_str(), "lead", tier.c_str(), task.c_str(), 2, w.id,
                                   w.child, s.user_data) &&
               s.save_conversation(w.child.c_str(), w.messages.dump().c_str(), s.user_data) &&
               s.load_delegation_with_messages(first.c_str(), loaded, s.user_data) &&
               json::parse(loaded).at("delegation_id") == first &&
               s.complete_delegation(w.id.c_str(), "completed", w.summary.c_str(), s.user_data);
    };
    for (int i = 0; i < kWorkers; ++i) {
        threads.emplace_back([&, i] {
            Worker& w = workers[i];
            w.summary = tier + " result #" + std::to_string(i);
            w.messages = json::array({{{"role", "assistant"},
                                       {"content", "worker " + std::to_string(i) + " done"},
                                       {"token_count", i}}});
            start.wait();
            try {
                w.ok = work(w, "Worker task " + std::to_string(i));
            } catch (const std::exception& e) {
                ctx.check(false, std::string("worker thread threw: ") + e.what());
            }
        });
    }
    for (int i = 0; i < kSessions; ++i) {
        threads.emplace_back([&, i] {
            Session& session = sessions[i];
            session.messages = json::array(
                {{{"role", "user"}, {"content", "parallel session " + std::to_string(i)}}});
            start.wait();
            session.ok =
                s.create_conversation("session", session.id, s.user_data) &&
                s.save_conversation(session.id.c_str(), session.messages.dump().c_str(),
                                    s.user_data);
        });
    }
    const auto began = std::chrono::steady_clock::now();
    start.open();
    for (std::thread& t : threads) {
        t.join();
    }
    ctx.summary["measured_ms"]["threads_wall"] = ms_since(began);

    std::set<std::string> ids;
    json made = json::array();
    for (const Worker& w : workers) {
        ctx.check(w.ok, "worker thread: create, save, load, complete");
        ids.insert(w.id);
        ids.insert(w.child);
        ctx.stored(w.child, w.messages);
        made.push_back({{"id", w.id}, {"child", w.child}, {"summary", w.summary}});
    }
    json roots = json::array();
    for (const Session& session : sessions) {
        ctx.check(session.ok, "session thread: create_conversation, save_conversation");
        ids.insert(session.id);
        ctx.stored(session.id, session.messages);
        ctx.created_root(session.id);
        roots.push_back(session.id);
    }
    ctx.check(ids.size() == 2 * kWorkers + kSessions, "every thread got ids of its own");
    ctx.summary["threads"] = {{"target_tier", tier}, {"delegations", made}, {"sessions", roots}};

    // followup over the workers' summaries: clamped to 10, newest completion first.
    std::string found_json;
    ctx.check(convograph::search_delegations(s, tier.c_str(), 50, found_json),
              "search_delegations(max_results 50)");
    const json found = json::parse(found_json, nullptr, false);
    ctx.check(found.is_array() && found.size() == 10, "max_results 50 is clamped to 10");
    bool newest_first = found.is_array();
    for (std::size_t i = 1; newest_first && i < found.size(); ++i) {
        newest_first = found[i - 1]["completed_at"].get<std::string>() >=
                       found[i]["completed_at"].get<std::string>();
    }
    ctx.check(newest_first, "followup is ordered newest completion first");
    std::string three_json;
    ctx.check(convograph::search_delegations(s, tier.c_str(), three_json),
              "search_delegations(default)");
    const json three = json::parse(three_json, nullptr, false);
    ctx.check(three.is_array() && three.size() == 3 && found.is_array() && found.size() >= 3 &&
                  three[0]["id"] == found[0]["id"] && three[2]["id"] == found[2]["id"],
              "followup's default max_results is 3");
}

}  // namespace flow
