#include "exact_json.hpp"

#include <random>
#include <vector>

namespace convograph::detail {
namespace {

using json = nlohmann::ordered_json;

// What a marked integer's string starts with: a NUL, which dump() writes as \u0000, and a
// token drawn once per process, so that no string a user stored is taken for one.
const std::string& marker() {
    static const std::string value = [] {
        std::random_device random;
        std::string out(1, '\0');
        out += "cvg-int-";
        const char* hex = "0123456789abcdef";
        for (int i = 0; i < 24; ++i) {
            out += hex[random() % 16];
        }
        return out + ':';
    }();
    return value;
}

// Builds the document as json::parse does, but for integers past 64 bits (nlohmann's lexer
// gives them to number_float with their text).
class ExactDom final : public nlohmann::json_sax<json> {
public:
    explicit ExactDom(json& root) : root_(root) {}

    bool null() override { return put(nullptr) != nullptr; }
    bool boolean(bool value) override { return put(value) != nullptr; }
    bool number_integer(number_integer_t value) override { return put(value) != nullptr; }
    bool number_unsigned(number_unsigned_t value) override { return put(value) != nullptr; }
    bool number_float(number_float_t value, const string_t& text) override {
        if (text.find_first_of(".eE") == string_t::npos) {
            return put(marker() + text) != nullptr;
        }
        return put(value) != nullptr;
    }
    bool string(string_t& value) override { return put(std::move(value)) != nullptr; }
    bool binary(binary_t&) override { return false; }
    bool start_object(std::size_t) override { return open(json::object()); }
    bool key(string_t& name) override {
        key_ = std::move(name);
        return true;
    }
    bool end_object() override { return close(); }
    bool start_array(std::size_t) override { return open(json::array()); }
    bool end_array() override { return close(); }
    bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) override {
        return false;
    }

private:
    // Places `value` in the open container (or as the root); where it now is.
    json* put(json value) {
        if (open_.empty()) {
            root_ = std::move(value);
            return &root_;
        }
        json& container = *open_.back();
        if (container.is_array()) {
            container.push_back(std::move(value));
            return &container.back();
        }
        json& slot = container[key_];  // a repeated key: the last value, as json::parse keeps
        slot = std::move(value);
        return &slot;
    }
    // Only the open containers are held by address: a value is added to the innermost one
    // alone, so no address held moves.
    bool open(json container) {
        open_.push_back(put(std::move(container)));
        return true;
    }
    bool close() {
        open_.pop_back();
        return true;
    }

    json& root_;
    std::vector<json*> open_;
    std::string key_;
};

}  // namespace

json parse_exact(const std::string& text) {
    json root;
    ExactDom dom(root);
    if (!json::sax_parse(text, &dom, json::input_format_t::json, /*strict=*/true)) {
        return json(json::value_t::discarded);
    }
    return root;
}

bool is_marked_integer(const json& value) {
    return value.is_string() && value.get_ref<const std::string&>().rfind(marker(), 0) == 0;
}

std::string exact_dump(const json& value) {
    std::string text = value.dump();
    // A marked integer is dumped as "\u0000cvg-int-<token>:<digits>".
    const std::string quoted = "\"\\u0000" + marker().substr(1);
    for (std::size_t at = text.find(quoted); at != std::string::npos; at = text.find(quoted, at)) {
        const std::size_t digits = at + quoted.size();
        const std::size_t end = text.find('"', digits);
        text.replace(at, end + 1 - at, text.substr(digits, end - digits));
    }
    return text;
}

}  // namespace convograph::detail
