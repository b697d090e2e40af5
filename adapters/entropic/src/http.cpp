#include "http.hpp"

#include <mutex>
#include <new>
#include <stdexcept>

namespace convograph::detail {
namespace {

// `url` without the user and password its authority may hold: libcurl resolves a relative
// Location against the URL asked, credentials included, and the URL goes into a log line.
std::string without_credentials(std::string url) {
    const std::size_t scheme = url.find("://");
    if (scheme == std::string::npos) {
        return url;
    }
    const std::size_t start = scheme + 3;
    const std::size_t end = url.find_first_of("/?#", start);
    const std::size_t at = url.rfind('@', end == std::string::npos ? url.size() - 1 : end - 1);
    if (at != std::string::npos && at >= start && (end == std::string::npos || at < end)) {
        url.erase(start, at + 1 - start);
    }
    return url;
}

constexpr std::size_t kMaxIdleHandles = 16;

// curl_global_init is not thread-safe in every libcurl: run it once, before any handle.
// curl_global_cleanup is never called: other code in the process may still use libcurl.
void init_curl_once() {
    static std::once_flag once;
    static CURLcode result = CURLE_OK;
    std::call_once(once, [] { result = curl_global_init(CURL_GLOBAL_DEFAULT); });
    if (result != CURLE_OK) {
        throw std::runtime_error(std::string("curl_global_init failed: ") +
                                 curl_easy_strerror(result));
    }
}

// Called by libcurl (C code): must not throw.
size_t append_body(char* data, size_t size, size_t count, void* target) noexcept {
    try {
        static_cast<std::string*>(target)->append(data, size * count);
        return size * count;
    } catch (...) {
        return 0;  // libcurl ends the transfer with CURLE_WRITE_ERROR
    }
}

// Whether no byte of the request was written. CURLINFO_REQUEST_SIZE counts every send of the
// transfer, libcurl's own re-send on a new connection included: a "could not connect" after
// such a re-send follows a request that did go out, and must not read as "never sent".
bool certainly_not_sent(CURL* handle) {
    long request_bytes = 0;  // bytes of request headers written so far
    return curl_easy_getinfo(handle, CURLINFO_REQUEST_SIZE, &request_bytes) == CURLE_OK &&
           request_bytes == 0;
}

long long retry_after_seconds(CURL* handle) {
#if LIBCURL_VERSION_NUM >= 0x074200  // 7.66.0
    curl_off_t seconds = 0;
    if (curl_easy_getinfo(handle, CURLINFO_RETRY_AFTER, &seconds) == CURLE_OK && seconds > 0) {
        return static_cast<long long>(seconds);  // a date in the past is negative before 8.12
    }
#else
    (void)handle;
#endif
    return 0;
}

}  // namespace

std::string graphql_endpoint(const std::string& url) {
    const std::size_t scheme = url.find("://");
    const std::size_t authority = scheme == std::string::npos ? 0 : scheme + 3;
    const std::size_t path = url.find_first_of("/?#", authority);
    if (path == std::string::npos) {
        return url + "/graphql";
    }
    if (url.compare(path, std::string::npos, "/") == 0) {
        return url.substr(0, path) + "/graphql";
    }
    return url;
}

HttpClient::HttpClient(std::string url, const std::string& token,
                       std::chrono::milliseconds connect_timeout,
                       std::chrono::milliseconds timeout)
    : url_(graphql_endpoint(url)),
      connect_timeout_ms_(static_cast<long>(connect_timeout.count())),
      timeout_ms_(static_cast<long>(timeout.count())) {
    init_curl_once();
    const std::string auth = "Authorization: Bearer " + token;
    for (const char* header : {auth.c_str(), "Content-Type: application/json",
                               "Accept: application/json"}) {
        curl_slist* next = curl_slist_append(headers_, header);
        if (next == nullptr) {
            curl_slist_free_all(headers_);
            throw std::bad_alloc();
        }
        headers_ = next;
    }
}

HttpClient::~HttpClient() {
    for (CURL* handle : idle_) {
        curl_easy_cleanup(handle);
    }
    curl_slist_free_all(headers_);
}

CURL* HttpClient::acquire() const {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!idle_.empty()) {
            CURL* handle = idle_.back();
            idle_.pop_back();
            return handle;
        }
    }
    CURL* handle = curl_easy_init();
    if (handle == nullptr) {
        throw std::bad_alloc();
    }
    return handle;
}

void HttpClient::release(CURL* handle) const noexcept {
    curl_easy_reset(handle);  // keeps the handle's connection cache
    std::lock_guard<std::mutex> lock(mutex_);
    if (idle_.size() < kMaxIdleHandles) {
        try {
            idle_.push_back(handle);
            return;
        } catch (...) {
        }
    }
    curl_easy_cleanup(handle);
}

HttpResult HttpClient::post(const std::string& body, Connection connection) const {
    struct Lease {
        const HttpClient& owner;
        CURL* handle;
        ~Lease() { owner.release(handle); }
    } lease{*this, acquire()};
    CURL* h = lease.handle;

    HttpResult result;
    char error[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(h, CURLOPT_URL, url_.c_str());
#if LIBCURL_VERSION_NUM >= 0x075500  // 7.85.0
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(h, CURLOPT_PROTOCOLS, CURLPROTO_HTTP | CURLPROTO_HTTPS);
#endif
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for timeouts: thread-safe
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);  // a redirect is reported, not followed
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, connect_timeout_ms_);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms_);
    curl_easy_setopt(h, CURLOPT_TCP_KEEPALIVE, 1L);
    // A connection of its own, closed when the transfer ends: left in the handle's cache it
    // would stay open beside the one the reads reuse (libcurl keeps up to 5 per handle), each
    // counted against the server's connection limit until the server drops it.
    const long fresh = connection == Connection::Fresh ? 1L : 0L;
    curl_easy_setopt(h, CURLOPT_FRESH_CONNECT, fresh);
    curl_easy_setopt(h, CURLOPT_FORBID_REUSE, fresh);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, headers_);
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, append_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &result.body);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, error);

    result.code = curl_easy_perform(h);
    if (result.code == CURLE_OK) {
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &result.status);
        result.maybe_sent = true;
        result.retry_after_s = retry_after_seconds(h);
        char* location = nullptr;  // the Location resolved against the URL asked; owned by curl
        if (result.status / 100 == 3 &&
            curl_easy_getinfo(h, CURLINFO_REDIRECT_URL, &location) == CURLE_OK &&
            location != nullptr) {
            result.location = without_credentials(location);
        }
    } else {
        result.error = error[0] != '\0' ? error : curl_easy_strerror(result.code);
        result.maybe_sent = !certainly_not_sent(h);
    }
    return result;
}

}  // namespace convograph::detail
