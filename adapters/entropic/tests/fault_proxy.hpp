// A TCP fault injector in front of the real server (the way tests/tcp_proxy.py is). It reads
// HTTP/1.1 requests one by one, keep-alive included (bodies sized by Content-Length, as
// libcurl and the server send them): the first `faulty` requests that match get the fault,
// every other one is passed through untouched.
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace flow {

enum class Fault {
    // No fault: every request is passed through (to count connections).
    PassThrough,
    // Forward the request, read the server's answer and drop it, then keep the client
    // waiting: the client times out although the server did the work.
    SwallowAnswer,
    // Forward the request, read the server's whole answer, then close the client's connection
    // without a byte of it: the server did the work and the connection died (a proxy cut, a
    // server killed right after its commit).
    CutAnswer,
    // As CutAnswer, then refuse every connection for `refuse_ms`: a server that died after
    // its commit and is restarting.
    CrashAfterAnswer,
    // Read the request and answer 503 (a gateway with no healthy upstream); nothing is
    // forwarded.
    Reply503,
    // As Reply503, with the body convograph sends when it stopped a request before execution
    // (DATABASE_UNAVAILABLE, no `data`).
    Reply503BeforeExecution,
    // Answer 429 with `Retry-After: retry_after_s` and keep the connection, forwarding nothing:
    // a rate limit. Every matching request is refused until retry_after_s have passed since
    // the first refusal (`faulty` is not counted): a client that waits as told gets in.
    Reply429,
    // Accept and read, never answer, never forward: a server that hangs.
    Blackhole,
    // Hold the request `delay_ms` before forwarding it, then pass the answer on and keep the
    // connection: a slow network between the client's read and its write.
    DelayRequest,
    // Answer 200 with convograph's body for a database that went away before the operation
    // could start (DATABASE_UNAVAILABLE, `data` null, no `path`); nothing is forwarded.
    Reply200Unavailable,
    // Forward the request, read the server's answer (it did the work) and answer 200 with
    // convograph's body for a database that went away during the operation
    // (DATABASE_UNAVAILABLE with a `path`, `data` null), keeping the connection.
    AnswerUnavailable,
    // Answer 200 with appendMessages' CONFLICT over expectedVersion, forwarding nothing, and
    // keep the connection: to the client, the conversation's version moved with no message
    // added (as a delegation created under it moves it), every time it appends.
    ReplyConflict,
    // Answer 200 with `{"data":{}}`, forwarding nothing, and keep the connection: JSON data
    // without the field asked for (a proxy that mangles answers, another server at the URL).
    ReplyEmptyData,
    // Answer `redirect_status` with `Location: <this proxy>/moved/graphql`, forwarding nothing,
    // and keep the connection: a client that followed it would come back here (requests()).
    Redirect,
};

struct FaultOptions {
    int faulty = 1;          // how many matching requests get the fault
    std::string match;       // only requests whose body holds this text ("": every request)
    int retry_after_s = 1;   // Reply429
    int refuse_ms = 250;     // CrashAfterAnswer
    int delay_ms = 300;      // DelayRequest
    int redirect_status = 301;  // Redirect
    bool redirect_path = false;  // Redirect: `Location: /moved/graphql`, a path alone
};

class FaultProxy {
public:
    // Throws std::runtime_error when it cannot listen.
    FaultProxy(std::string upstream_host, int upstream_port, Fault fault, int faulty);
    FaultProxy(std::string upstream_host, int upstream_port, Fault fault, FaultOptions options);
    ~FaultProxy();
    FaultProxy(const FaultProxy&) = delete;
    FaultProxy& operator=(const FaultProxy&) = delete;

    std::string url() const;  // http://127.0.0.1:<port>/graphql
    int connections() const { return connections_.load(); }
    // Client connections open now (accepted, not yet closed by the client or the proxy).
    int open_connections() const { return open_connections_.load(); }
    int requests() const { return requests_.load(); }
    // Requests that got the fault.
    int faults() const { return faults_.load(); }
    // Faulty requests whose answer arrived from the server (and was dropped).
    int answers_dropped() const { return answers_dropped_.load(); }

private:
    void accept_loop();
    void serve(int client);
    bool claim(const std::string& request);
    void refuse_connections();

    std::string upstream_host_;
    int upstream_port_;
    Fault fault_;
    FaultOptions options_;
    int listener_ = -1;
    int port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<int> connections_{0};
    std::atomic<int> open_connections_{0};
    std::atomic<int> requests_{0};
    std::atomic<int> faults_{0};
    std::atomic<int> answers_dropped_{0};
    // CrashAfterAnswer: the accept loop closes its listener until then, and says when it has.
    std::atomic<long long> refuse_until_ms_{0};
    std::atomic<bool> listening_{true};
    std::mutex mutex_;  // workers_, and the fault's counters below
    int claimed_ = 0;
    std::chrono::steady_clock::time_point limited_since_{};
    std::vector<std::thread> workers_;
    std::thread acceptor_;
};

// A local port nobody listens on (bound, then closed): connecting to it is refused.
int closed_port();

}  // namespace flow
