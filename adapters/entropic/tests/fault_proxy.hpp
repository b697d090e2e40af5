// A TCP fault injector in front of the real server (the way tests/tcp_proxy.py is): the
// first `faulty` connections get the fault, every later one is passed through untouched.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace flow {

enum class Fault {
    // Forward the request, read the server's answer and drop it, then keep the client
    // waiting: the client times out although the server did the work.
    SwallowAnswer,
    // Read the request and answer 503 (a gateway with no healthy upstream); nothing is
    // forwarded.
    Reply503,
    // Accept and read, never answer, never forward: a server that hangs.
    Blackhole,
};

class FaultProxy {
public:
    // Throws std::runtime_error when it cannot listen.
    FaultProxy(std::string upstream_host, int upstream_port, Fault fault, int faulty);
    ~FaultProxy();
    FaultProxy(const FaultProxy&) = delete;
    FaultProxy& operator=(const FaultProxy&) = delete;

    std::string url() const;  // http://127.0.0.1:<port>/graphql
    int connections() const { return connections_.load(); }
    // Faulty connections on which the server's answer arrived (and was dropped).
    int answers_dropped() const { return answers_dropped_.load(); }

private:
    void accept_loop();
    void serve(int client, bool faulty);
    void pass(int client, bool drop_answers);
    void reply_503(int client);
    void blackhole(int client);

    std::string upstream_host_;
    int upstream_port_;
    Fault fault_;
    int faulty_;
    int listener_ = -1;
    int port_ = 0;
    std::atomic<bool> stop_{false};
    std::atomic<int> connections_{0};
    std::atomic<int> answers_dropped_{0};
    std::mutex mutex_;
    std::vector<std::thread> workers_;
    std::thread acceptor_;
};

// A local port nobody listens on (bound, then closed): connecting to it is refused.
int closed_port();

}  // namespace flow
