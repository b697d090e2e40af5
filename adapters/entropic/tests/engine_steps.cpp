// The engine's own path through the callbacks, in the order AgentEngine makes them.
#include <cstdlib>
#include <string>

#include "scenario.hpp"

namespace flow {
namespace {

const char* kRootCount = "{ conversations(filter: {rootOnly: true}) { totalCount } }";

// What load_delegation_with_messages must give the engine for a stored message.
json as_engine_reads_it(const json& message) {
    json copy = message;
    if (!copy.contains("content") || copy["content"].is_null()) {
        copy["content"] = "";
    } else if (!copy["content"].is_string()) {
        copy["content"] = copy["content"].dump();
    }
    return copy;
}

// What the engine's parser requires of the loaded object (else it throws or reports
// "target_tier missing in storage").
bool engine_can_parse(const json& loaded, std::string& why) {
    if (!loaded.is_object()) {
        why = "not an object";
        return false;
    }
    for (const char* key : {"delegation_id", "target_tier", "messages", "conversation"}) {
        if (!loaded.contains(key)) {
            why = std::string("no ") + key;
            return false;
        }
    }
    if (!loaded["target_tier"].is_string() || loaded["target_tier"].get<std::string>().empty()) {
        why = "target_tier missing in storage";
        return false;
    }
    if (!loaded["messages"].is_array()) {
        why = "messages is not an array";
        return false;
    }
    for (const json& m : loaded["messages"]) {
        if (!m.is_object() || !m.contains("role") || !m["role"].is_string() ||
            !m.contains("content") || !m["content"].is_string()) {
            why = "a message without a string role and content: " + m.dump();
            return false;
        }
    }
    const json& c = loaded["conversation"];
    for (const char* key : {"id", "title", "created_at", "updated_at", "metadata"}) {
        if (!c.is_object() || !c.contains(key)) {
            why = std::string("conversation has no ") + key;
            return false;
        }
    }
    return true;
}

struct Delegated {
    std::string id;
    std::string child;
};

// One failing call must log exactly one line.
void expect_one_line(Context& ctx, std::size_t before, const std::string& what,
                     const std::string& mentions) {
    ctx.check(ctx.log.size() == before + 1, what + ": logs exactly one line");
    if (!mentions.empty()) {
        ctx.check(ctx.log.last().find(mentions) != std::string::npos,
                  what + ": the line says " + mentions + " (" + ctx.log.last() + ")");
    }
}

}  // namespace

void run_engine_flow(Context& ctx) {
    entropic::StorageInterface& s = ctx.storage;
    const std::string researcher = "researcher-" + ctx.tag;
    const std::string tester = "tester-" + ctx.tag;
    const std::string flow_tag = "flow-" + ctx.tag;

    // AgentEngine::run(): the root row first (gh#48).
    const int roots_before = ctx.probe(kRootCount)["conversations"]["totalCount"].get<int>();
    std::string root;
    ctx.check(s.create_conversation("session", root, s.user_data), "create_conversation");
    ctx.check(root.size() == 36, "create_conversation gives a 36-character id: " + root);
    ctx.created_root(root);
    ctx.summary["root_conversation_id"] = root;

    // The lead's turns, appended batch by batch.
    const json turn1 = json::array({
        {{"role", "system"}, {"content", "You are the lead."}, {"identity_tier", "lead"}},
        {{"role", "user"},
         {"content", "Where is the pricing page? Ünïcödé ✓"},
         {"token_count", 9}},
    });
    const json turn2 = json::array({
        {{"role", "assistant"},
         {"content", "Delegating to the researcher."},
         {"tool_calls",
          json::array({{{"id", "call_1"},
                        {"type", "function"},
                        {"function",
                         {{"name", "delegate"}, {"arguments", "{\"tier\":\"researcher\"}"}}}}})},
         {"token_count", 12},
         {"is_compacted", false},
         {"identity_tier", "lead"}},
    });
    for (const json& turn : {turn1, turn2}) {
        ctx.check(s.save_conversation(root.c_str(), turn.dump().c_str(), s.user_data),
                  "save_conversation(root)");
        ctx.stored(root, turn);
    }
    ctx.check(s.save_conversation(root.c_str(), "[]", s.user_data) &&
                  s.save_conversation(root.c_str(), "\xEF\xBB\xBF [ ]\n", s.user_data),
              "save_conversation with an empty batch is a no-op that succeeds");

    // Compaction: the full history before it, role and content only.
    json history = json::array();
    for (const json& m : ctx.summary["sent"][root]) {
        history.push_back({{"role", m["role"]}, {"content", m["content"]}});
    }
    ctx.check(s.save_snapshot(root.c_str(), history.dump().c_str(), s.user_data),
              "save_snapshot(root)");
    ctx.summary["snapshot"] = {{"conversation_id", root}, {"messages", history}};

    // delegate: a child conversation and a RUNNING delegation.
    const std::string task =
        "Find the pricing page and summarise every tier, with prices and the limits of each";
    Delegated first;
    ctx.check(s.create_delegation(root.c_str(), "lead", researcher.c_str(), task.c_str(), 8,
                                  first.id, first.child, s.user_data),
              "create_delegation");
    ctx.check(first.id.size() == 36 && first.child.size() == 36 && first.id != first.child,
              "create_delegation gives two distinct ids");

    // The sub-agent's transcript in the child conversation: every field the engine sends.
    const json child1 = json::array({
        {{"role", "system"},
         {"content", "You are the researcher."},
         {"identity_tier", researcher},
         {"token_count", 5},
         {"is_compacted", false}},
        {{"role", "user"}, {"content", task}},
        {{"role", "assistant"},
         {"content", "Searching."},
         {"tool_calls",
          json::array({{{"id", "call_2"},
                        {"type", "function"},
                        {"function",
                         {{"name", "web_search"}, {"arguments", "{\"q\":\"pricing\"}"}}}}})},
         {"token_count", 7},
         {"identity_tier", nullptr}},
        {{"role", "tool"},
         {"content", "3 results"},
         {"tool_results",
          json::array({{{"tool_call_id", "call_2"}, {"output", {{"hits", 3}, {"ratio", 0.75}}}}})},
         {"token_count", 3}},
    });
    ctx.check(s.save_conversation(first.child.c_str(), child1.dump().c_str(), s.user_data),
              "save_conversation(child)");
    ctx.stored(first.child, child1);
    // Messages stored another way (another client, straight over GraphQL): content that is
    // not a string. The engine must still read every content as a string.
    const json other_way = json::array({
        {{"role", "tool"},
         {"content",
          json::array({{{"type", "text"}, {"text", "Free, Team, Enterprise"}},
                       {{"type", "image_url"}, {"image_url", "https://x.invalid/p.png"}}})},
         {"tool_results", nullptr}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"tool_calls", json::array({{{"id", "call_3"}, {"type", "function"}}})}},
        {{"role", "tool"}, {"content", {{"rows", 3}, {"currency", "EUR"}}}},
    });
    ctx.probe(
        "mutation($id: ID!, $m: [JSON!]!) { appendMessages(input: {conversationId: $id, "
        "messages: $m}) { userErrors { code } } }",
        {{"id", first.child}, {"m", other_way}});
    ctx.stored(first.child, other_way);
    const json child1_end = json::array({
        {{"role", "assistant"},
         {"content", "Pricing is at /pricing: Free, Team, Enterprise."},
         {"is_compacted", true},
         {"token_count", 11},
         {"identity_tier", researcher}},
    });
    ctx.check(s.save_conversation(first.child.c_str(), child1_end.dump().c_str(), s.user_data),
              "save_conversation(child), second batch");
    ctx.stored(first.child, child1_end);

    const std::string summary1 = flow_tag + ": pricing is at /pricing, three tiers";
    ctx.check(s.complete_delegation(first.id.c_str(), "completed", summary1.c_str(), s.user_data),
              "complete_delegation(completed)");
    std::size_t lines = ctx.log.size();
    ctx.check(!s.complete_delegation(first.id.c_str(), "completed", "again", s.user_data),
              "completing twice is refused");
    expect_one_line(ctx, lines, "completing twice", "INVALID_TRANSITION");

    // resume_delegation seeds a fresh child from load_delegation_with_messages.
    std::string latest;
    ctx.check(s.latest_delegation_for_target(researcher.c_str(), latest, s.user_data) &&
                  latest == first.id,
              "latest_delegation_for_target gives the completed delegation");
    std::string loaded_json;
    ctx.check(s.load_delegation_with_messages(first.id.c_str(), loaded_json, s.user_data),
              "load_delegation_with_messages");
    const json loaded = json::parse(loaded_json, nullptr, false);
    std::string why;
    const bool parses = engine_can_parse(loaded, why);
    ctx.check(parses, "the engine can parse the loaded delegation: " + why);
    json expected_messages = json::array();
    for (const json& m : ctx.summary["sent"][first.child]) {
        expected_messages.push_back(as_engine_reads_it(m));
    }
    if (loaded.is_object()) {
        ctx.check(loaded["delegation_id"] == first.id, "loaded delegation_id");
        ctx.check(loaded["target_tier"] == researcher, "loaded target_tier");
        ctx.check(loaded["messages"] == expected_messages,
                  "loaded messages: the child transcript, every content a string: " +
                      loaded["messages"].dump());
        ctx.check(loaded["conversation"]["id"] == first.child, "loaded conversation id");
        ctx.check(loaded["conversation"]["title"] ==
                      "Delegation: " + researcher + " — " + task.substr(0, 60),
                  "the child's title: " + loaded["conversation"]["title"].dump());
        ctx.check(loaded["status"] == "completed" && loaded["result_summary"] == summary1,
                  "loaded status and summary");
    }

    const std::string task2 = "Also find the FAQ";
    Delegated resumed;
    ctx.check(s.create_delegation(root.c_str(), "lead",
                                  loaded.value("target_tier", std::string()).c_str(),
                                  task2.c_str(), 0, resumed.id, resumed.child, s.user_data),
              "create_delegation for the resume");
    json seed = json::array();
    for (const json& m : loaded.value("messages", json::array())) {
        if (!m.value("role", std::string()).empty()) {
            seed.push_back({{"role", m["role"]}, {"content", m["content"]}});
        }
    }
    seed.push_back({{"role", "user"}, {"content", task2}});
    const json answer = json::array({{{"role", "assistant"}, {"content", "The FAQ is at /faq."}}});
    for (const json& batch : {seed, answer}) {
        ctx.check(s.save_conversation(resumed.child.c_str(), batch.dump().c_str(), s.user_data),
                  "save_conversation(resumed child)");
        ctx.stored(resumed.child, batch);
    }
    const std::string summary2 = flow_tag + ": the FAQ is at /faq";
    ctx.check(
        s.complete_delegation(resumed.id.c_str(), "completed", summary2.c_str(), s.user_data),
        "complete_delegation(resumed)");
    ctx.check(s.latest_delegation_for_target(researcher.c_str(), latest, s.user_data) &&
                  latest == resumed.id,
              "latest_delegation_for_target now gives the resumed delegation");

    // A failed delegation, without a summary (the engine may pass nullptr).
    Delegated failed;
    ctx.check(s.create_delegation(root.c_str(), "lead", tester.c_str(), "Test the pricing page",
                                  3, failed.id, failed.child, s.user_data),
              "create_delegation(tester)");
    ctx.check(s.complete_delegation(failed.id.c_str(), "failed", nullptr, s.user_data),
              "complete_delegation(failed, summary nullptr)");
    lines = ctx.log.size();
    std::string none;
    ctx.check(!s.latest_delegation_for_target(tester.c_str(), none, s.user_data),
              "latest_delegation_for_target: none when the only one failed");
    ctx.check(!s.load_delegation_with_messages("00000000-0000-4000-8000-000000000000", none,
                                               s.user_data),
              "load_delegation_with_messages: false for an unknown id");
    ctx.check(ctx.log.size() == lines, "a negative answer is not logged as a failure");

    // The followup tool.
    std::string found_json;
    ctx.check(convograph::search_delegations(s, flow_tag.c_str(), found_json),
              "search_delegations");
    const json found = json::parse(found_json, nullptr, false);
    const json entry_keys = {"id",          "parent_conversation_id", "child_conversation_id",
                             "delegating_tier", "target_tier",       "task",
                             "status",      "result_summary",         "completed_at"};
    bool shape = found.is_array() && found.size() == 2;
    for (const json& e : shape ? found : json::array()) {
        json keys = json::array();
        for (const auto& item : e.items()) {
            keys.push_back(item.key());
        }
        shape = shape && keys == entry_keys && e["status"] == "completed" &&
                e["parent_conversation_id"] == root && e["completed_at"].is_string();
    }
    ctx.check(shape, "followup entries have the tool's shape: " + found_json);
    if (shape) {
        ctx.check(found[0]["id"] == resumed.id && found[1]["id"] == first.id,
                  "followup: newest completion first, failed ones left out");
        ctx.check(found[1]["result_summary"] == summary1 && found[1]["task"] == task &&
                      found[1]["child_conversation_id"] == first.child &&
                      found[1]["target_tier"] == researcher &&
                      found[1]["delegating_tier"] == "lead",
                  "followup entry fields");
    }
    ctx.check(convograph::search_delegations(s, flow_tag.c_str(), 1, found_json) &&
                  json::parse(found_json).size() == 1,
              "followup max_results 1");
    ctx.check(convograph::search_delegations(s, flow_tag.c_str(), 0, found_json) &&
                  json::parse(found_json).size() == 1,
              "followup max_results 0 is clamped to 1");
    ctx.check(convograph::search_delegations(s, ("nothing-" + ctx.tag).c_str(), found_json) &&
                  found_json == "[]",
              "followup with no match gives []");

    ctx.summary["delegations"] = {
        {"first", {{"id", first.id}, {"child", first.child}, {"target_tier", researcher},
                   {"task", task}, {"summary", summary1}}},
        {"resumed", {{"id", resumed.id}, {"child", resumed.child}, {"task", task2},
                     {"summary", summary2}}},
        {"failed", {{"id", failed.id}, {"child", failed.child}, {"target_tier", tester}}},
    };

    // Integers past 64 bits in a child transcript (a tool's arguments, a message's parts)
    // reach the engine as they were sent, not as doubles.
    {
        Delegated wide;
        ctx.check(s.create_delegation(root.c_str(), "lead", researcher.c_str(), "wide numbers", 0,
                                      wide.id, wide.child, s.user_data),
                  "create_delegation for wide numbers");
        const std::string sent =
            R"([{"role":"assistant",)"
            R"("content":[{"type":"text","n":-123456789012345678901234567890}],)"
            R"("tool_calls":[{"args":{"big":123456789012345678901234567890,)"
            R"("neg":-9223372036854775809,"max":18446744073709551615,"f":0.5}}]},)"
            // A content that is a number past 64 bits: a string to the engine, as others.
            R"({"role":"user","content":-99999999999999999999999}])";
        ctx.check(s.save_conversation(wide.child.c_str(), sent.c_str(), s.user_data),
                  "save_conversation with wide numbers");
        std::string wide_json;
        ctx.check(s.load_delegation_with_messages(wide.id.c_str(), wide_json, s.user_data),
                  "load_delegation_with_messages with wide numbers");
        for (const char* exact :
             {R"("big":123456789012345678901234567890)", R"("neg":-9223372036854775809)",
              R"("max":18446744073709551615)", R"("f":0.5)",
              R"(\"n\":-123456789012345678901234567890)",
              R"("content":"-99999999999999999999999")"}) {
            ctx.check(wide_json.find(exact) != std::string::npos,
                      std::string("kept exactly: ") + exact + " in " + wide_json);
        }
        ctx.summary["delegations"]["wide"] = {
            {"id", wide.id}, {"child", wide.child}, {"sent", sent}};
    }

    // A resume through the callbacks saves the loaded history as the new child's first
    // batch, past one append's limit: it is stored whole. A later batch that long is not.
    {
        Delegated seeded;
        ctx.check(s.create_delegation(root.c_str(), "lead", researcher.c_str(), "long seed", 0,
                                      seeded.id, seeded.child, s.user_data),
                  "create_delegation for a long seed");
        auto batch = [](int count) {
            std::string out = "[";
            for (int i = 0; i < count; ++i) {
                out += (i ? "," : "");
                out += R"({"role":"user","content":"turn )" + std::to_string(i) + R"("})";
            }
            return out + "]";
        };
        ctx.check(s.save_conversation(seeded.child.c_str(), batch(1200).c_str(), s.user_data),
                  "save_conversation of a 1,200-message seed");
        lines = ctx.log.size();
        ctx.check(!s.save_conversation(seeded.child.c_str(), batch(1001).c_str(), s.user_data),
                  "save_conversation of 1,001 more is refused whole");
        expect_one_line(ctx, lines, "a batch past the limit", "LIMIT_EXCEEDED");
        std::string seeded_json;
        ctx.check(s.load_delegation_with_messages(seeded.id.c_str(), seeded_json, s.user_data),
                  "load_delegation_with_messages of the long seed");
        const json loaded = json::parse(seeded_json);
        ctx.check(loaded["messages"].size() == 1200 &&
                      loaded["messages"][1199]["content"] == "turn 1199",
                  "the seed's 1,200 messages, and none of the refused batch");
    }

    // gh#48: a delegation whose parent row does not exist is refused, loudly.
    lines = ctx.log.size();
    std::string orphan_id;
    std::string orphan_child;
    ctx.check(!s.create_delegation("00000000-0000-4000-8000-000000000001", "lead",
                                   researcher.c_str(), "orphan", 0, orphan_id, orphan_child,
                                   s.user_data),
              "create_delegation refuses a missing parent");
    expect_one_line(ctx, lines, "a missing parent", "NOT_FOUND");

    // Inputs the adapter refuses before sending anything.
    struct Refusal {
        const char* what;
        bool (*call)(entropic::StorageInterface&, const std::string& root);
        const char* mentions;
    };
    const Refusal refusals[] = {
        {"invalid UTF-8 in a message's content",
         [](entropic::StorageInterface& st, const std::string& r) {
             return st.save_conversation(
                 r.c_str(), "[{\"role\": \"assistant\", \"content\": \"bad \xFF\xFE bytes\"}]",
                 st.user_data);
         },
         "not valid UTF-8"},
        {"a lone surrogate escape",
         [](entropic::StorageInterface& st, const std::string& r) {
             return st.save_conversation(
                 r.c_str(), "[{\"role\": \"assistant\", \"content\": \"bad \\ud800 escape\"}]",
                 st.user_data);
         },
         "not valid JSON"},
        {"invalid UTF-8 in a snapshot",
         [](entropic::StorageInterface& st, const std::string& r) {
             return st.save_snapshot(r.c_str(), "[{\"role\": \"user\", \"content\": \"\xC0\xAF\"}]",
                                     st.user_data);
         },
         "not valid UTF-8"},
        {"invalid UTF-8 in a title",
         [](entropic::StorageInterface& st, const std::string&) {
             std::string id;
             return st.create_conversation("session \xED\xA0\x80", id, st.user_data);
         },
         "not valid UTF-8"},
        {"invalid UTF-8 in a task",
         [](entropic::StorageInterface& st, const std::string& r) {
             std::string d;
             std::string c;
             return st.create_delegation(r.c_str(), "lead", "x", "task \x80", 0, d, c,
                                         st.user_data);
         },
         "not valid UTF-8"},
        {"messages_json that is not an array",
         [](entropic::StorageInterface& st, const std::string& r) {
             return st.save_conversation(r.c_str(), "{\"role\": \"user\"}", st.user_data);
         },
         "not a JSON array"},
        {"messages_json nullptr",
         [](entropic::StorageInterface& st, const std::string& r) {
             return st.save_conversation(r.c_str(), nullptr, st.user_data);
         },
         "is null"},
        {"an unknown status",
         [](entropic::StorageInterface& st, const std::string&) {
             return st.complete_delegation("00000000-0000-4000-8000-000000000002", "done", "x",
                                           st.user_data);
         },
         "status must be"},
    };
    for (const Refusal& r : refusals) {
        lines = ctx.log.size();
        ctx.check(!r.call(s, root), std::string("refused: ") + r.what);
        expect_one_line(ctx, lines, r.what, r.mentions);
    }
    ctx.summary["invalid_utf8"] = "rejected: the callback returns false and sends nothing";

    // A body over the server's limit: HTTP 413, nothing stored.
    const long long limit = std::atoll(env_or("CONVOGRAPH_MAX_BODY_BYTES", "0").c_str());
    if (limit > 0) {
        const json big = json::array(
            {{{"role", "user"}, {"content", std::string(static_cast<std::size_t>(limit), 'x')}}});
        lines = ctx.log.size();
        ctx.check(!s.save_conversation(root.c_str(), big.dump().c_str(), s.user_data),
                  "a body over the server's limit is refused");
        expect_one_line(ctx, lines, "a body over the limit", "413");
        ctx.summary["body_limit_checked"] = limit;
    } else {
        ctx.summary["skipped"].push_back("413: CONVOGRAPH_MAX_BODY_BYTES is not set");
    }

    const int roots_after = ctx.probe(kRootCount)["conversations"]["totalCount"].get<int>();
    ctx.check(roots_after == roots_before + 1,
              "the engine flow made exactly one root conversation");
}

}  // namespace flow
