// HTTP POST over libcurl's easy interface, safe to use from several threads.
//
// Each request has an easy handle to itself: handles wait in a small pool between requests
// so that connections are reused, and a handle is never used by two threads at once.
//
// libcurl re-sends a request by itself when a reused connection dies before any byte of the
// answer ("Connection died, retrying a fresh connect"), even a POST the server may already
// have run: a request that must not run twice goes over a connection of its own
// (Connection::Fresh), where libcurl never does that, and which is closed after it.
#pragma once

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include <curl/curl.h>

namespace convograph::detail {

struct HttpResult {
    CURLcode code = CURLE_OK;  // CURLE_OK when an HTTP answer arrived
    long status = 0;           // its status code
    std::string body;          // its body
    std::string error;         // libcurl's message when code != CURLE_OK
    // False when the request certainly never reached the server (no byte of it written, in
    // this attempt or in a re-send libcurl made by itself): then repeating it is safe whatever
    // it does.
    bool maybe_sent = true;
    // The answer's Retry-After in seconds (a date already turned into seconds); 0 when none.
    long long retry_after_s = 0;
    // Where a redirect (3xx with a Location) points, as an absolute URL; "" otherwise. It is
    // never followed: libcurl would send a 301/302/303's POST on as a GET without its body.
    std::string location;
};

enum class Connection {
    Reuse,  // an idle connection may carry it: libcurl may re-send it on its own
    // A new connection, closed after the answer: libcurl sends it once, each attempt is the
    // adapter's own, and a pooled handle keeps no more than its one reusable connection.
    Fresh,
};

class HttpClient {
public:
    // Throws std::runtime_error when libcurl cannot be initialised.
    HttpClient(std::string url, const std::string& token, std::chrono::milliseconds connect_timeout,
               std::chrono::milliseconds timeout);
    ~HttpClient();
    HttpClient(const HttpClient&) = delete;
    HttpClient& operator=(const HttpClient&) = delete;

    // One POST of a JSON body. Throws only std::bad_alloc.
    HttpResult post(const std::string& body, Connection connection) const;

private:
    CURL* acquire() const;
    void release(CURL* handle) const noexcept;

    std::string url_;
    curl_slist* headers_ = nullptr;
    long connect_timeout_ms_;
    long timeout_ms_;
    mutable std::mutex mutex_;
    mutable std::vector<CURL*> idle_;
};

// The endpoint for a configured URL: "/graphql" is appended when the URL has no path.
std::string graphql_endpoint(const std::string& url);

}  // namespace convograph::detail
