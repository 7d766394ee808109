#include "text/tokenizer.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <shared_mutex>
#include <sstream>
#include <unordered_map>

#include "text/bpe.h"
#include "text/byte_level.h"
#include "text/split_regex.h"
#include "text/utf8.h"
#include "util/env.h"
#include "util/error.h"

namespace h3 {

namespace {

using json = nlohmann::json;

// The pattern HF's ByteLevel pre-tokenizer applies when use_regex is true (the GPT-2 split).
constexpr std::string_view kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Word cache bounds: words repeat a lot in prompts; very long words are rare and not worth keeping.
constexpr size_t kWordCacheCapacity = 1 << 16;
constexpr size_t kMaxCachedWordBytes = 256;

// Hash maps keyed by std::string that can be probed with a std::string_view (no temporary string).
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
template <typename Value>
using StringMap = std::unordered_map<std::string, Value, StringHash, std::equal_to<>>;

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open ", path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) fail("cannot read ", path.string());
  return ss.str();
}

// Leftmost-longest matching of a set of literal strings (the added tokens), with the semantics of an
// Aho-Corasick LeftmostLongest automaton: at the first position where any string matches, take the longest.
class LiteralMatcher {
 public:
  void add(std::string text, int32_t id) {
    const auto first = static_cast<uint8_t>(text[0]);
    auto& list = by_first_byte_[first];
    list.push_back(Entry{std::move(text), id});
    std::stable_sort(list.begin(), list.end(),
                     [](const Entry& a, const Entry& b) { return a.text.size() > b.text.size(); });
  }
  bool empty() const {
    return std::all_of(by_first_byte_.begin(), by_first_byte_.end(), [](const auto& l) { return l.empty(); });
  }

  // Calls on_text(std::string_view) for the stretches between matches (non-empty only) and on_token(id) for
  // each match, in order.
  template <typename OnText, typename OnToken>
  void split(std::string_view s, OnText&& on_text, OnToken&& on_token) const {
    size_t text_start = 0;
    for (size_t i = 0; i < s.size(); ++i) {
      const auto& list = by_first_byte_[static_cast<uint8_t>(s[i])];
      if (list.empty()) continue;
      for (const Entry& e : list) {
        if (s.compare(i, e.text.size(), e.text) != 0) continue;
        if (i > text_start) on_text(s.substr(text_start, i - text_start));
        on_token(e.id);
        i += e.text.size() - 1;
        text_start = i + 1;
        break;
      }
    }
    if (text_start < s.size()) on_text(s.substr(text_start));
  }

 private:
  struct Entry {
    std::string text;
    int32_t id;
  };
  std::array<std::vector<Entry>, 256> by_first_byte_;  // longest first
};

// Field access with errors that name the file and the field.
class JsonReader {
 public:
  explicit JsonReader(std::string source) : source_(std::move(source)) {}

  json parse(std::string_view text) const {
    try {
      return json::parse(text);
    } catch (const json::exception& e) {
      fail(source_, " is not valid JSON (", e.what(), ")");
    }
  }
  [[noreturn]] void unsupported(const std::string& field, const std::string& why) const {
    fail(source_, ": ", field, " ", why);
  }
  const json& object_field(const json& obj, const std::string& path, const char* key) const {
    if (!obj.is_object() || !obj.contains(key)) unsupported(path + "." + key, "is missing");
    return obj.at(key);
  }
  bool bool_field(const json& obj, const std::string& path, const char* key, bool absent) const {
    if (!obj.contains(key) || obj.at(key).is_null()) return absent;
    if (!obj.at(key).is_boolean()) unsupported(path + "." + key, "must be true or false");
    return obj.at(key).get<bool>();
  }
  std::string string_field(const json& obj, const std::string& path, const char* key) const {
    const json& v = object_field(obj, path, key);
    if (!v.is_string()) unsupported(path + "." + key, "must be a string");
    return v.get<std::string>();
  }
  // Fields that must be absent, null or one of the "off" values.
  void require_off(const json& obj, const std::string& path, const char* key) const {
    if (!obj.contains(key)) return;
    const json& v = obj.at(key);
    if (v.is_null() || (v.is_boolean() && !v.get<bool>()) || (v.is_string() && v.get<std::string>().empty()))
      return;
    unsupported(path + "." + key, "is set to " + v.dump() + "; only byte-level BPE without it is supported");
  }
  const std::string& source() const { return source_; }

 private:
  std::string source_;
};

}  // namespace

struct Tokenizer::Impl {
  Options options;
  Config config;
  bool nfc = false;
  std::vector<SplitRegex> splits;  // applied in order, each with behavior Isolated
  bool ignore_merges = false;

  StringMap<int32_t> vocab;                        // byte-level symbol string -> id
  std::unordered_map<int32_t, std::string_view> token_of_id;  // id -> its key in `vocab` (stable)
  std::array<int32_t, 256> byte_id{};             // id of each byte's one-symbol entry
  BpeMerges merges;
  size_t merge_count = 0;

  std::vector<AddedToken> added;
  StringMap<int32_t> added_by_content;
  std::unordered_map<int32_t, std::string> added_by_id;
  LiteralMatcher raw_added;         // normalized == false: matched before NFC
  LiteralMatcher normalized_added;  // normalized == true: matched in the NFC text
  size_t vocab_size = 0;

  mutable std::shared_mutex cache_mutex;
  mutable StringMap<std::vector<int32_t>> word_cache;  // raw word bytes -> ids

  void load(const json& root, const JsonReader& r);
  void load_normalizer(const json& n, const JsonReader& r);
  void load_pre_tokenizer(const json& p, const JsonReader& r);
  void load_model(const json& m, const JsonReader& r);
  void load_added_tokens(const json& a, const JsonReader& r);
  void load_config(const json& c, const JsonReader& r);

  void encode_span(std::string_view raw, std::vector<int32_t>& ids) const;
  void pre_tokenize(std::string_view text, size_t level, std::vector<int32_t>& ids) const;
  void encode_word(std::string_view word, std::vector<int32_t>& ids) const;
  void bpe(std::string_view word, std::vector<int32_t>& ids) const;
};

void Tokenizer::Impl::load(const json& root, const JsonReader& r) {
  if (!root.is_object()) r.unsupported("the top level", "must be a JSON object");
  load_normalizer(root.contains("normalizer") ? root.at("normalizer") : json(), r);
  load_pre_tokenizer(r.object_field(root, "", "pre_tokenizer"), r);
  load_model(r.object_field(root, "", "model"), r);
  load_added_tokens(root.contains("added_tokens") ? root.at("added_tokens") : json::array(), r);
  // post_processor, decoder, truncation and padding do not affect encoding without special tokens
  // (transformers also turns truncation and padding off unless a call asks for them).
}

void Tokenizer::Impl::load_normalizer(const json& n, const JsonReader& r) {
  if (n.is_null()) return;
  const std::string type = r.string_field(n, "normalizer", "type");
  if (type == "NFC") {
    nfc = true;
    return;
  }
  if (type == "Sequence") {
    const json& list = r.object_field(n, "normalizer", "normalizers");
    if (!list.is_array()) r.unsupported("normalizer.normalizers", "must be an array");
    for (const json& item : list) {
      if (r.string_field(item, "normalizer.normalizers[]", "type") != "NFC")
        r.unsupported("normalizer.normalizers[].type", "is " + item.at("type").dump() + "; only NFC is supported");
      nfc = true;
    }
    return;
  }
  r.unsupported("normalizer.type", "is \"" + type + "\"; only NFC, a Sequence of NFC, or none is supported");
}

void Tokenizer::Impl::load_pre_tokenizer(const json& p, const JsonReader& r) {
  const bool jit = options.fast_paths;
  std::vector<json> steps;
  const std::string type = r.string_field(p, "pre_tokenizer", "type");
  if (type == "Sequence") {
    const json& list = r.object_field(p, "pre_tokenizer", "pretokenizers");
    if (!list.is_array()) r.unsupported("pre_tokenizer.pretokenizers", "must be an array");
    steps.assign(list.begin(), list.end());
  } else {
    steps.push_back(p);
  }
  if (steps.empty()) r.unsupported("pre_tokenizer.pretokenizers", "is empty; byte-level BPE needs a final ByteLevel");
  // Accepted: Split(Regex, Isolated)* followed by exactly one ByteLevel without a prefix space.
  for (size_t i = 0; i < steps.size(); ++i) {
    const std::string path = type == "Sequence" ? "pre_tokenizer.pretokenizers[" + std::to_string(i) + "]"
                                                : std::string("pre_tokenizer");
    const json& s = steps[i];
    const std::string step_type = r.string_field(s, path, "type");
    const bool last = i + 1 == steps.size();
    if (step_type == "Split" && !last) {
      const json& pattern = r.object_field(s, path, "pattern");
      if (!pattern.is_object() || !pattern.contains("Regex") || !pattern.at("Regex").is_string())
        r.unsupported(path + ".pattern", "is " + pattern.dump() + "; only {\"Regex\": ...} is supported");
      const std::string behavior = r.string_field(s, path, "behavior");
      if (behavior != "Isolated")
        r.unsupported(path + ".behavior", "is \"" + behavior + "\"; only Isolated is supported");
      if (r.bool_field(s, path, "invert", false)) r.unsupported(path + ".invert", "is true; only false is supported");
      splits.emplace_back(pattern.at("Regex").get<std::string>(), jit);
    } else if (step_type == "ByteLevel" && last) {
      if (r.bool_field(s, path, "add_prefix_space", true))
        r.unsupported(path + ".add_prefix_space", "is true; only false is supported");
      if (r.bool_field(s, path, "use_regex", true)) splits.emplace_back(kGpt2SplitPattern, jit);
    } else {
      r.unsupported(path + ".type",
                    "is \"" + step_type +
                        "\"; supported are Split(Regex, Isolated) steps followed by one final ByteLevel");
    }
  }
}

void Tokenizer::Impl::load_model(const json& m, const JsonReader& r) {
  const std::string type = r.string_field(m, "model", "type");
  if (type != "BPE") r.unsupported("model.type", "is \"" + type + "\"; only BPE is supported");
  for (const char* key : {"dropout", "unk_token", "byte_fallback", "continuing_subword_prefix", "end_of_word_suffix"})
    r.require_off(m, "model", key);
  ignore_merges = r.bool_field(m, "model", "ignore_merges", false);

  const json& v = r.object_field(m, "model", "vocab");
  if (!v.is_object()) r.unsupported("model.vocab", "must be an object of token -> id");
  vocab.reserve(v.size());
  int32_t max_id = -1;
  for (const auto& [token, id_json] : v.items()) {
    if (!id_json.is_number_integer() || id_json.get<int64_t>() < 0 || id_json.get<int64_t>() > INT32_MAX)
      r.unsupported("model.vocab[" + json(token).dump() + "]", "must be a non-negative 32-bit integer id");
    const auto id = id_json.get<int32_t>();
    vocab.emplace(token, id);
    max_id = std::max(max_id, id);
  }
  token_of_id.reserve(vocab.size());
  for (const auto& [token, id] : vocab)
    if (!token_of_id.emplace(id, token).second)
      r.unsupported("model.vocab", "gives id " + std::to_string(id) + " to two tokens");
  for (int b = 0; b < 256; ++b) {
    const std::string& symbol = byte_level::symbol_of_byte(static_cast<uint8_t>(b));
    const auto it = vocab.find(symbol);
    if (it == vocab.end())
      r.unsupported("model.vocab", "lacks the byte-level symbol \"" + symbol + "\" of byte " + std::to_string(b) +
                                       ", so not every text could be encoded");
    byte_id[b] = it->second;
  }

  const json& list = r.object_field(m, "model", "merges");
  if (!list.is_array()) r.unsupported("model.merges", "must be an array");
  merges.reserve(list.size());
  const auto id_of = [&](const std::string& token, size_t rank) {
    const auto it = vocab.find(token);
    if (it == vocab.end())
      r.unsupported("model.merges[" + std::to_string(rank) + "]", "uses \"" + token + "\", which is not in the vocab");
    return it->second;
  };
  for (size_t rank = 0; rank < list.size(); ++rank) {
    const json& item = list[rank];
    std::string left, right;
    if (item.is_string()) {  // "a b": byte-level symbols never contain a space
      const std::string s = item.get<std::string>();
      const size_t space = s.find(' ');
      if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos)
        r.unsupported("model.merges[" + std::to_string(rank) + "]", "must be \"left right\" with one space");
      left = s.substr(0, space);
      right = s.substr(space + 1);
    } else if (item.is_array() && item.size() == 2 && item[0].is_string() && item[1].is_string()) {
      left = item[0].get<std::string>();
      right = item[1].get<std::string>();
    } else {
      r.unsupported("model.merges[" + std::to_string(rank) + "]", "must be \"left right\" or [\"left\", \"right\"]");
    }
    merges.add(id_of(left, rank), id_of(right, rank), id_of(left + right, rank), static_cast<uint32_t>(rank));
  }
  merge_count = list.size();
  vocab_size = static_cast<size_t>(max_id + 1);
}

void Tokenizer::Impl::load_added_tokens(const json& a, const JsonReader& r) {
  if (!a.is_array()) r.unsupported("added_tokens", "must be an array");
  for (size_t i = 0; i < a.size(); ++i) {
    const std::string path = "added_tokens[" + std::to_string(i) + "]";
    const json& t = a[i];
    AddedToken tok;
    tok.content = r.string_field(t, path, "content");
    const json& id = r.object_field(t, path, "id");
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX)
      r.unsupported(path + ".id", "must be a non-negative 32-bit integer");
    tok.id = id.get<int32_t>();
    tok.special = r.bool_field(t, path, "special", false);
    tok.normalized = r.bool_field(t, path, "normalized", !tok.special);  // HF's default
    for (const char* flag : {"lstrip", "rstrip", "single_word"})
      if (r.bool_field(t, path, flag, false))
        r.unsupported(path + "." + flag, "is true for \"" + tok.content + "\"; only false is supported");
    if (tok.content.empty()) r.unsupported(path + ".content", "is empty");
    if (utf8::first_invalid_offset(tok.content) != std::string::npos)
      r.unsupported(path + ".content", "is not valid UTF-8");
    const auto [it, inserted] = added_by_content.emplace(tok.content, tok.id);
    if (!inserted) {
      if (it->second != tok.id)
        r.unsupported(path, "repeats \"" + tok.content + "\" with another id");
      continue;
    }
    // A normalized token is looked for in normalized text, so it is matched in its normalized form.
    const std::string pattern = tok.normalized && nfc ? utf8::nfc(tok.content) : tok.content;
    (tok.normalized ? normalized_added : raw_added).add(pattern, tok.id);
    vocab_size = std::max(vocab_size, static_cast<size_t>(tok.id) + 1);
    added_by_id.emplace(tok.id, tok.content);
    added.push_back(std::move(tok));
  }
}

void Tokenizer::Impl::load_config(const json& c, const JsonReader& r) {
  if (!c.is_object()) r.unsupported("the top level", "must be a JSON object");
  if (c.contains("tokenizer_class") && c.at("tokenizer_class").is_string())
    config.tokenizer_class = c.at("tokenizer_class").get<std::string>();
  if (c.contains("model_max_length") && c.at("model_max_length").is_number())
    config.model_max_length = c.at("model_max_length").get<int64_t>();
  // added_tokens_decoder must agree with tokenizer.json (transformers would otherwise add tokens).
  if (c.contains("added_tokens_decoder") && c.at("added_tokens_decoder").is_object()) {
    for (const auto& [id_text, t] : c.at("added_tokens_decoder").items()) {
      const std::string path = "added_tokens_decoder[\"" + id_text + "\"]";
      const std::string content = r.string_field(t, path, "content");
      const auto it = added_by_content.find(content);
      if (it == added_by_content.end() || std::to_string(it->second) != id_text)
        r.unsupported(path, "declares \"" + content + "\" with id " + id_text +
                                ", which disagrees with the added_tokens of tokenizer.json");
    }
  }
  // bos/eos/pad: a string, null, or an AddedToken object {"content": ...}; it must name a known token.
  const auto special = [&](const char* key, std::optional<std::string>& out) {
    if (!c.contains(key) || c.at(key).is_null()) return;
    const json& v = c.at(key);
    const std::string name = v.is_string() ? v.get<std::string>() : r.string_field(v, key, "content");
    if (!added_by_content.count(name) && !vocab.count(name))
      r.unsupported(key, "is \"" + name + "\", which is not a token of tokenizer.json");
    out = name;
  };
  special("bos_token", config.bos_token);
  special("eos_token", config.eos_token);
  special("pad_token", config.pad_token);
}

void Tokenizer::Impl::encode_span(std::string_view raw, std::vector<int32_t>& ids) const {
  // ASCII text is invariant under NFC.
  const bool skip_nfc = !nfc || (options.fast_paths && utf8::is_ascii(raw));
  std::string normalized_storage;
  std::string_view text = raw;
  if (!skip_nfc) {
    normalized_storage = utf8::nfc(raw);
    text = normalized_storage;
  }
  normalized_added.split(
      text, [&](std::string_view piece) { pre_tokenize(piece, 0, ids); }, [&](int32_t id) { ids.push_back(id); });
}

void Tokenizer::Impl::pre_tokenize(std::string_view text, size_t level, std::vector<int32_t>& ids) const {
  if (level == splits.size()) {
    encode_word(text, ids);
    return;
  }
  splits[level].split(text, [&](std::string_view piece) { pre_tokenize(piece, level + 1, ids); });
}

void Tokenizer::Impl::encode_word(std::string_view word, std::vector<int32_t>& ids) const {
  const bool cacheable = options.fast_paths && word.size() <= kMaxCachedWordBytes;
  if (cacheable) {
    std::shared_lock lock(cache_mutex);
    const auto it = word_cache.find(word);
    if (it != word_cache.end()) {
      ids.insert(ids.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t first = ids.size();
  bpe(word, ids);
  if (cacheable) {
    std::vector<int32_t> result(ids.begin() + static_cast<std::ptrdiff_t>(first), ids.end());
    std::unique_lock lock(cache_mutex);
    if (word_cache.size() >= kWordCacheCapacity) word_cache.clear();
    word_cache.emplace(std::string(word), std::move(result));
  }
}

void Tokenizer::Impl::bpe(std::string_view word, std::vector<int32_t>& ids) const {
  if (ignore_merges) {  // a word that is itself a vocab entry is taken whole
    const auto it = vocab.find(byte_level::to_symbols(word));
    if (it != vocab.end()) {
      ids.push_back(it->second);
      return;
    }
  }
  std::vector<int32_t> symbols(word.size());
  for (size_t i = 0; i < word.size(); ++i) symbols[i] = byte_id[static_cast<uint8_t>(word[i])];
  merges.apply(symbols);
  ids.insert(ids.end(), symbols.begin(), symbols.end());
}

// ---------------------------------------------------------------------------------------------------------

Tokenizer::Options Tokenizer::Options::from_environment() {
  Options o;
  o.fast_paths = !env_flag("H3_DISABLE_TOKENIZER_FAST_PATHS");
  return o;
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::load(std::string_view tokenizer_json, std::string_view config_json, Options options,
                          const std::string& json_source, const std::string& config_source) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  const JsonReader reader(json_source);
  impl->load(reader.parse(tokenizer_json), reader);
  if (!config_json.empty()) {
    const JsonReader config_reader(config_source);
    impl->load_config(config_reader.parse(config_json), config_reader);
  }
  return Tokenizer(std::move(impl));
}

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view config_json, Options options) {
  return load(tokenizer_json, config_json, options, "tokenizer.json", "tokenizer_config.json");
}

Tokenizer Tokenizer::from_file(const std::string& path, Options options) {
  namespace fs = std::filesystem;
  fs::path json_path = path;
  std::error_code ec;
  if (fs::is_directory(json_path, ec)) json_path /= "tokenizer.json";
  if (!fs::is_regular_file(json_path, ec))
    fail("tokenizer file ", json_path.string(), " does not exist (give a tokenizer.json or a folder holding one)");
  const fs::path config_path = json_path.parent_path() / "tokenizer_config.json";
  const std::string config = fs::is_regular_file(config_path, ec) ? read_file(config_path) : std::string();
  return load(read_file(json_path), config, options, json_path.string(), config_path.string());
}

std::vector<int32_t> Tokenizer::encode(std::string_view text) const {
  utf8::require_valid(text);
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3 + 1);
  impl_->raw_added.split(
      text, [&](std::string_view span) { impl_->encode_span(span, ids); }, [&](int32_t id) { ids.push_back(id); });
  return ids;
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  if (const auto it = impl_->added_by_content.find(token); it != impl_->added_by_content.end()) return it->second;
  if (const auto it = impl_->vocab.find(token); it != impl_->vocab.end()) return it->second;
  return std::nullopt;
}

size_t Tokenizer::vocab_size() const { return impl_->vocab_size; }

std::string Tokenizer::decode_bytes(std::span<const int32_t> ids) const {
  std::string out;
  for (const int32_t id : ids) {
    if (const auto it = impl_->added_by_id.find(id); it != impl_->added_by_id.end()) {
      out += it->second;
      continue;
    }
    const auto it = impl_->token_of_id.find(id);
    if (it == impl_->token_of_id.end() || !byte_level::from_symbols(it->second, out))
      fail("token id ", id, " is not a byte-level token of this tokenizer (valid ids: 0..", vocab_size() - 1, ")");
  }
  return out;
}

size_t Tokenizer::base_vocab_count() const { return impl_->vocab.size(); }
size_t Tokenizer::merge_count() const { return impl_->merge_count; }
const std::vector<Tokenizer::AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }
bool Tokenizer::normalizes_nfc() const { return impl_->nfc; }
const Tokenizer::Config& Tokenizer::config() const { return impl_->config; }
const Tokenizer::Options& Tokenizer::options() const { return impl_->options; }

std::vector<std::string> Tokenizer::split_patterns() const {
  std::vector<std::string> out;
  for (const SplitRegex& s : impl_->splits) out.push_back(s.pattern());
  return out;
}

}  // namespace h3
