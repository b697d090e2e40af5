#include "fault_proxy.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <stdexcept>

namespace flow {
namespace {

constexpr int kPollMs = 50;

long long now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Listens on 127.0.0.1:`port` (0: any free port, written back).
int listen_local(int& port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        throw std::runtime_error("socket() failed");
    }
    int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd, 64) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        ::close(fd);
        throw std::runtime_error("cannot listen on 127.0.0.1");
    }
    port = ntohs(addr.sin_port);
    return fd;
}

int connect_to(const std::string& host, int port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) {
        return -1;
    }
    int fd = -1;
    for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
        fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
        if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
            ::close(fd);
            fd = -1;
        }
    }
    ::freeaddrinfo(found);
    return fd;
}

bool send_all(int fd, const std::string& data) {
    const char* at = data.data();
    std::size_t size = data.size();
    while (size > 0) {
        const ssize_t n = ::send(fd, at, size, MSG_NOSIGNAL);
        if (n <= 0) {
            return false;
        }
        at += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

// Waits for `fd` to become readable; false on timeout (so the caller can look at stop).
bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, kPollMs) > 0;
}

// The length of the HTTP message `buffer` starts with (headers and Content-Length bytes of
// body), or 0 while it is incomplete.
std::size_t message_size(const std::string& buffer) {
    const std::size_t end = buffer.find("\r\n\r\n");
    if (end == std::string::npos) {
        return 0;
    }
    std::string headers = buffer.substr(0, end);
    std::transform(headers.begin(), headers.end(), headers.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const std::size_t at = headers.find("\r\ncontent-length:");
    const std::size_t length = at == std::string::npos ? 0 : std::stoul(headers.substr(at + 17));
    const std::size_t total = end + 4 + length;
    return buffer.size() >= total ? total : 0;
}

// Reads the next whole message from `fd` into `message`; `pending` keeps what came after it.
// False on end of stream, an error, or `stop`.
bool read_message(int fd, std::string& pending, std::string& message,
                  const std::atomic<bool>& stop) {
    char buffer[16384];
    for (;;) {
        const std::size_t size = message_size(pending);
        if (size > 0) {
            message = pending.substr(0, size);
            pending.erase(0, size);
            return true;
        }
        if (stop) {
            return false;
        }
        if (!readable(fd)) {
            continue;
        }
        const ssize_t n = ::recv(fd, buffer, sizeof buffer, 0);
        if (n <= 0) {
            return false;
        }
        pending.append(buffer, static_cast<std::size_t>(n));
    }
}

// Reads and drops whatever the client sends until it closes (or stop): a client kept waiting.
void hold(int client, const std::atomic<bool>& stop) {
    char buffer[16384];
    while (!stop) {
        if (readable(client) && ::recv(client, buffer, sizeof buffer, 0) <= 0) {
            return;
        }
    }
}

std::string answer(const char* status, const std::string& body, const std::string& extra) {
    return std::string("HTTP/1.1 ") + status + "\r\nContent-Type: application/json\r\n" + extra +
           "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
}

}  // namespace

int closed_port() {
    int port = 0;
    const int fd = listen_local(port);
    ::close(fd);
    return port;
}

namespace {
FaultOptions first_requests(int faulty) {
    FaultOptions o;
    o.faulty = faulty;
    return o;
}
}  // namespace

FaultProxy::FaultProxy(std::string upstream_host, int upstream_port, Fault fault, int faulty)
    : FaultProxy(std::move(upstream_host), upstream_port, fault, first_requests(faulty)) {}

FaultProxy::FaultProxy(std::string upstream_host, int upstream_port, Fault fault,
                       FaultOptions options)
    : upstream_host_(std::move(upstream_host)),
      upstream_port_(upstream_port),
      fault_(fault),
      options_(std::move(options)) {
    listener_ = listen_local(port_);
    acceptor_ = std::thread([this] { accept_loop(); });
}

FaultProxy::~FaultProxy() {
    stop_ = true;
    acceptor_.join();
    std::lock_guard<std::mutex> lock(mutex_);
    for (std::thread& t : workers_) {
        t.join();
    }
    if (listening_) {
        ::close(listener_);
    }
}

std::string FaultProxy::url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/graphql";
}

void FaultProxy::accept_loop() {
    while (!stop_) {
        if (refuse_until_ms_ > now_ms()) {
            if (listening_) {
                ::close(listener_);  // a connection now is refused, as by a server that is down
                listening_ = false;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            continue;
        }
        if (!listening_) {
            try {
                int port = port_;
                listener_ = listen_local(port);  // back on the same port, as a restarted server
                listening_ = true;
            } catch (const std::runtime_error&) {
                std::this_thread::sleep_for(std::chrono::milliseconds(10));
                continue;
            }
        }
        if (!readable(listener_)) {
            continue;
        }
        const int client = ::accept(listener_, nullptr, nullptr);
        if (client < 0) {
            continue;
        }
        ++connections_;
        ++open_connections_;
        std::lock_guard<std::mutex> lock(mutex_);
        workers_.emplace_back([this, client] {
            serve(client);
            ::close(client);
            --open_connections_;
        });
    }
}

bool FaultProxy::claim(const std::string& request) {
    if (fault_ == Fault::PassThrough) {
        return false;
    }
    const std::size_t body = request.find("\r\n\r\n");
    if (!options_.match.empty() && request.find(options_.match, body) == std::string::npos) {
        return false;
    }
    std::lock_guard<std::mutex> lock(mutex_);
    if (fault_ == Fault::Reply429) {
        const auto now = std::chrono::steady_clock::now();
        if (claimed_++ == 0) {
            limited_since_ = now;
        }
        return now - limited_since_ < std::chrono::seconds(options_.retry_after_s);
    }
    if (claimed_ >= options_.faulty) {
        return false;
    }
    ++claimed_;
    return true;
}

void FaultProxy::refuse_connections() {
    refuse_until_ms_ = now_ms() + options_.refuse_ms;
    // The client must find the listener closed when it reconnects after the cut.
    while (listening_ && !stop_) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

void FaultProxy::serve(int client) {
    int upstream = -1;
    std::string from_client;
    std::string from_upstream;
    // Forwards `request` and reads the server's whole answer.
    const auto exchange = [&](const std::string& request, std::string& reply) {
        if (upstream < 0) {
            upstream = connect_to(upstream_host_, upstream_port_);
        }
        return upstream >= 0 && send_all(upstream, request) &&
               read_message(upstream, from_upstream, reply, stop_);
    };
    std::string request;
    std::string reply;
    while (read_message(client, from_client, request, stop_)) {
        ++requests_;
        if (!claim(request)) {
            if (!exchange(request, reply) || !send_all(client, reply)) {
                break;
            }
            continue;
        }
        ++faults_;
        if (fault_ == Fault::Reply429) {
            const std::string body =
                R"({"errors":[{"message":"rate limit exceeded for this token (fault proxy); retry after )" +
                std::to_string(options_.retry_after_s) +
                R"( s","extensions":{"code":"RATE_LIMITED","retryAfterSeconds":)" +
                std::to_string(options_.retry_after_s) + "}}]}";
            if (!send_all(client, answer("429 Too Many Requests", body,
                                         "Retry-After: " + std::to_string(options_.retry_after_s) +
                                             "\r\n"))) {
                break;
            }
            continue;
        }
        if (fault_ == Fault::DelayRequest) {
            std::this_thread::sleep_for(std::chrono::milliseconds(options_.delay_ms));
            if (!exchange(request, reply) || !send_all(client, reply)) {
                break;
            }
            continue;
        }
        if (fault_ == Fault::Reply200Unavailable || fault_ == Fault::AnswerUnavailable) {
            // What convograph answers under application/json (masking.py): before execution
            // no error has a `path`; a field that failed has one.
            std::string path;
            if (fault_ == Fault::AnswerUnavailable) {
                if (exchange(request, reply)) {
                    ++answers_dropped_;
                }
                path = R"(,"path":["fault"])";
            }
            const std::string body =
                R"({"data":null,"errors":[{"message":"the database is unavailable; retry shortly")" +
                path + R"(,"extensions":{"code":"DATABASE_UNAVAILABLE","requestId":"fault-proxy"}}]})";
            if (!send_all(client, answer("200 OK", body, ""))) {
                break;
            }
            continue;
        }
        if (fault_ == Fault::ReplyConflict) {
            const std::string body =
                R"({"data":{"appendMessages":{"conversation":null,"userErrors":[)"
                R"({"code":"CONFLICT","field":["expectedVersion"],)"
                R"("message":"version moved, fault proxy"}]}}})";
            if (!send_all(client, answer("200 OK", body, ""))) {
                break;
            }
            continue;
        }
        if (fault_ == Fault::ReplyEmptyData) {
            if (!send_all(client, answer("200 OK", R"({"data":{}})", ""))) {
                break;
            }
            continue;
        }
        if (fault_ == Fault::Redirect) {
            const std::string status = std::to_string(options_.redirect_status) + " Moved";
            const std::string location =
                options_.redirect_path
                    ? std::string("Location: /moved/graphql\r\n")
                    : "Location: http://127.0.0.1:" + std::to_string(port_) + "/moved/graphql\r\n";
            if (!send_all(client, answer(status.c_str(), "<html>moved</html>", location))) {
                break;
            }
            continue;
        }
        if (fault_ == Fault::Reply503BeforeExecution) {
            const std::string body =
                R"({"errors":[{"message":"The database is unavailable; retry.","extensions":)"
                R"({"code":"DATABASE_UNAVAILABLE","requestId":"fault-proxy"}}]})";
            if (!send_all(client, answer("503 Service Unavailable", body, ""))) {
                break;
            }
            continue;
        }
        switch (fault_) {
            case Fault::SwallowAnswer:
                if (exchange(request, reply)) {
                    ++answers_dropped_;
                }
                hold(client, stop_);
                break;
            case Fault::CutAnswer:
                if (exchange(request, reply)) {
                    ++answers_dropped_;
                }
                break;
            case Fault::CrashAfterAnswer:
                if (exchange(request, reply)) {
                    ++answers_dropped_;
                }
                refuse_connections();
                break;
            case Fault::Reply503:
                send_all(client, answer("503 Service Unavailable",
                                        R"({"errors":[{"message":"no healthy upstream"}]})",
                                        "Connection: close\r\n"));
                break;
            case Fault::Blackhole:
                hold(client, stop_);
                break;
            case Fault::PassThrough:
            case Fault::Reply429:
            case Fault::Reply503BeforeExecution:
            case Fault::DelayRequest:
            case Fault::Reply200Unavailable:
            case Fault::AnswerUnavailable:
            case Fault::ReplyConflict:
            case Fault::ReplyEmptyData:
            case Fault::Redirect:
                break;
        }
        break;  // the fault ends the connection (the caller closes it)
    }
    if (upstream >= 0) {
        ::close(upstream);
    }
}

}  // namespace flow
