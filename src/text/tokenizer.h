// Byte-level BPE tokenizer (the Qwen2/Qwen3 family, Qwen2TokenizerFast), byte-exact with HF tokenizers for the
// configurations it accepts (tokenizer.md). H3 only encodes, always without special tokens added around
// the text; there is no decoder beyond decode_bytes (for tests and debugging).
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace h3 {

class Tokenizer {
 public:
  struct Options {
    // The word cache, the ASCII shortcut past NFC and PCRE2's JIT. Off gives the exact slower twin;
    // the default is on unless the environment sets H3_DISABLE_TOKENIZER_FAST_PATHS=1.
    bool fast_paths = true;
    static Options from_environment();
  };

  struct AddedToken {
    std::string content;
    int32_t id = 0;
    bool special = false;
    bool normalized = false;  // matched in the NFC text instead of the raw text
  };

  // What tokenizer_config.json (when present beside tokenizer.json) says; H3 uses none of it to encode.
  struct Config {
    std::string tokenizer_class;
    std::optional<std::string> bos_token, eos_token, pad_token;
    std::optional<int64_t> model_max_length;
  };

  // `path` is a tokenizer.json or a folder holding one; a tokenizer_config.json beside it is read when
  // present. Throws h3::Error naming the file and the unsupported or malformed field.
  static Tokenizer from_file(const std::string& path, Options options = Options::from_environment());
  // The same from the files' contents; an empty config_json means no tokenizer_config.json.
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view config_json = {},
                             Options options = Options::from_environment());

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // The ids of UTF-8 `text` (tokenizer.md §2), nothing added before or after. Throws h3::Error for text
  // that is not valid UTF-8. Safe to call from several threads at once.
  std::vector<int32_t> encode(std::string_view text) const;

  // The id of a vocabulary entry (byte-level symbol string) or of an added token's content.
  std::optional<int32_t> token_id(std::string_view token) const;
  // Largest id + 1 (base vocabulary and added tokens).
  size_t vocab_size() const;
  // The bytes that `ids` stand for (added tokens give their content). Throws h3::Error for an unknown id.
  std::string decode_bytes(std::span<const int32_t> ids) const;

  // What was loaded, for load-time checks such as tokenizer.md §1.
  size_t base_vocab_count() const;
  size_t merge_count() const;
  const std::vector<AddedToken>& added_tokens() const;
  std::vector<std::string> split_patterns() const;  // as stored in the file (Oniguruma syntax)
  bool normalizes_nfc() const;
  const Config& config() const;
  const Options& options() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  // json_source / config_source name the files in error messages.
  static Tokenizer load(std::string_view tokenizer_json, std::string_view config_json, Options options,
                        const std::string& json_source, const std::string& config_source);
  std::unique_ptr<Impl> impl_;
};

}  // namespace h3
