// Faults: what each callback does when the server is down, hangs, refuses the caller or the
// body, or answers through a gateway that loses answers or says 503; when a kept-alive
// connection dies after the server's commit (a cut, a crash and restart); under a rate limit.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "fault_proxy.hpp"
#include "scenario.hpp"

namespace flow {
namespace {

using std::chrono::milliseconds;

struct Endpoint {
    std::string host;
    int port = 0;
};

// host and port of an http:// URL; port 0 when it is not one.
Endpoint http_endpoint(const std::string& url) {
    Endpoint e;
    const std::string scheme = "http://";
    if (url.compare(0, scheme.size(), scheme) != 0) {
        return e;
    }
    const std::size_t start = scheme.size();
    const std::size_t end = url.find_first_of("/?#", start);
    const std::string authority = url.substr(start, end == std::string::npos ? end : end - start);
    const std::size_t colon = authority.rfind(':');
    if (colon == std::string::npos) {
        e.host = authority;
        e.port = 80;
    } else {
        e.host = authority.substr(0, colon);
        e.port = std::stoi(authority.substr(colon + 1));
    }
    if (e.host.size() > 2 && e.host.front() == '[') {
        e.host = e.host.substr(1, e.host.size() - 2);
    }
    return e;
}

convograph::Config with(const convograph::Config& base, const std::string& url,
                        milliseconds timeout, int attempts) {
    convograph::Config c = base;
    c.url = url;
    c.connect_timeout = milliseconds(500);
    c.timeout = timeout;
    c.max_attempts = attempts;
    c.retry_backoff = milliseconds(50);
    return c;
}

// The longest a callback may take under `c`: every attempt timing out, every backoff at its
// maximum, plus a second of slack for a loaded machine.
double bound_ms(const convograph::Config& c) {
    double total = static_cast<double>(c.max_attempts) * static_cast<double>(c.timeout.count());
    for (int k = 1; k < c.max_attempts; ++k) {
        total += static_cast<double>(c.retry_backoff.count() << (k - 1));
    }
    return total + 1000.0;
}

int root_count(Context& ctx) {
    return ctx.probe("{ conversations(filter: {rootOnly: true}) { totalCount } }")
        ["conversations"]["totalCount"].get<int>();
}

int delegation_count(Context& ctx, const std::string& conversation_id) {
    return ctx.probe("query($id: ID!) { conversation(id: $id) { delegations { totalCount } } }",
                     {{"id", conversation_id}})["conversation"]["delegations"]["totalCount"]
        .get<int>();
}

json transcript_of(Context& ctx, const std::string& conversation_id) {
    return ctx.probe("query($id: ID!) { conversation(id: $id) { transcript } }",
                     {{"id", conversation_id}})["conversation"]["transcript"];
}

int snapshot_count(Context& ctx, const std::string& conversation_id) {
    return ctx.probe("query($id: ID!) { conversation(id: $id) { snapshots { totalCount } } }",
                     {{"id", conversation_id}})["conversation"]["snapshots"]["totalCount"]
        .get<int>();
}

json delegation_state(Context& ctx, const std::string& delegation_id) {
    return ctx.probe("query($id: ID!) { delegation(id: $id) { status summary } }",
                     {{"id", delegation_id}})["delegation"];
}

// A root conversation made through `st` (over its proxy): the request that follows may reuse
// the connection this one used.
std::string session_through(Context& ctx, Storage& st, const std::string& what) {
    std::string id;
    ctx.check(st.api().create_conversation("session", id, st.user_data()),
              what + ": create_conversation through the proxy");
    ctx.created_root(id);
    return id;
}

void one_line(Context& ctx, const Storage& st, const std::string& what, const std::string& says) {
    ctx.check(st.log().size() == 1, what + ": exactly one log line");
    ctx.check(st.log().last().find(says) != std::string::npos,
              what + ": the line says " + says + " (" + st.log().last() + ")");
}

void server_down(Context& ctx) {
    // Nothing listens: the connection is refused; retried (nothing was sent), then false.
    const auto cfg = with(ctx.config, "http://127.0.0.1:" + std::to_string(closed_port()) +
                                          "/graphql",
                          milliseconds(1000), 3);
    Storage st(cfg);
    std::string id;
    auto began = std::chrono::steady_clock::now();
    ctx.check(!st.api().create_conversation("session", id, st.user_data()),
              "server down: create_conversation is false");
    const double refused = ms_since(began);
    ctx.check(refused <= bound_ms(cfg), "server down: false within its timeout");
    one_line(ctx, st, "server down", "no connection");
    ctx.summary["measured_ms"]["server_down_refused_3_attempts"] = refused;

    began = std::chrono::steady_clock::now();
    std::string found;
    ctx.check(!convograph::search_delegations(st.api(), "x", found),
              "server down: search_delegations is false");
    ctx.summary["measured_ms"]["server_down_search"] = ms_since(began);
}

void server_hangs(Context& ctx, const Endpoint& upstream, const std::string& root) {
    // It accepts and reads but never answers: each attempt runs into its timeout.
    FaultProxy proxy(upstream.host, upstream.port, Fault::Blackhole, 1000);
    const auto cfg = with(ctx.config, proxy.url(), milliseconds(400), 2);
    {
        Storage st(cfg);
        std::string id;
        const auto began = std::chrono::steady_clock::now();
        ctx.check(!st.api().create_conversation("session", id, st.user_data()),
                  "server hangs: create_conversation is false");
        const double took = ms_since(began);
        ctx.check(took <= bound_ms(cfg), "server hangs: false within attempts x timeout");
        ctx.check(proxy.connections() == 2, "server hangs: create_conversation is retried once");
        one_line(ctx, st, "server hangs", "timed out");
        ctx.summary["measured_ms"]["server_hangs_2_attempts_of_400ms"] = took;
    }
    {
        Storage st(cfg);
        const auto began = std::chrono::steady_clock::now();
        const int before = proxy.connections();
        ctx.check(!st.api().save_snapshot(root.c_str(), R"([{"role":"user","content":"x"}])",
                                          st.user_data()),
                  "server hangs: save_snapshot is false");
        ctx.check(proxy.connections() == before + 1,
                  "server hangs: save_snapshot is not repeated once sent");
        one_line(ctx, st, "server hangs: save_snapshot", "timed out");
        one_line(ctx, st, "server hangs: save_snapshot", "not repeated: the write may have been stored");
        ctx.summary["measured_ms"]["server_hangs_snapshot_1_attempt_of_400ms"] = ms_since(began);
    }
}

// Only the append hangs (its version was read): repeated, since a repeat of an append over an
// expected version cannot store it twice; false once the attempts are spent, and said so.
void append_hangs(Context& ctx, const Endpoint& upstream, const std::string& root) {
    FaultOptions hang;
    hang.faulty = 1000;
    hang.match = "appendMessages";
    FaultProxy proxy(upstream.host, upstream.port, Fault::Blackhole, hang);
    const auto cfg = with(ctx.config, proxy.url(), milliseconds(400), 2);
    Storage st(cfg);
    const json before = transcript_of(ctx, root);
    const auto began = std::chrono::steady_clock::now();
    ctx.check(!st.api().save_conversation(root.c_str(), R"([{"role":"user","content":"x"}])",
                                          st.user_data()),
              "append hangs: save_conversation is false");
    ctx.check(ms_since(began) <= 2 * bound_ms(cfg), "append hangs: false within its timeouts");
    ctx.check(proxy.faults() == 2, "append hangs: the append over its version is repeated once");
    one_line(ctx, st, "append hangs", "timed out");
    one_line(ctx, st, "append hangs", "the write may have been stored");
    ctx.check(transcript_of(ctx, root) == before, "append hangs: nothing reached the server");
}

void refused_tokens(Context& ctx) {
    const auto cfg = with(ctx.config, ctx.config.url, milliseconds(5000), 3);
    struct Case {
        const char* what;
        std::string token;
    };
    const std::string revoked = env_or("CONVOGRAPH_REVOKED_TOKEN", "");
    if (revoked.empty()) {
        ctx.summary["skipped"].push_back("revoked token: CONVOGRAPH_REVOKED_TOKEN is not set");
    }
    for (const Case& c : {Case{"revoked token", revoked}, Case{"unknown token", "cvg_nobody"}}) {
        if (c.token.empty()) {
            continue;
        }
        auto with_token = cfg;
        with_token.token = c.token;
        Storage st(with_token);
        std::string id;
        ctx.check(!st.api().create_conversation("session", id, st.user_data()),
                  std::string(c.what) + ": create_conversation is false");
        one_line(ctx, st, c.what, "HTTP 401");
        std::string latest;
        ctx.check(!st.api().latest_delegation_for_target("x", latest, st.user_data()),
                  std::string(c.what) + ": latest_delegation_for_target is false");
        ctx.check(st.log().size() == 2, std::string(c.what) + ": a failed read is logged too");
    }
    if (!revoked.empty()) {
        ctx.summary["revoked_token_checked"] = true;
    }
}

// The server did the work, the answer was lost, the client timed out: the retry must find
// the first result instead of making a second one.
void lost_answers(Context& ctx, const Endpoint& upstream) {
    const auto config_for = [&](const FaultProxy& proxy) {
        return with(ctx.config, proxy.url(), milliseconds(1500), 3);
    };
    std::string conversation;
    {
        FaultProxy proxy(upstream.host, upstream.port, Fault::SwallowAnswer, 1);
        Storage st(config_for(proxy));
        const int before = root_count(ctx);
        const auto began = std::chrono::steady_clock::now();
        ctx.check(st.api().create_conversation("session", conversation, st.user_data()),
                  "lost answer: create_conversation succeeds on its retry");
        ctx.summary["measured_ms"]["lost_answer_create_conversation"] = ms_since(began);
        ctx.check(proxy.answers_dropped() == 1 && proxy.connections() == 2,
                  "lost answer: the server answered the first attempt, which was retried");
        ctx.check(root_count(ctx) == before + 1,
                  "lost answer: the retry made no second conversation (idempotency key)");
        ctx.created_root(conversation);
    }
    std::string delegation;
    std::string child;
    {
        FaultProxy proxy(upstream.host, upstream.port, Fault::SwallowAnswer, 1);
        Storage st(config_for(proxy));
        const auto began = std::chrono::steady_clock::now();
        ctx.check(st.api().create_delegation(conversation.c_str(), "lead", "lost-answers",
                                             "Retried task", 0, delegation, child,
                                             st.user_data()),
                  "lost answer: create_delegation succeeds on its retry");
        ctx.summary["measured_ms"]["lost_answer_create_delegation"] = ms_since(began);
        ctx.check(proxy.answers_dropped() == 1, "lost answer: the server answered the first one");
        ctx.check(delegation_count(ctx, conversation) == 1,
                  "lost answer: the retry made no second delegation");
    }
    {
        FaultProxy proxy(upstream.host, upstream.port, Fault::SwallowAnswer, 1);
        Storage st(config_for(proxy));
        ctx.check(st.api().complete_delegation(delegation.c_str(), "completed", "retried summary",
                                               st.user_data()),
                  "lost answer: complete_delegation recognises its own first attempt");
        ctx.check(proxy.answers_dropped() == 1 && proxy.connections() >= 2,
                  "lost answer: completed by the first attempt, then retried");
        ctx.check(st.log().size() == 0, "lost answer: complete_delegation logs nothing");
    }
    {
        FaultOptions append;
        append.match = "appendMessages";
        FaultProxy proxy(upstream.host, upstream.port, Fault::SwallowAnswer, append);
        Storage st(config_for(proxy));
        const json batch = json::array({{{"role", "user"}, {"content", "stored once"}},
                                        {{"role", "assistant"}, {"content", "not twice"}}});
        ctx.check(st.api().save_conversation(conversation.c_str(), batch.dump().c_str(),
                                             st.user_data()),
                  "lost answer: save_conversation finds its own first attempt");
        ctx.check(proxy.answers_dropped() == 1, "lost answer: the server stored the first one");
        ctx.check(transcript_of(ctx, conversation) == batch,
                  "lost answer: the batch is stored once (the repeat met CONFLICT)");
        ctx.check(st.log().size() == 0, "lost answer: save_conversation logs nothing");
        ctx.stored(conversation, batch);
    }
    ctx.summary["lost_answers"] = {
        {"conversation", conversation}, {"delegation", delegation}, {"child", child}};
}

// A gateway answering 503: reads and create_* are retried, a snapshot is not.
void gateway_503(Context& ctx, const Endpoint& upstream) {
    const std::string tier = ctx.summary["delegations"]["first"]["target_tier"].get<std::string>();
    {
        FaultProxy proxy(upstream.host, upstream.port, Fault::Reply503, 1);
        Storage st(with(ctx.config, proxy.url(), milliseconds(5000), 3));
        std::string latest;
        ctx.check(st.api().latest_delegation_for_target(tier.c_str(), latest, st.user_data()) &&
                      latest == ctx.summary["delegations"]["resumed"]["id"],
                  "503: latest_delegation_for_target succeeds on its retry");
        ctx.check(proxy.connections() == 2, "503: the read was retried once");
    }
    {
        FaultProxy proxy(upstream.host, upstream.port, Fault::Reply503, 1);
        Storage st(with(ctx.config, proxy.url(), milliseconds(5000), 3));
        const int before = root_count(ctx);
        std::string id;
        ctx.check(st.api().create_conversation("session", id, st.user_data()),
                  "503: create_conversation succeeds on its retry");
        ctx.check(proxy.connections() == 2 && root_count(ctx) == before + 1,
                  "503: one retry, one conversation");
        ctx.created_root(id);
        ctx.summary["gateway_503_conversation"] = id;

        FaultProxy again(upstream.host, upstream.port, Fault::Reply503, 1);
        Storage st2(with(ctx.config, again.url(), milliseconds(5000), 3));
        const json history = json::array({{{"role", "user"}, {"content", "snapshot"}}});
        ctx.check(!st2.api().save_snapshot(id.c_str(), history.dump().c_str(), st2.user_data()),
                  "503: save_snapshot is false");
        ctx.check(again.connections() == 1, "503: save_snapshot is not repeated");
        one_line(ctx, st2, "503: save_snapshot", "HTTP 503");
    }
    {
        // convograph's own 503 before execution (its token check found the database away):
        // nothing ran, so even a snapshot is repeated.
        FaultOptions first_snapshot;
        first_snapshot.match = "saveSnapshot";
        FaultProxy proxy(upstream.host, upstream.port, Fault::Reply503BeforeExecution,
                         first_snapshot);
        Storage st(with(ctx.config, proxy.url(), milliseconds(5000), 3));
        const std::string id = session_through(ctx, st, "503 before execution");
        const json history = json::array({{{"role", "user"}, {"content", "repeated"}}});
        ctx.check(st.api().save_snapshot(id.c_str(), history.dump().c_str(), st.user_data()),
                  "503 before execution: save_snapshot is true on its repeat");
        ctx.check(proxy.faults() == 1 && snapshot_count(ctx, id) == 1,
                  "503 before execution: one refusal, one snapshot");
        ctx.check(st.log().size() == 0, "503 before execution: nothing logged");
    }
}

// The connection dies after the server committed, with no byte of the answer: the write came
// over a kept-alive connection, where libcurl would re-send it by itself, unseen. Each write
// must be stored once, and a callback must say true exactly when its write is stored.
void cut_connections(Context& ctx, const Endpoint& upstream) {
    const auto cut = [](const char* match) {
        FaultOptions o;
        o.match = match;
        return o;
    };
    {
        FaultProxy proxy(upstream.host, upstream.port, Fault::CutAnswer, cut("appendMessages"));
        Storage st(with(ctx.config, proxy.url(), milliseconds(1500), 3));
        const std::string id = session_through(ctx, st, "cut append");
        const json batch = json::array({{{"role", "user"}, {"content", "cut after commit"}}});
        ctx.check(st.api().save_conversation(id.c_str(), batch.dump().c_str(), st.user_data()),
                  "cut append: save_conversation is true");
        ctx.check(proxy.answers_dropped() == 1, "cut append: the server stored it, then the cut");
        ctx.check(transcript_of(ctx, id) == batch, "cut append: the batch is stored once");
        ctx.check(st.log().size() == 0, "cut append: nothing logged");
        ctx.stored(id, batch);
    }
    {
        FaultProxy proxy(upstream.host, upstream.port, Fault::CutAnswer, cut("saveSnapshot"));
        Storage st(with(ctx.config, proxy.url(), milliseconds(1500), 3));
        const std::string id = session_through(ctx, st, "cut snapshot");
        const json history = json::array({{{"role", "user"}, {"content", "snapshot, cut"}}});
        ctx.check(!st.api().save_snapshot(id.c_str(), history.dump().c_str(), st.user_data()),
                  "cut snapshot: save_snapshot is false (its answer never came)");
        ctx.check(snapshot_count(ctx, id) == 1, "cut snapshot: one snapshot, not re-sent");
        one_line(ctx, st, "cut snapshot", "the write may have been stored");
    }
    {
        // A server killed right after its commit, refusing connections while it restarts:
        // the attempts after the cut are refused, then one gets in.
        FaultOptions crash = cut("appendMessages");
        crash.refuse_ms = 250;
        FaultProxy proxy(upstream.host, upstream.port, Fault::CrashAfterAnswer, crash);
        auto cfg = with(ctx.config, proxy.url(), milliseconds(1500), 5);
        cfg.retry_backoff = milliseconds(100);  // 350 ms at least before the fourth attempt
        Storage st(cfg);
        const std::string id = session_through(ctx, st, "crash and restart");
        const json batch = json::array({{{"role", "user"}, {"content", "across a restart"}}});
        const auto began = std::chrono::steady_clock::now();
        ctx.check(st.api().save_conversation(id.c_str(), batch.dump().c_str(), st.user_data()),
                  "crash and restart: save_conversation is true");
        ctx.summary["measured_ms"]["crash_and_restart_save"] = ms_since(began);
        ctx.check(proxy.answers_dropped() == 1, "crash and restart: the server had stored it");
        ctx.check(transcript_of(ctx, id) == batch, "crash and restart: the batch is stored once");
        ctx.check(st.log().size() == 0, "crash and restart: nothing logged");
        ctx.stored(id, batch);
    }
    {
        FaultProxy proxy(upstream.host, upstream.port, Fault::CutAnswer,
                         cut("completeDelegation"));
        Storage st(with(ctx.config, proxy.url(), milliseconds(1500), 3));
        const std::string id = session_through(ctx, st, "cut completion");
        std::string delegation;
        std::string child;
        ctx.check(st.api().create_delegation(id.c_str(), "lead", "cut-completion", "task", 0,
                                             delegation, child, st.user_data()),
                  "cut completion: create_delegation");
        ctx.check(st.api().complete_delegation(delegation.c_str(), "completed", "cut summary",
                                               st.user_data()),
                  "cut completion: complete_delegation recognises its own first attempt");
        ctx.check(proxy.answers_dropped() == 1, "cut completion: completed, then the cut");
        ctx.check(delegation_state(ctx, delegation) ==
                      json({{"status", "COMPLETED"}, {"summary", "cut summary"}}),
                  "cut completion: completed with this call's summary");
        ctx.check(st.log().size() == 0, "cut completion: nothing logged");
    }
}

// A rate limit answers 429 with Retry-After and runs nothing: every call waits that long and
// repeats, an append included; a wait past the call's budget gives up at once, saying why.
void rate_limited(Context& ctx, const Endpoint& upstream) {
    const auto limit = [](const char* match, int retry_after_s) {
        FaultOptions o;
        o.match = match;
        o.retry_after_s = retry_after_s;
        return o;
    };
    std::string id;
    {
        FaultProxy proxy(upstream.host, upstream.port, Fault::Reply429,
                         limit("appendMessages", 1));
        Storage st(with(ctx.config, proxy.url(), milliseconds(2000), 3));
        id = session_through(ctx, st, "429");
        const json batch = json::array({{{"role", "user"}, {"content", "after the wait"}}});
        const auto began = std::chrono::steady_clock::now();
        ctx.check(st.api().save_conversation(id.c_str(), batch.dump().c_str(), st.user_data()),
                  "429: save_conversation is true once it waited");
        const double took = ms_since(began);
        ctx.summary["measured_ms"]["rate_limited_save_retry_after_1s"] = took;
        ctx.check(took >= 1000.0, "429: it waited the Retry-After second");
        ctx.check(proxy.faults() == 1, "429: refused once, then let in");
        ctx.check(transcript_of(ctx, id) == batch, "429: the batch is stored, once");
        ctx.check(st.log().size() == 0, "429: nothing logged");
        ctx.stored(id, batch);
    }
    {
        FaultProxy proxy(upstream.host, upstream.port, Fault::Reply429, limit("", 1));
        Storage st(with(ctx.config, proxy.url(), milliseconds(2000), 3));
        std::string delegation;
        std::string child;
        const auto began = std::chrono::steady_clock::now();
        ctx.check(st.api().create_delegation(id.c_str(), "lead", "rate-limited", "task", 0,
                                             delegation, child, st.user_data()),
                  "429: create_delegation is true once it waited");
        ctx.check(ms_since(began) >= 1000.0, "429: create_delegation waited the Retry-After");
        ctx.check(delegation_count(ctx, id) == 1, "429: one delegation");
    }
    {
        FaultProxy proxy(upstream.host, upstream.port, Fault::Reply429,
                         limit("appendMessages", 30));
        const auto cfg = with(ctx.config, proxy.url(), milliseconds(2000), 3);
        Storage st(cfg);
        const json before = transcript_of(ctx, id);
        const auto began = std::chrono::steady_clock::now();
        ctx.check(!st.api().save_conversation(id.c_str(), R"([{"role":"user","content":"x"}])",
                                              st.user_data()),
                  "429 past the budget: save_conversation is false");
        ctx.check(ms_since(began) < 2000.0, "429 past the budget: false at once, no wait");
        ctx.check(proxy.faults() == 1, "429 past the budget: not repeated");
        one_line(ctx, st, "429 past the budget", "HTTP 429");
        one_line(ctx, st, "429 past the budget",
                 "the server asks to wait 30 s, past this call's budget (3 attempts of 2000 ms)");
        ctx.check(transcript_of(ctx, id) == before, "429 past the budget: nothing stored");
    }
}

// Creates and completes delegations under `parent` through `st` until stopped, each about
// `pause` apart: every one bumps the parent's version although none adds a message to it.
class Delegating {
public:
    Delegating(Storage& st, std::string parent, milliseconds pause)
        : thread_([this, &st, parent = std::move(parent), pause] {
              while (!stop_) {
                  std::string id;
                  std::string child;
                  if (st.api().create_delegation(parent.c_str(), "lead", "busy-parent", "task", 0,
                                                 id, child, st.user_data()) &&
                      st.api().complete_delegation(id.c_str(), "completed", "done",
                                                   st.user_data())) {
                      ++made_;
                  }
                  std::this_thread::sleep_for(pause);
              }
          }) {}
    ~Delegating() { stop(); }
    Delegating(const Delegating&) = delete;
    Delegating& operator=(const Delegating&) = delete;
    // How many delegations were made and completed so far.
    int made() const { return made_.load(); }
    // Stops and returns how many delegations were made and completed.
    int stop() {
        stop_ = true;
        if (thread_.joinable()) {
            thread_.join();
        }
        return made_.load();
    }

private:
    std::atomic<bool> stop_{false};
    std::atomic<int> made_{0};
    std::thread thread_;
};

// The server bumps a conversation's version on every createDelegation and completeDelegation
// under it, which add no message. save_conversation appends after the count of messages it
// read, which those bumps do not move: held on a slow network while delegations come and go
// under the same parent, every batch is stored, once, with one append each, and the callback
// says true.
void delegations_during_appends(Context& ctx, const Endpoint& upstream) {
    Storage direct(with(ctx.config, ctx.config.url, milliseconds(5000), 3));
    {
        FaultOptions slow;
        slow.match = "appendMessages";
        slow.faulty = 4;  // more than the saves: a re-sent append would be held too
        slow.delay_ms = 400;
        FaultProxy proxy(upstream.host, upstream.port, Fault::DelayRequest, slow);
        Storage st(with(ctx.config, proxy.url(), milliseconds(3000), 3));
        const std::string parent = session_through(ctx, st, "delegations during appends");
        json sent = json::array();
        bool every_one = true;
        Delegating delegating(direct, parent, milliseconds(40));
        for (int i = 0; i < 3; ++i) {
            const json batch = json::array(
                {{{"role", "assistant"}, {"content", "the parent's turn " + std::to_string(i)}}});
            every_one = st.api().save_conversation(parent.c_str(), batch.dump().c_str(),
                                                   st.user_data()) &&
                        every_one;
            sent.push_back(batch[0]);
        }
        const int made = delegating.stop();
        ctx.check(every_one, "delegations during appends: every save_conversation is true");
        ctx.check(proxy.faults() == 3,
                  "delegations during appends: one append per save, none sent again (" +
                      std::to_string(proxy.faults()) + ")");
        ctx.check(made >= 4, "delegations during appends: delegations were made meanwhile (" +
                                 std::to_string(made) + ")");
        ctx.check(transcript_of(ctx, parent) == sent,
                  "delegations during appends: every batch stored once, in order");
        ctx.check(st.log().size() == 0, "delegations during appends: nothing logged");
        ctx.check(delegation_count(ctx, parent) == made,
                  "delegations during appends: the delegations are all there");
        ctx.stored(parent, sent);
    }
    {
        // Another writer appends while this call's append is held: that is a round, and the
        // batch goes after the other one.
        FaultOptions slow;
        slow.match = "appendMessages";
        slow.delay_ms = 400;
        FaultProxy proxy(upstream.host, upstream.port, Fault::DelayRequest, slow);
        Storage st(with(ctx.config, proxy.url(), milliseconds(3000), 3));
        const std::string id = session_through(ctx, st, "another writer");
        const json mine = json::array({{{"role", "user"}, {"content", "held"}}});
        const json theirs = json::array({{{"role", "user"}, {"content", "in between"}}});
        bool saved = false;
        std::thread held([&] {
            saved = st.api().save_conversation(id.c_str(), mine.dump().c_str(), st.user_data());
        });
        std::this_thread::sleep_for(milliseconds(150));
        ctx.check(direct.api().save_conversation(id.c_str(), theirs.dump().c_str(),
                                                 direct.user_data()),
                  "another writer: its save_conversation is true");
        held.join();
        ctx.check(saved, "another writer: the held save_conversation is true");
        const json both = json::array({theirs[0], mine[0]});
        ctx.check(transcript_of(ctx, id) == both,
                  "another writer: the held batch is appended after the other one, once");
        ctx.stored(id, both);
    }
    {
        // A resume's seed, too long for one append, goes into the empty child as its whole
        // transcript over the version read: a delegation under that child in between is no
        // reason to lose it.
        FaultOptions slow;
        slow.match = "replaceTranscript";
        slow.faulty = 4;
        slow.delay_ms = 400;
        FaultProxy proxy(upstream.host, upstream.port, Fault::DelayRequest, slow);
        Storage st(with(ctx.config, proxy.url(), milliseconds(3000), 3));
        const std::string parent = session_through(ctx, st, "seed during delegations");
        std::string resumed;
        std::string child;
        ctx.check(st.api().create_delegation(parent.c_str(), "lead", "resumed", "resume", 0,
                                             resumed, child, st.user_data()),
                  "seed during delegations: create_delegation");
        json seed = json::array();
        for (int i = 0; i < 1001; ++i) {
            seed.push_back({{"role", "user"}, {"content", "seed " + std::to_string(i)}});
        }
        bool saved = false;
        int made = 0;
        {
            Delegating delegating(direct, child, milliseconds(40));
            saved = st.api().save_conversation(child.c_str(), seed.dump().c_str(),
                                               st.user_data());
            made = delegating.stop();
        }
        ctx.check(saved, "seed during delegations: save_conversation is true");
        ctx.check(proxy.faults() == 4 && made >= 4,
                  "seed during delegations: four replaces held while delegations were made");
        ctx.check(transcript_of(ctx, child) == seed, "seed during delegations: the seed is stored");
        ctx.check(st.log().size() == 0, "seed during delegations: nothing logged");
        ctx.stored(child, seed);
    }
}

// A conversation whose version moves with no message added every time the batch is sent (a
// proxy answers every append with CONFLICT over expectedVersion): the batch is sent again over
// the version read, with waits between the re-sends (retry_backoff, doubled up to four times
// it, with jitter) until the call's budget is spent; not one after another, each over a new
// connection (1,733 appends in the 3 s before the waits).
void version_always_moves(Context& ctx, const Endpoint& upstream) {
    constexpr int kMaxAppends = 40;  // 3 s of waits of 25 ms to 200 ms: 32 at the most
    FaultOptions conflict;
    conflict.match = "appendMessages";
    conflict.faulty = 1000000;
    FaultProxy proxy(upstream.host, upstream.port, Fault::ReplyConflict, conflict);
    const convograph::Config config = with(ctx.config, proxy.url(), milliseconds(1000), 3);
    Storage st(config);  // a budget of 3 s
    const std::string id = session_through(ctx, st, "version always moves");
    const json batch = json::array({{{"role", "user"}, {"content", "never lands"}}});
    const int requests = proxy.requests();
    const int connections = proxy.connections();
    const auto began = std::chrono::steady_clock::now();
    const bool saved = st.api().save_conversation(id.c_str(), batch.dump().c_str(), st.user_data());
    const double took = ms_since(began);
    const int appends = proxy.faults();
    ctx.summary["measured"]["version_always_moves"] = {
        {"ms", took}, {"appends", appends}, {"requests", proxy.requests() - requests},
        {"new_connections", proxy.connections() - connections}};
    ctx.check(!saved, "version always moves: save_conversation is false");
    one_line(ctx, st, "version always moves", "with no message added: not repeated past this "
                                              "call's budget");
    ctx.check(took >= 3000.0 && took <= bound_ms(config),
              "version always moves: it went on for the call's budget (" +
                  std::to_string(static_cast<int>(took)) + " ms)");
    ctx.check(appends <= kMaxAppends,
              "version always moves: at most " + std::to_string(kMaxAppends) +
                  " appends, with waits between them (" + std::to_string(appends) + " appends, " +
                  std::to_string(proxy.requests() - requests) + " requests, " +
                  std::to_string(proxy.connections() - connections) + " new connections)");
    ctx.check(transcript_of(ctx, id).empty(), "version always moves: nothing stored");
    ctx.stored(id, json::array());
}

// A parent whose version moves without a pause (four threads creating and completing
// delegations under it, through another storage): an append after the count of messages it
// read is not refused by them (with expectedVersion it was, and saves took from 4 s to past
// its 9 s budget): every save is true, with one read and one append, its batch stored once,
// in order. The numbers go into the summary.
void busy_parent(Context& ctx, const Endpoint& upstream) {
    constexpr int kChurn = 4;
    constexpr int kSaves = 3;
    Storage direct(with(ctx.config, ctx.config.url, milliseconds(5000), 3));
    FaultProxy proxy(upstream.host, upstream.port, Fault::PassThrough, 0);
    Storage st(with(ctx.config, proxy.url(), milliseconds(3000), 3));  // a budget of 9 s
    const std::string parent = session_through(ctx, st, "busy parent");
    json sent = json::array();
    int most_requests = 0;
    int most_connections = 0;
    double most_ms = 0.0;
    int saved = 0;
    bool false_after_budget = true;
    int made = 0;
    {
        std::vector<std::unique_ptr<Delegating>> churn;
        for (int t = 0; t < kChurn; ++t) {
            churn.push_back(std::make_unique<Delegating>(direct, parent, milliseconds(0)));
        }
        // The churn under way (saves no longer wait out its conflicts: it runs first).
        const auto churned = [&churn] {
            int sum = 0;
            for (const auto& d : churn) {
                sum += d->made();
            }
            return sum;
        };
        for (int waited = 0; churned() < 20 && waited < 1000; ++waited) {
            std::this_thread::sleep_for(milliseconds(10));
        }
        for (int i = 0; i < kSaves; ++i) {
            const json batch = json::array(
                {{{"role", "assistant"}, {"content", "busy turn " + std::to_string(i)}}});
            const int requests = proxy.requests();
            const int connections = proxy.connections();
            const std::size_t lines = st.log().size();
            const auto began = std::chrono::steady_clock::now();
            if (st.api().save_conversation(parent.c_str(), batch.dump().c_str(), st.user_data())) {
                ++saved;
                sent.push_back(batch[0]);
            } else {
                false_after_budget =
                    false_after_budget && st.log().size() == lines + 1 &&
                    st.log().last().find("not repeated past this call's budget") !=
                        std::string::npos;
            }
            most_requests = std::max(most_requests, proxy.requests() - requests);
            most_connections = std::max(most_connections, proxy.connections() - connections);
            most_ms = std::max(most_ms, ms_since(began));
        }
        for (auto& d : churn) {
            made += d->stop();
        }
    }
    ctx.summary["measured"]["busy_parent"] = {
        {"saves", kSaves}, {"saved", saved}, {"delegations", made},
        {"most_requests_per_save", most_requests},
        {"most_connections_per_save", most_connections}, {"most_ms_per_save", most_ms}};
    ctx.check(made >= 20, "busy parent: delegations were made meanwhile (" +
                              std::to_string(made) + ")");
    ctx.check(false_after_budget, "busy parent: a false save gave up after its budget (" +
                                      (st.log().size() ? st.log().last() : "") + ")");
    ctx.check(saved == kSaves, "busy parent: every save is true (" + std::to_string(saved) + ")");
    ctx.check(most_requests == 2, "busy parent: one read and one append per save (at most " +
                                      std::to_string(most_requests) + " requests)");
    ctx.check(transcript_of(ctx, parent) == sent,
              "busy parent: every batch reported true stored once, in order, no other");
    ctx.stored(parent, sent);
}

// A write that goes over a connection of its own closes it when done: a storage keeps no more
// connections than calls ran at once (one per pooled handle), however many writes it made.
void connections_kept(Context& ctx, const Endpoint& upstream) {
    constexpr int kThreads = 4;
    constexpr int kSaves = 6;
    FaultProxy proxy(upstream.host, upstream.port, Fault::PassThrough, 0);
    Storage st(with(ctx.config, proxy.url(), milliseconds(5000), 3));
    std::vector<std::string> ids(kThreads);
    std::vector<json> sent(kThreads, json::array());
    std::atomic<int> failed{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            if (!st.api().create_conversation("session", ids[t], st.user_data())) {
                ++failed;
                return;
            }
            for (int i = 0; i < kSaves; ++i) {
                const json batch = json::array(
                    {{{"role", "user"},
                      {"content", "thread " + std::to_string(t) + " turn " + std::to_string(i)}}});
                if (!st.api().save_conversation(ids[t].c_str(), batch.dump().c_str(),
                                                st.user_data())) {
                    ++failed;
                }
                sent[t].push_back(batch[0]);
                std::string none;
                st.api().latest_delegation_for_target("nobody", none, st.user_data());
            }
        });
    }
    for (std::thread& t : threads) {
        t.join();
    }
    // A connection the client closed leaves the proxy within its poll interval.
    const auto began = std::chrono::steady_clock::now();
    while (proxy.open_connections() > kThreads && ms_since(began) < 2000.0) {
        std::this_thread::sleep_for(milliseconds(20));
    }
    const int open = proxy.open_connections();
    ctx.check(failed == 0, "connections kept: every call succeeded");
    ctx.check(proxy.connections() >= kThreads * kSaves,
              "connections kept: each append went over a connection of its own");
    ctx.check(open <= kThreads, "connections kept: at most one per thread stays open (" +
                                    std::to_string(open) + " after " +
                                    std::to_string(proxy.connections()) + " connections)");
    for (int t = 0; t < kThreads; ++t) {
        if (!ids[t].empty()) {
            ctx.created_root(ids[t]);
            ctx.stored(ids[t], sent[t]);
        }
    }
}

// HTTP 200 with a DATABASE_UNAVAILABLE error (application/json): with a `path`, the database
// went away during the operation, which may have run; without one, before it started.
void database_unavailable(Context& ctx, const Endpoint& upstream) {
    const auto on = [](const char* match) {
        FaultOptions o;
        o.match = match;
        return o;
    };
    {
        FaultProxy proxy(upstream.host, upstream.port, Fault::AnswerUnavailable,
                         on("appendMessages"));
        Storage st(with(ctx.config, proxy.url(), milliseconds(3000), 3));
        const std::string id = session_through(ctx, st, "unavailable append");
        const json batch = json::array({{{"role", "user"}, {"content", "database went away"}}});
        ctx.check(st.api().save_conversation(id.c_str(), batch.dump().c_str(), st.user_data()),
                  "unavailable append: save_conversation is true on its repeat");
        ctx.check(proxy.answers_dropped() == 1, "unavailable append: the server had stored it");
        ctx.check(transcript_of(ctx, id) == batch, "unavailable append: the batch is stored once");
        ctx.check(st.log().size() == 0, "unavailable append: nothing logged");
        ctx.stored(id, batch);
    }
    {
        FaultProxy proxy(upstream.host, upstream.port, Fault::AnswerUnavailable,
                         on("createConversation"));
        Storage st(with(ctx.config, proxy.url(), milliseconds(3000), 3));
        const int before = root_count(ctx);
        session_through(ctx, st, "unavailable create");
        ctx.check(proxy.faults() == 1 && root_count(ctx) == before + 1,
                  "unavailable create: repeated by its key, one conversation");
    }
    {
        FaultProxy proxy(upstream.host, upstream.port, Fault::AnswerUnavailable,
                         on("saveSnapshot"));
        Storage st(with(ctx.config, proxy.url(), milliseconds(3000), 3));
        const std::string id = session_through(ctx, st, "unavailable snapshot");
        const json history = json::array({{{"role", "user"}, {"content", "snapshot"}}});
        ctx.check(!st.api().save_snapshot(id.c_str(), history.dump().c_str(), st.user_data()),
                  "unavailable snapshot: save_snapshot is false (it may have run)");
        ctx.check(proxy.faults() == 1 && snapshot_count(ctx, id) == 1,
                  "unavailable snapshot: not repeated, one snapshot");
        one_line(ctx, st, "unavailable snapshot", "the database is unavailable");
        one_line(ctx, st, "unavailable snapshot", "the write may have been stored");
    }
    {
        FaultProxy proxy(upstream.host, upstream.port, Fault::Reply200Unavailable,
                         on("saveSnapshot"));
        Storage st(with(ctx.config, proxy.url(), milliseconds(3000), 3));
        const std::string id = session_through(ctx, st, "unavailable before execution");
        const json history = json::array({{{"role", "user"}, {"content", "snapshot"}}});
        ctx.check(st.api().save_snapshot(id.c_str(), history.dump().c_str(), st.user_data()),
                  "unavailable before execution: save_snapshot is true on its repeat");
        ctx.check(proxy.faults() == 1 && snapshot_count(ctx, id) == 1,
                  "unavailable before execution: nothing ran, repeated, one snapshot");
        ctx.check(st.log().size() == 0, "unavailable before execution: nothing logged");
    }
}

// JSON `data` without the field asked for (a proxy that mangles answers, another server at the
// URL): false with a log line, never the silent false of "unknown delegation" or "none
// completed yet", which the engine takes as answers.
void data_without_the_field(Context& ctx, const Endpoint& upstream) {
    const json& made = ctx.summary["delegations"];
    const std::string id = made["first"]["id"].get<std::string>();
    const std::string tier = made["first"]["target_tier"].get<std::string>();
    const auto on = [](const char* match) {
        FaultOptions o;
        o.match = match;
        return o;
    };
    {
        FaultProxy proxy(upstream.host, upstream.port, Fault::ReplyEmptyData,
                         on("delegation(id: $id) { id delegatingTier"));
        Storage st(with(ctx.config, proxy.url(), milliseconds(5000), 3));
        std::string loaded = "untouched";
        ctx.check(!st.api().load_delegation_with_messages(id.c_str(), loaded, st.user_data()) &&
                      loaded == "untouched",
                  "data without delegation: load_delegation_with_messages is false");
        ctx.check(proxy.faults() == 1, "data without delegation: the answer was the proxy's");
        one_line(ctx, st, "data without delegation", "the answer has no `delegation`");
    }
    {
        FaultProxy proxy(upstream.host, upstream.port, Fault::ReplyEmptyData,
                         on("latestDelegation(targetTier"));
        Storage st(with(ctx.config, proxy.url(), milliseconds(5000), 3));
        std::string latest = "untouched";
        ctx.check(!st.api().latest_delegation_for_target(tier.c_str(), latest, st.user_data()) &&
                      latest == "untouched",
                  "data without latestDelegation: latest_delegation_for_target is false");
        one_line(ctx, st, "data without latestDelegation", "the answer has no `latestDelegation`");
    }
    {
        FaultProxy proxy(upstream.host, upstream.port, Fault::ReplyEmptyData,
                         on("messageCount version"));
        Storage st(with(ctx.config, proxy.url(), milliseconds(5000), 3));
        const std::string root = ctx.summary["root_conversation_id"].get<std::string>();
        const json batch = json::array({{{"role", "user"}, {"content", "never sent"}}});
        ctx.check(!st.api().save_conversation(root.c_str(), batch.dump().c_str(), st.user_data()),
                  "data without conversation: save_conversation is false");
        one_line(ctx, st, "data without conversation", "the answer has no `conversation`");
        ctx.check(st.log().last().find("NOT_FOUND") == std::string::npos,
                  "data without conversation: not taken for an unknown conversation");
    }
}

// A redirect (an http:// URL that a proxy sends on to https://) is not followed, and the line
// says where it points: it said only "HTTP 301: <html>moved</html>".
void redirects(Context& ctx, const Endpoint& upstream) {
    for (const int status : {301, 302, 307, 308}) {
        FaultOptions options;
        options.faulty = 100;
        options.redirect_status = status;
        FaultProxy proxy(upstream.host, upstream.port, Fault::Redirect, options);
        Storage st(with(ctx.config, proxy.url(), milliseconds(5000), 3));
        const std::string what = std::to_string(status) + " redirect";
        std::string id;
        ctx.check(!st.api().create_conversation("session", id, st.user_data()),
                  what + ": create_conversation is false");
        ctx.check(proxy.requests() == 1, what + ": not followed, nor repeated");
        const std::string moved = proxy.url().substr(0, proxy.url().rfind("/graphql"));
        one_line(ctx, st, what,
                 "HTTP " + std::to_string(status) + ": redirected to " + moved +
                     "/moved/graphql (not followed: configure the storage with that URL)");
    }
    // A Location of a path alone, resolved against a URL that holds credentials: the line
    // named them ("redirected to http://user:secret@127.0.0.1:…").
    FaultOptions options;
    options.faulty = 100;
    options.redirect_status = 308;
    options.redirect_path = true;
    FaultProxy proxy(upstream.host, upstream.port, Fault::Redirect, options);
    const std::string url = proxy.url();
    const std::string with_credentials =
        "http://user:secret@" + url.substr(std::string("http://").size());
    Storage st(with(ctx.config, with_credentials, milliseconds(5000), 3));
    std::string id;
    ctx.check(!st.api().create_conversation("session", id, st.user_data()),
              "308 to a path: create_conversation is false");
    one_line(ctx, st, "308 to a path",
             "HTTP 308: redirected to " + url.substr(0, url.rfind("/graphql")) +
                 "/moved/graphql (not followed");
    ctx.check(st.log().last().find("secret") == std::string::npos,
              "308 to a path: no credentials in the line (" + st.log().last() + ")");
}

// A config make_storage_interface must refuse, and storage used after destroy.
void misuse(Context& ctx) {
    const auto refused = [&](const char* what, auto change) {
        convograph::Config c = ctx.config;
        change(c);
        try {
            entropic::StorageInterface s = convograph::make_storage_interface(c);
            convograph::destroy_storage_interface(s);
            ctx.check(false, std::string("make_storage_interface accepts ") + what);
        } catch (const std::invalid_argument&) {
            ctx.check(true, std::string("make_storage_interface refuses ") + what);
        }
    };
    refused("an empty url", [](convograph::Config& c) { c.url.clear(); });
    refused("an empty token", [](convograph::Config& c) { c.token.clear(); });
    refused("a token with a line break", [](convograph::Config& c) { c.token += "\r\nX: y"; });
    // Any control character, not only CR and LF: each went out in the header (a NUL cut the
    // token short), and every call logged the server's 400 or 401 instead of the token's fault.
    for (const std::string& bad : {std::string("\t"), std::string("\n"), std::string(1, '\0'),
                                  std::string("\x01"), std::string("\x1f"), std::string("\x7f")}) {
        convograph::Config c = ctx.config;
        c.token += bad;
        const std::string what =
            "a token with control character " + std::to_string(static_cast<unsigned char>(bad[0]));
        try {
            entropic::StorageInterface s = convograph::make_storage_interface(c);
            convograph::destroy_storage_interface(s);
            ctx.check(false, "make_storage_interface accepts " + what);
        } catch (const std::invalid_argument& e) {
            ctx.check(std::string(e.what()).find("control character") != std::string::npos,
                      "make_storage_interface refuses " + what + ", saying so");
        }
    }
    refused("max_attempts 0", [](convograph::Config& c) { c.max_attempts = 0; });
    refused("a zero timeout", [](convograph::Config& c) { c.timeout = milliseconds(0); });

    entropic::StorageInterface s = convograph::make_storage_interface(ctx.config);
    entropic::StorageInterface copy = s;
    convograph::destroy_storage_interface(s);
    ctx.check(s.create_conversation == nullptr && s.user_data == nullptr,
              "destroy_storage_interface resets every member");
    convograph::destroy_storage_interface(s);  // twice: harmless
    std::string out;
    ctx.check(!convograph::search_delegations(s, "x", out),
              "search_delegations on a destroyed storage is false");
    ctx.check(!copy.latest_delegation_for_target("x", out, nullptr),
              "a callback given a null user_data is false");
}

}  // namespace

void run_faults(Context& ctx) {
    misuse(ctx);
    const std::string root = ctx.summary["root_conversation_id"].get<std::string>();
    server_down(ctx);
    refused_tokens(ctx);
    const Endpoint upstream = http_endpoint(ctx.config.url);
    if (upstream.port == 0) {
        ctx.summary["skipped"].push_back("fault proxy: CONVOGRAPH_URL is not http://");
        return;
    }
    server_hangs(ctx, upstream, root);
    append_hangs(ctx, upstream, root);
    lost_answers(ctx, upstream);
    gateway_503(ctx, upstream);
    cut_connections(ctx, upstream);
    rate_limited(ctx, upstream);
    delegations_during_appends(ctx, upstream);
    version_always_moves(ctx, upstream);
    busy_parent(ctx, upstream);
    connections_kept(ctx, upstream);
    database_unavailable(ctx, upstream);
    data_without_the_field(ctx, upstream);
    redirects(ctx, upstream);
}

}  // namespace flow
