// The entropic::StorageInterface callbacks. Each one runs its body inside guarded(): every
// exception ends as `false` plus one log line, and nothing crosses back into the engine.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>

#include "client.hpp"
#include "convograph/entropic.hpp"
#include "exact_json.hpp"
#include "ids.hpp"
#include "queries.hpp"
#include "shapes.hpp"
#include "utf8.hpp"

#if !defined(CONVOGRAPH_ENTROPIC_HEADERS)
// The stand-in declaration must keep entropic's member order (engine_types.h).
static_assert(offsetof(entropic::StorageInterface, create_conversation) == 0 * sizeof(void*));
static_assert(offsetof(entropic::StorageInterface, save_snapshot) == 1 * sizeof(void*));
static_assert(offsetof(entropic::StorageInterface, create_delegation) == 2 * sizeof(void*));
static_assert(offsetof(entropic::StorageInterface, complete_delegation) == 3 * sizeof(void*));
static_assert(offsetof(entropic::StorageInterface, save_conversation) == 4 * sizeof(void*));
static_assert(offsetof(entropic::StorageInterface, load_delegation_with_messages) ==
              5 * sizeof(void*));
static_assert(offsetof(entropic::StorageInterface, latest_delegation_for_target) ==
              6 * sizeof(void*));
static_assert(offsetof(entropic::StorageInterface, user_data) == 7 * sizeof(void*));
static_assert(sizeof(entropic::StorageInterface) == 8 * sizeof(void*));
#endif

namespace convograph {
namespace detail {

Client::Client(const Config& config)
    : max_attempts(config.max_attempts),
      budget(config.timeout * config.max_attempts),
      retry_backoff(config.retry_backoff),
      log(config.log),
      gql(config.url, config.token, config.connect_timeout,
          RetryPolicy{config.max_attempts, config.retry_backoff, config.timeout}) {}

Client* client_from(void* user_data) noexcept {
    auto* client = static_cast<Client*>(user_data);
    return client != nullptr && client->magic == Client::kMagic ? client : nullptr;
}

namespace {

// A callback's answer. `!ok` with an empty `why` is a negative answer (an unknown id, no
// completed delegation yet), not a failure: it is not logged.
struct Verdict {
    bool ok = false;
    std::string why;
};
Verdict success() { return {true, {}}; }
Verdict negative() { return {false, {}}; }
Verdict failure(std::string why) { return {false, std::move(why)}; }

// An input failure raised inside a body (a missing argument, invalid UTF-8).
struct BadInput : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

template <class Body>
bool guarded(const char* callback, void* user_data, Body&& body) noexcept {
    Client* client = client_from(user_data);
    if (client == nullptr) {
        Logger(nullptr).line(callback, "user_data is not a convograph storage client");
        return false;
    }
    try {
        const Verdict v = body(*client);
        if (!v.ok && !v.why.empty()) {
            client->log.line(callback, v.why);
        }
        return v.ok;
    } catch (const std::exception& e) {
        client->log.line(callback, e.what());
    } catch (...) {
        client->log.line(callback, "unknown exception");
    }
    return false;
}

// A required C-string argument, checked to be valid UTF-8.
std::string_view text_view_arg(const char* value, const char* name) {
    if (value == nullptr) {
        throw BadInput(std::string(name) + " is null");
    }
    const std::string_view view(value);
    const std::size_t bad = invalid_utf8_at(view);
    if (bad != std::string_view::npos) {
        throw BadInput(std::string(name) + " is not valid UTF-8 (byte " + std::to_string(bad) +
                       "); nothing was sent");
    }
    return view;
}

std::string text_arg(const char* value, const char* name) {
    return std::string(text_view_arg(value, name));
}

json optional_text_arg(const char* value, const char* name) {
    return value == nullptr ? json() : json(text_arg(value, name));
}

// The engine's messages_json, checked without building a document: valid JSON (UTF-8, no lone
// surrogate escapes), an array. Returns the text to splice into the request byte for byte, so
// that numbers keep their exact form; `empty` tells whether the array has no element.
std::string_view messages_arg(const char* messages_json, bool& empty) {
    std::string_view raw = text_view_arg(messages_json, "messages_json");
    if (!json::accept(raw)) {
        try {
            [[maybe_unused]] const json message_only = json::parse(raw);  // for its message
        } catch (const json::parse_error& e) {
            throw BadInput(std::string("messages_json is not valid JSON; nothing was sent: ") +
                           e.what());
        }
        throw BadInput("messages_json is not valid JSON; nothing was sent");
    }
    if (raw.substr(0, 3) == "\xEF\xBB\xBF") {
        raw.remove_prefix(3);  // a byte order mark: JSON text may not carry one inside
    }
    // accept() held it to be JSON: the array's brackets, if it is one, are there.
    const auto next = [&raw](std::size_t from) {
        return raw.find_first_not_of(" \t\r\n", from);
    };
    const std::size_t open = next(0);
    if (raw[open] != '[') {
        throw BadInput("messages_json is not a JSON array; nothing was sent");
    }
    empty = raw[next(open + 1)] == ']';
    return raw;
}

std::string splice_messages_body(const char* query, const std::string& conversation_id,
                                 std::string_view messages, const json& version = json()) {
    std::string body = R"({"query":)";
    body += json(query).dump();
    body += R"(,"variables":{"id":)";
    body += json(conversation_id).dump();
    body += R"(,"messages":)";
    body += messages;
    if (!version.is_null()) {
        body += R"(,"v":)" + version.dump();
    }
    body += "}}";
    return body;
}

// The answer's `field` (its data is an object): null (none) or an object. No such field, or
// anything else, is no answer the adapter can read: thrown (so logged), never taken for an
// unknown id or "none yet", which the engine takes as answers.
const json& node_or_null(const json& data, const char* field) {
    const auto found = data.find(field);
    if (found == data.end() || !(found->is_null() || found->is_object())) {
        throw std::runtime_error(std::string("the answer has no `") + field +
                                 "` (neither an object nor null)");
    }
    return *found;
}

std::string string_at(const json& value, const char* what) {
    if (!value.is_string() || value.get_ref<const std::string&>().empty()) {
        throw std::runtime_error(std::string("the answer has no ") + what);
    }
    return value.get<std::string>();
}

// -- the callbacks --------------------------------------------------------------------------

bool create_conversation(const char* title, std::string& conversation_id,
                         void* user_data) {
    return guarded("create_conversation", user_data, [&](Client& c) {
        json input = {{"title", optional_text_arg(title, "title")},
                      {"idempotencyKey", uuid4()}};  // one key for every attempt of this call
        const Outcome out =
            c.gql.run(request_body(queries::kCreateConversation, {{"input", input}}), Repeat::Safe);
        const Payload p = payload_of(out, "createConversation");
        if (!p.ok) {
            return failure(p.why);
        }
        const json& conversation = member(p.value, "conversation");
        conversation_id = string_at(member(conversation, "id"), "conversation id");
        return success();
    });
}

// The server refused the batch for its length alone (one append's limit), not a message.
bool refused_for_length(const Payload& p) {
    return p.codes.size() == 1 && p.codes[0] == "LIMIT_EXCEEDED" && p.fields[0] == "messages";
}

// The write's precondition no longer held: the count of messages (an append) or the version
// (a whole transcript) moved since they were read.
bool version_moved(const Payload& p) {
    return p.codes.size() == 1 && p.codes[0] == "CONFLICT" &&
           (p.fields[0] == "expectedMessageCount" || p.fields[0] == "expectedVersion");
}

// A conversation's transcript as read just before a write to it.
struct TranscriptState {
    json version;          // what the write expects (expectedVersion)
    long long count = 0;   // messages held: a batch appended over `version` starts after them
};

// Reads it; a failure (or an unknown conversation) is returned as the callback's answer.
Verdict read_state(Client& c, const std::string& id, TranscriptState& state) {
    const Outcome out =
        c.gql.run(request_body(queries::kTranscriptState, {{"id", id}}), Repeat::Safe);
    if (!out.ok) {
        return failure("reading the conversation failed: " + out.error);
    }
    const json& conversation = node_or_null(out.data, "conversation");
    if (conversation.is_null()) {
        return failure("NOT_FOUND (conversationId): conversation not found; nothing was sent");
    }
    const json& count = member(conversation, "messageCount");
    state.version = member(conversation, "version");
    if (!count.is_number_integer() || !state.version.is_number_integer()) {
        throw std::runtime_error("the answer has no messageCount and version");
    }
    state.count = count.get<long long>();
    return success();
}

enum class Found { Yes, No, Unknown };

// After a CONFLICT that may follow this call's own attempt (its answer lost): whether the
// transcript holds `messages` from position `from` on. Compared as values (key order and
// number spelling aside), as the server hands them back.
Found stored_from(Client& c, const std::string& id, long long from, std::string_view messages) {
    const Outcome out = c.gql.run(
        request_body(queries::kTranscriptFrom, {{"id", id}, {"from", from}}), Repeat::Safe);
    const json& transcript = member(member(out.data, "conversation"), "transcript");
    if (!out.ok || !transcript.is_array()) {
        return Found::Unknown;
    }
    const nlohmann::json sent = nlohmann::json::parse(messages);
    const nlohmann::json held = nlohmann::json::parse(exact_dump(transcript));
    if (held.size() < sent.size()) {
        return Found::No;
    }
    for (std::size_t i = 0; i < sent.size(); ++i) {
        if (held[i] != sent[i]) {
            return Found::No;
        }
    }
    return Found::Yes;
}

// save_conversation: the batch appended after the messages just counted
// (expectedMessageCount), so that a lost answer is safe to repeat: if an attempt stored it, a
// repeat is refused with CONFLICT. The count moves only with the transcript: a delegation
// created or completed under the conversation, a snapshot or a title do not refuse it (the
// version, which they move, did so under steady delegation traffic until the batch ran out of
// attempts). After a CONFLICT the conversation is read again, and what its messageCount did
// tells why:
// - unchanged (a whole transcript's replace, which is over the version, met a delegation; or
//   a replace by another client to the same length): nobody appended, this call included.
//   The same batch goes again; that is not a round, but is done only while the call is
//   within its budget (max_attempts x timeout since it began, and at least max_attempts
//   times), and from the second time on after a wait (retry_backoff, doubled up to four times
//   it, with jitter).
// - moved, and an attempt of this call may have arrived: the batch is looked for where it
//   was to go. There, the lost attempt stored it: true. So would another writer's identical
//   batch appended there at the same moment be taken (appendMessages has no idempotency key):
//   both calls true, one copy stored. One writer per conversation, as entropic has, is safe.
// - moved otherwise: another writer appended. The batch goes after it, one round of at most
//   max_attempts.
//
// A batch refused for its length alone into a conversation with no message yet (a resume
// through the callbacks seeds its new child so) is saved as the whole transcript
// (replaceTranscript, a hundred appends' bound) over the same version, the same way; once
// another writer added a message it no longer can be, and the append's refusal stands.
Verdict append_batch(Client& c, const std::string& id, std::string_view messages) {
    const auto began = std::chrono::steady_clock::now();
    TranscriptState state;
    Verdict read = read_state(c, id, state);
    if (!read.ok) {
        return read;
    }
    bool whole = false;       // the batch goes as the whole transcript
    std::string too_long;     // then: the append's refusal
    int rounds = 1;           // rounds in which another writer appended
    int rereads = 0;          // CONFLICTs with no message added
    for (;;) {
        const Outcome out = c.gql.run(
            whole ? splice_messages_body(queries::kReplaceTranscript, id, messages, state.version)
                  : splice_messages_body(queries::kAppendMessages, id, messages, state.count),
            Repeat::Reconciled);
        const Payload p = payload_of(out, whole ? "replaceTranscript" : "appendMessages");
        if (p.ok) {
            return success();
        }
        if (!whole && refused_for_length(p)) {
            if (state.count != 0) {
                return failure(p.why);
            }
            whole = true;
            too_long = p.why;
            continue;
        }
        if (!version_moved(p)) {
            return failure(p.why);
        }
        const std::string may_have_stored =
            out.earlier_attempt_maybe_applied ? ": the write may have been stored" : "";
        if (rereads > 0) {
            // The version moved with no message added before, and moved again: something is
            // changing the conversation (delegations under it). Wait before reading it again,
            // as any retry does, so that the batch is not sent again and again, each time over
            // a new connection, for as long as that goes on; past the first max_attempts
            // re-sends, no longer than what is left of the call's budget.
            auto wait = backoff(c.retry_backoff, rereads, Client::kRereadDoublings);
            if (rereads >= c.max_attempts) {
                const auto left = c.budget - std::chrono::duration_cast<std::chrono::milliseconds>(
                                                 std::chrono::steady_clock::now() - began);
                wait = std::max(std::chrono::milliseconds(0), std::min(wait, left));
            }
            std::this_thread::sleep_for(wait);
        }
        TranscriptState now;
        read = read_state(c, id, now);
        if (!read.ok) {
            return failure(p.why + "; " + read.why + may_have_stored);
        }
        if (now.count == state.count) {
            const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::steady_clock::now() - began);
            if (rereads >= c.max_attempts && spent >= c.budget) {
                return failure(p.why + " (the version moved " + std::to_string(rereads + 1) +
                               " times in " + std::to_string(spent.count()) +
                               " ms with no message added: not repeated past this call's "
                               "budget)");
            }
            ++rereads;
            state = now;
            continue;
        }
        if (out.earlier_attempt_maybe_applied) {
            switch (stored_from(c, id, state.count + 1, messages)) {
                case Found::Yes:
                    return success();
                case Found::Unknown:
                    return failure(p.why + "; reading it back failed" + may_have_stored);
                case Found::No:
                    break;
            }
        }
        if (whole) {
            return failure(too_long + " (another writer added messages: it is not saved as the "
                                      "whole transcript)");
        }
        if (rounds >= c.max_attempts) {
            return failure(p.why + " (" + std::to_string(rounds) +
                           " rounds: other writers kept adding messages)");
        }
        ++rounds;
        state = now;
    }
}

bool save_conversation(const char* conversation_id, const char* messages_json, void* user_data) {
    return guarded("save_conversation", user_data, [&](Client& c) {
        const std::string id = text_arg(conversation_id, "conversation_id");
        bool empty = false;
        const std::string_view messages = messages_arg(messages_json, empty);
        if (empty) {
            return success();  // the server refuses an empty batch; the engine means "nothing new"
        }
        return append_batch(c, id, messages);
    });
}

bool save_snapshot(const char* conversation_id, const char* messages_json, void* user_data) {
    return guarded("save_snapshot", user_data, [&](Client& c) {
        const std::string id = text_arg(conversation_id, "conversation_id");
        bool empty = false;
        const std::string_view messages = messages_arg(messages_json, empty);
        // Not repeated once the request may have arrived: saveSnapshot takes no key and no
        // version, and a second snapshot would be a duplicate.
        const Outcome out = c.gql.run(
            splice_messages_body(queries::kSaveSnapshot, id, messages), Repeat::IfNotSent);
        const Payload p = payload_of(out, "saveSnapshot");
        if (!p.ok) {
            return failure(p.why);
        }
        return success();
    });
}

bool refused_idempotency_key(const Outcome& out) {
    if (!out.errors.is_array()) {
        return false;
    }
    for (const json& e : out.errors) {
        const std::string message = e.is_object() ? e.value("message", std::string()) : "";
        if (message.find("idempotencyKey") != std::string::npos) {
            return true;
        }
    }
    return false;
}

bool create_delegation(const char* parent_id, const char* delegating_tier,
                       const char* target_tier, const char* task, int max_turns,
                       std::string& delegation_id, std::string& child_conversation_id,
                       void* user_data) {
    return guarded("create_delegation", user_data, [&](Client& c) {
        json input = {
            {"parentConversationId", text_arg(parent_id, "parent_id")},
            {"delegatingTier", text_arg(delegating_tier, "delegating_tier")},
            {"targetTier", text_arg(target_tier, "target_tier")},
            {"task", text_arg(task, "task")},
            {"maxTurns", max_turns},  // the server stores <= 0 as null (unlimited)
        };
        Outcome out;
        if (c.delegation_keys.load() != Client::kKeysRefused) {
            input["idempotencyKey"] = uuid4();
            out = c.gql.run(request_body(queries::kCreateDelegation, {{"input", input}}),
                            Repeat::Safe);
            if (!out.ok && refused_idempotency_key(out)) {
                // An older server: the document was refused before anything ran.
                if (c.delegation_keys.exchange(Client::kKeysRefused) != Client::kKeysRefused) {
                    c.log.line("create_delegation",
                               "the server does not accept CreateDelegationInput.idempotencyKey: "
                               "create_delegation is not retried once a request may have "
                               "arrived");
                }
                input.erase("idempotencyKey");
            } else if (out.ok) {
                c.delegation_keys.store(Client::kKeysAccepted);
            }
        }
        if (!input.contains("idempotencyKey")) {
            out = c.gql.run(request_body(queries::kCreateDelegation, {{"input", input}}),
                            Repeat::IfNotSent);
        }
        const Payload p = payload_of(out, "createDelegation");
        if (!p.ok) {
            return failure(p.why);
        }
        const json& d = member(p.value, "delegation");
        std::string id = string_at(member(d, "id"), "delegation id");
        std::string child =
            string_at(member(member(d, "childConversation"), "id"), "child conversation id");
        delegation_id = std::move(id);
        child_conversation_id = std::move(child);
        return success();
    });
}

// After a lost answer, INVALID_TRANSITION may be our own first attempt: it is, when the
// delegation now holds exactly the status and summary this call sent.
bool already_completed_so(Client& c, const std::string& id, const std::string& status,
                          const json& summary) {
    const Outcome out = c.gql.run(request_body(queries::kDelegationState, {{"id", id}}),
                                  Repeat::Safe);
    const json& d = member(out.data, "delegation");
    return out.ok && member(d, "status") == status && member(d, "summary") == summary;
}

bool complete_delegation(const char* delegation_id, const char* status, const char* summary,
                         void* user_data) {
    return guarded("complete_delegation", user_data, [&](Client& c) {
        const std::string id = text_arg(delegation_id, "delegation_id");
        const std::string given = lower_status(text_arg(status, "status"));
        if (given != "completed" && given != "failed") {
            return failure("status must be \"completed\" or \"failed\", not \"" + given + "\"");
        }
        const std::string wanted = given == "completed" ? "COMPLETED" : "FAILED";
        const json summary_value = optional_text_arg(summary, "summary");
        const json input = {{"delegationId", id}, {"status", wanted}, {"summary", summary_value}};
        // Reconciled: a repeat after a lost answer is refused (INVALID_TRANSITION) when the
        // first attempt completed it, and every attempt must be seen to tell so.
        const Outcome out = c.gql.run(
            request_body(queries::kCompleteDelegation, {{"input", input}}), Repeat::Reconciled);
        const Payload p = payload_of(out, "completeDelegation");
        if (p.ok) {
            return success();
        }
        const bool transition = p.codes.size() == 1 && p.codes[0] == "INVALID_TRANSITION";
        if (transition && out.earlier_attempt_maybe_applied &&
            already_completed_so(c, id, wanted, summary_value)) {
            return success();
        }
        return failure(p.why);
    });
}

bool load_delegation_with_messages(const char* delegation_id, std::string& result_json,
                                   void* user_data) {
    return guarded("load_delegation_with_messages", user_data, [&](Client& c) {
        const std::string id = text_arg(delegation_id, "delegation_id");
        const Outcome out =
            c.gql.run(request_body(queries::kLoadDelegation, {{"id", id}}), Repeat::Safe);
        if (!out.ok) {
            return failure(out.error);
        }
        const json& d = node_or_null(out.data, "delegation");
        if (d.is_null()) {
            return negative();  // unknown delegation_id (or another owner's)
        }
        result_json = exact_dump(load_result(d));
        return success();
    });
}

// Unused against an engine header without the member (see set_latest_delegation).
[[maybe_unused]] bool latest_delegation_for_target(const char* target_tier,
                                                   std::string& delegation_id, void* user_data) {
    return guarded("latest_delegation_for_target", user_data, [&](Client& c) {
        const std::string tier = text_arg(target_tier, "target_tier");
        const Outcome out =
            c.gql.run(request_body(queries::kLatestDelegation, {{"tier", tier}}), Repeat::Safe);
        if (!out.ok) {
            return failure(out.error);
        }
        const json& d = node_or_null(out.data, "latestDelegation");
        if (d.is_null()) {
            return negative();  // no COMPLETED delegation to that tier
        }
        delegation_id = string_at(member(d, "id"), "delegation id");
        return success();
    });
}

// Whether the engine's StorageInterface has latest_delegation_for_target: entropic's header
// has it from v2.13.0 on (gh#162); v2.10.4's struct ends at load_delegation_with_messages.
template <class S, class = void>
struct has_latest_delegation : std::false_type {};
template <class S>
struct has_latest_delegation<S, std::void_t<decltype(&S::latest_delegation_for_target)>>
    : std::true_type {};

template <class S>
void set_latest_delegation(S& storage) {
    if constexpr (has_latest_delegation<S>::value) {
        storage.latest_delegation_for_target = latest_delegation_for_target;
    }
}

}  // namespace
}  // namespace detail

entropic::StorageInterface make_storage_interface(const Config& config) {
    if (config.url.empty()) {
        throw std::invalid_argument("convograph::Config::url is empty");
    }
    if (config.token.empty()) {
        throw std::invalid_argument("convograph::Config::token is empty");
    }
    // Sent as given, a line break ended the Authorization header (what followed went out as
    // another header), a NUL cut the token short, and any other control character went out
    // in it: each call logged a bare HTTP 400 or 401, a server to blame for a token to fix.
    if (std::any_of(config.token.begin(), config.token.end(), [](char ch) {
            const auto byte = static_cast<unsigned char>(ch);
            return byte < 0x20 || byte == 0x7F;
        })) {
        throw std::invalid_argument(
            "convograph::Config::token holds a control character (a line break read with it "
            "from a file or the environment?)");
    }
    if (config.max_attempts < 1) {
        throw std::invalid_argument("convograph::Config::max_attempts must be at least 1");
    }
    if (config.connect_timeout.count() <= 0 || config.timeout.count() <= 0 ||
        config.retry_backoff.count() < 0) {
        throw std::invalid_argument(
            "convograph::Config: the timeouts must be positive and retry_backoff not negative");
    }
    entropic::StorageInterface storage;
    storage.create_conversation = detail::create_conversation;
    storage.save_snapshot = detail::save_snapshot;
    storage.create_delegation = detail::create_delegation;
    storage.complete_delegation = detail::complete_delegation;
    storage.save_conversation = detail::save_conversation;
    storage.load_delegation_with_messages = detail::load_delegation_with_messages;
    detail::set_latest_delegation(storage);  // an engine header before v2.13.0 has none
    storage.user_data = new detail::Client(config);
    return storage;
}

void destroy_storage_interface(entropic::StorageInterface& storage) noexcept {
    delete detail::client_from(storage.user_data);
    storage = entropic::StorageInterface{};
}

bool search_delegations(const entropic::StorageInterface& storage, const char* query,
                        int max_results, std::string& result_json) noexcept {
    using detail::Client;
    return detail::guarded("search_delegations", storage.user_data, [&](Client& c) {
        const std::string text = detail::text_arg(query, "query");
        const int first = max_results < 1 ? 1 : (max_results > 10 ? 10 : max_results);
        const detail::Outcome out = c.gql.run(
            detail::request_body(detail::queries::kSearchDelegations,
                                 {{"query", text}, {"first", first}}),
            detail::Repeat::Safe);
        if (!out.ok) {
            return detail::failure(out.error);
        }
        const detail::json entries =
            detail::followup_entries(detail::member(out.data, "searchDelegations"));
        result_json = detail::exact_dump(entries);
        return detail::success();
    });
}

}  // namespace convograph
