#include "fault_proxy.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <stdexcept>

namespace flow {
namespace {

constexpr int kPollMs = 50;

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
    addr.sin_port = 0;
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

bool send_all(int fd, const char* data, std::size_t size) {
    while (size > 0) {
        const ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL);
        if (n <= 0) {
            return false;
        }
        data += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

// Waits for `fd` to become readable; false on timeout (so the caller can look at stop_).
bool readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return ::poll(&p, 1, kPollMs) > 0;
}

// Whether `request` holds a complete HTTP request (headers and Content-Length bytes).
bool complete_request(const std::string& request) {
    const std::size_t end = request.find("\r\n\r\n");
    if (end == std::string::npos) {
        return false;
    }
    std::string headers = request.substr(0, end);
    std::transform(headers.begin(), headers.end(), headers.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    const std::size_t at = headers.find("\r\ncontent-length:");
    const std::size_t length =
        at == std::string::npos ? 0 : std::stoul(headers.substr(at + 17));
    return request.size() >= end + 4 + length;
}

}  // namespace

int closed_port() {
    int port = 0;
    const int fd = listen_local(port);
    ::close(fd);
    return port;
}

FaultProxy::FaultProxy(std::string upstream_host, int upstream_port, Fault fault, int faulty)
    : upstream_host_(std::move(upstream_host)),
      upstream_port_(upstream_port),
      fault_(fault),
      faulty_(faulty) {
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
    ::close(listener_);
}

std::string FaultProxy::url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/graphql";
}

void FaultProxy::accept_loop() {
    while (!stop_) {
        if (!readable(listener_)) {
            continue;
        }
        const int client = ::accept(listener_, nullptr, nullptr);
        if (client < 0) {
            continue;
        }
        const bool faulty = ++connections_ <= faulty_;
        std::lock_guard<std::mutex> lock(mutex_);
        workers_.emplace_back([this, client, faulty] {
            serve(client, faulty);
            ::close(client);
        });
    }
}

void FaultProxy::serve(int client, bool faulty) {
    if (!faulty) {
        pass(client, /*drop_answers=*/false);
        return;
    }
    switch (fault_) {
        case Fault::SwallowAnswer:
            pass(client, /*drop_answers=*/true);
            break;
        case Fault::Reply503:
            reply_503(client);
            break;
        case Fault::Blackhole:
            blackhole(client);
            break;
    }
}

void FaultProxy::pass(int client, bool drop_answers) {
    const int upstream = connect_to(upstream_host_, upstream_port_);
    if (upstream < 0) {
        return;
    }
    bool dropped = false;
    bool upstream_open = true;
    char buffer[16384];
    while (!stop_) {
        pollfd p[2] = {{client, POLLIN, 0}, {upstream, POLLIN, 0}};
        if (::poll(p, upstream_open ? 2 : 1, kPollMs) <= 0) {
            continue;
        }
        if (p[0].revents != 0) {
            const ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
            if (n <= 0 || !send_all(upstream, buffer, static_cast<std::size_t>(n))) {
                break;
            }
        }
        if (upstream_open && p[1].revents != 0) {
            const ssize_t n = ::recv(upstream, buffer, sizeof buffer, 0);
            if (n <= 0) {
                if (drop_answers) {
                    upstream_open = false;  // keep the client waiting until it gives up
                    continue;
                }
                break;
            }
            if (drop_answers) {
                if (!dropped) {
                    dropped = true;
                    ++answers_dropped_;
                }
                continue;
            }
            if (!send_all(client, buffer, static_cast<std::size_t>(n))) {
                break;
            }
        }
    }
    ::close(upstream);
}

void FaultProxy::reply_503(int client) {
    std::string request;
    char buffer[16384];
    while (!stop_ && !complete_request(request)) {
        if (!readable(client)) {
            continue;
        }
        const ssize_t n = ::recv(client, buffer, sizeof buffer, 0);
        if (n <= 0) {
            return;
        }
        request.append(buffer, static_cast<std::size_t>(n));
    }
    static const char kAnswer[] =
        "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
        "Content-Length: 46\r\nConnection: close\r\n\r\n"
        "{\"errors\":[{\"message\":\"no healthy upstream\"}]}";
    send_all(client, kAnswer, sizeof kAnswer - 1);
}

void FaultProxy::blackhole(int client) {
    char buffer[16384];
    while (!stop_) {
        if (readable(client) && ::recv(client, buffer, sizeof buffer, 0) <= 0) {
            return;
        }
    }
}

}  // namespace flow
