// Tokenizer tests: byte-exact ids on the Qwen3 vocabulary (tokenizer.md §8 and HF-generated references),
// the load-time contract, UTF-8 and regex edge cases, the tiny tokenizer, the CLI tool, threads, speed.
#include <gtest/gtest.h>
#include <utf8proc.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "text/byte_level.h"
#include "text/qwen_tokens.h"
#include "text/split_regex.h"
#include "text/tiny_tokenizer.h"
#include "tools/tokenize_tool.h"
#include "text/tokenizer.h"
#include "text/utf8.h"
#include "util/error.h"

using namespace h3;
using json = nlohmann::json;

namespace {

const std::string kQwen3Dir = std::string(H3_TEST_DATA_DIR) + "/qwen3_tokenizer";
const std::string kFixtures = std::string(H3_SOURCE_DIR) + "/tests/fixtures";

constexpr size_t kQwen3BaseVocab = 151643;
constexpr size_t kQwen3Merges = 151387;
constexpr size_t kQwen3VocabSize = 151669;  // 151643 base entries + 26 added tokens
constexpr int32_t kImagePadId = 151655;

const Tokenizer& qwen3() {
  static const Tokenizer t = Tokenizer::from_file(kQwen3Dir);
  return t;
}

const Tokenizer& tiny() {
  static const Tokenizer t = Tokenizer::from_json(make_tiny_tokenizer_json(), make_tiny_tokenizer_config_json());
  return t;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Vector {
  std::string text;
  std::vector<int32_t> ids;
};

std::vector<Vector> read_vectors(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in) << "cannot open " << path;
  std::vector<Vector> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const auto j = json::parse(line);
    out.push_back({j.at("text").get<std::string>(), j.at("ids").get<std::vector<int32_t>>()});
  }
  return out;
}

std::string shown(std::string_view text) { return json(std::string(text)).dump(); }

std::string cp(uint32_t c) {
  std::string s;
  utf8::append_code_point(s, c);
  return s;
}

// An independent, simple BPE: merge the leftmost lowest-rank adjacent pair, rescanning after every merge.
class ReferenceBpe {
 public:
  explicit ReferenceBpe(const std::string& tokenizer_json_path) {
    const json root = json::parse(read_text(tokenizer_json_path));
    for (const auto& [token, id] : root["model"]["vocab"].items()) vocab_[token] = id.get<int32_t>();
    int rank = 0;
    for (const auto& m : root["model"]["merges"]) {
      const std::string key = m.is_string() ? m.get<std::string>()
                                            : m[0].get<std::string>() + " " + m[1].get<std::string>();
      rank_.emplace(key, rank++);
    }
  }

  std::vector<int32_t> encode_word(std::string_view word) const {
    std::vector<std::string> syms;
    for (char c : word) syms.push_back(byte_level::symbol_of_byte(static_cast<uint8_t>(c)));
    std::vector<int> ranks;  // ranks[i]: rank of the pair (syms[i], syms[i+1])
    for (size_t i = 0; i + 1 < syms.size(); ++i) ranks.push_back(rank_of(syms[i], syms[i + 1]));
    while (!ranks.empty()) {
      const size_t best = std::min_element(ranks.begin(), ranks.end()) - ranks.begin();  // leftmost minimum
      if (ranks[best] == kNoRank) break;
      syms[best] += syms[best + 1];
      syms.erase(syms.begin() + static_cast<std::ptrdiff_t>(best) + 1);
      ranks.erase(ranks.begin() + static_cast<std::ptrdiff_t>(best));
      if (best > 0) ranks[best - 1] = rank_of(syms[best - 1], syms[best]);
      if (best < ranks.size()) ranks[best] = rank_of(syms[best], syms[best + 1]);
    }
    std::vector<int32_t> ids;
    for (const auto& s : syms) ids.push_back(vocab_.at(s));
    return ids;
  }

 private:
  static constexpr int kNoRank = INT32_MAX;
  int rank_of(const std::string& a, const std::string& b) const {
    const auto it = rank_.find(a + " " + b);
    return it == rank_.end() ? kNoRank : it->second;
  }
  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<std::string, int> rank_;
};

// A deterministic word of `n` letters (a single pre-token: one \p{L}+ run).
std::string letter_word(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  // Skewed towards common letters so that long merges happen.
  const std::string_view letters = "eeeeettttaaaoooiiinnnsssrrhhlldcumfpgwybvkxjqz";
  std::string w;
  for (size_t i = 0; i < n; ++i) w += letters[rng() % letters.size()];
  return w;
}

// Runs the tool with the given options (argv[0] is added) and captures its streams.
struct ToolRun {
  int status;
  std::string out, err;
};
ToolRun run_tool(std::vector<std::string> args, const std::string& stdin_text = "") {
  args.insert(args.begin(), "tokenize");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  std::istringstream in(stdin_text);
  std::ostringstream out, err;
  const int status = tool_tokenize(static_cast<int>(argv.size()), argv.data(), in, out, err);
  return {status, out.str(), err.str()};
}

std::string ids_json(const std::vector<int32_t>& ids) { return json(ids).dump(); }

// Expects loading `tokenizer_json` to fail with a message containing `needle`.
void expect_load_error(const std::string& tokenizer_json, const std::string& needle) {
  try {
    Tokenizer::from_json(tokenizer_json);
    ADD_FAILURE() << "loading succeeded; expected an error mentioning " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << "message: " << e.what();
  }
}

std::string tiny_edited(const std::function<void(json&)>& edit) {
  json j = json::parse(make_tiny_tokenizer_json());
  edit(j);
  return j.dump();
}

// A minimal byte-level BPE tokenizer.json: the 256 byte symbols (GPT-2 order), then `extra` tokens.
json minimal_tokenizer(const std::vector<std::string>& extra, const json& merges) {
  json vocab = json::object();
  int32_t id = 0;
  for (uint8_t b : byte_level::bytes_in_gpt2_order()) vocab[byte_level::symbol_of_byte(b)] = id++;
  for (const auto& t : extra) vocab[t] = id++;
  return json{{"normalizer", nullptr},
              {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}}},
              {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}},
              {"added_tokens", json::array()}};
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------
// The real Qwen3 vocabulary.

TEST(TokenizerQwen3, SpecVectorsAreByteExact) {
  const auto vectors = read_vectors(kFixtures + "/tokenizer/spec_vectors.jsonl");
  ASSERT_EQ(vectors.size(), 100u);
  for (const auto& v : vectors) EXPECT_EQ(qwen3().encode(v.text), v.ids) << "text: " << shown(v.text);
}

TEST(TokenizerQwen3, LoadsTheLayoutOfTokenizerMdSection1) {
  const Tokenizer& t = qwen3();
  EXPECT_EQ(t.base_vocab_count(), kQwen3BaseVocab);
  EXPECT_EQ(t.merge_count(), kQwen3Merges);
  EXPECT_EQ(t.vocab_size(), kQwen3VocabSize);
  EXPECT_TRUE(t.normalizes_nfc());
  EXPECT_EQ(t.split_patterns(), std::vector<std::string>{std::string(qwen::kSplitPattern)});
  ASSERT_EQ(t.added_tokens().size(), qwen::kAddedTokens.size());
  for (size_t i = 0; i < qwen::kAddedTokens.size(); ++i) {
    const auto& got = t.added_tokens()[i];
    EXPECT_EQ(got.id, qwen::kFirstAddedTokenId + static_cast<int32_t>(i));
    EXPECT_EQ(got.content, qwen::kAddedTokens[i].content);
    EXPECT_EQ(got.special, qwen::kAddedTokens[i].special) << got.content;
    EXPECT_FALSE(got.normalized) << got.content;
  }
  EXPECT_EQ(t.config().tokenizer_class, "Qwen2Tokenizer");
  EXPECT_EQ(t.config().eos_token, "<|im_end|>");
  EXPECT_EQ(t.config().pad_token, "<|endoftext|>");
  EXPECT_FALSE(t.config().bos_token.has_value());
  EXPECT_EQ(t.config().model_max_length, 131072);
}

TEST(TokenizerQwen3, TokenIdFindsAddedTokensAndVocabEntries) {
  EXPECT_EQ(qwen3().token_id("<|vision_start|>"), 151652);
  EXPECT_EQ(qwen3().token_id("<|vision_end|>"), 151653);
  EXPECT_EQ(qwen3().token_id("<|image_pad|>"), kImagePadId);
  EXPECT_EQ(qwen3().token_id("<|video_pad|>"), 151656);
  EXPECT_EQ(qwen3().token_id("</think>"), 151668);
  EXPECT_EQ(qwen3().token_id("Ġ"), 220);  // the space symbol
  EXPECT_EQ(qwen3().token_id("Hello"), 9707);
  EXPECT_FALSE(qwen3().token_id("<|no_such_token|>").has_value());
  EXPECT_FALSE(qwen3().token_id("").has_value());
}

TEST(TokenizerQwen3, MatchesHfTokenizersReferenceIds) {
  const std::string path = kFixtures + "/tokenizer/qwen3_ids.jsonl";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "missing fixture " << path << " (made with HF tokenizers)";
  const auto vectors = read_vectors(path);
  EXPECT_GE(vectors.size(), 130u);
  for (const auto& v : vectors) EXPECT_EQ(qwen3().encode(v.text), v.ids) << "text: " << shown(v.text);
}

TEST(TokenizerQwen3, ImagePadInsideAPromptIsItsId) {
  const auto ids = qwen3().encode("Picture 1: <|image_pad|> a cat");
  ASSERT_EQ(std::count(ids.begin(), ids.end(), kImagePadId), 1);
  // The text around it is tokenized on its own: "Picture 1: " then " a cat" (its own leading space).
  std::vector<int32_t> expected = qwen3().encode("Picture 1: ");
  expected.push_back(kImagePadId);
  const auto after = qwen3().encode(" a cat");
  expected.insert(expected.end(), after.begin(), after.end());
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(qwen3().encode("x<|image_pad|><|image_pad|>y"), (std::vector<int32_t>{87, kImagePadId, kImagePadId, 88}));
  // A near miss is ordinary text.
  const auto miss = qwen3().encode("<|image_pad|");
  EXPECT_EQ(std::count(miss.begin(), miss.end(), kImagePadId), 0);
}

TEST(TokenizerQwen3, EmptyTextHasNoTokens) { EXPECT_TRUE(qwen3().encode("").empty()); }

TEST(TokenizerQwen3, HeapBpeMatchesReferenceBpeOnLongAndRandomWords) {
  const ReferenceBpe reference(kQwen3Dir + "/tokenizer.json");
  const SplitRegex split(qwen::kSplitPattern, true);
  std::vector<std::string> words = {std::string(5000, 'a'), letter_word(5000, 1)};
  std::mt19937 rng(7);
  const std::vector<uint32_t> letters = {'a', 'e', 'n', 's', 't', 0xE9, 0xDF, 0x4E2D, 0x6587, 0x0432, 0x0438};
  for (int i = 0; i < 1500; ++i) {
    std::string w;
    for (size_t n = 1 + rng() % 24; n > 0; --n) w += cp(letters[rng() % letters.size()]);
    words.push_back(w);
  }
  for (const auto& w : words) {
    size_t pieces = 0;
    split.split(w, [&](std::string_view) { ++pieces; });
    ASSERT_EQ(pieces, 1u) << "not a single pre-token: " << shown(w);
    const auto ids = qwen3().encode(w);
    ASSERT_EQ(ids, reference.encode_word(w)) << "word: " << shown(w.substr(0, 80));
    EXPECT_EQ(qwen3().decode_bytes(ids), w);
  }
  // 5000 'a's: "a a" merges pair up the run from the left, then "aa aa", then "aaaa aaaa"; Qwen3 has no
  // longer run of a's, so the word is 625 tokens of eight a's.
  const auto eight_a = qwen3().token_id("aaaaaaaa");
  ASSERT_TRUE(eight_a.has_value());
  EXPECT_FALSE(qwen3().token_id(std::string(16, 'a')).has_value());
  EXPECT_EQ(qwen3().encode(std::string(5000, 'a')), std::vector<int32_t>(625, *eight_a));
}

TEST(TokenizerQwen3, FastPathsAndSlowTwinAgree) {
  Tokenizer::Options slow_options;
  slow_options.fast_paths = false;
  const Tokenizer slow = Tokenizer::from_file(kQwen3Dir, slow_options);
  std::vector<std::string> texts = {read_text(kFixtures + "/tokenizer/english_10k.txt")};
  for (const auto& v : read_vectors(kFixtures + "/tokenizer/spec_vectors.jsonl")) texts.push_back(v.text);
  std::mt19937 rng(3);
  const std::vector<uint32_t> pool = {' ', ' ', '\n', '\r', '\t', 'a', 'B', '1', '\'', 's', '.', 0xA0, 0x3000,
                                      0x200B, 0x301, 0xE9, 0x4E16, 0x1F600, 0x200D, 0x2028, 0x85, 0x180E, '<'};
  for (int i = 0; i < 300; ++i) {
    std::string t;
    for (size_t n = rng() % 40; n > 0; --n) t += cp(pool[rng() % pool.size()]);
    texts.push_back(t);
  }
  for (int pass = 0; pass < 2; ++pass)  // the second pass is served from the word cache
    for (const auto& t : texts) ASSERT_EQ(qwen3().encode(t), slow.encode(t)) << "text: " << shown(t);
}

TEST(TokenizerQwen3, EnvironmentCanDisableTheFastPaths) {
  ASSERT_EQ(setenv("H3_DISABLE_TOKENIZER_FAST_PATHS", "1", 1), 0);
  EXPECT_FALSE(Tokenizer::Options::from_environment().fast_paths);
  ASSERT_EQ(setenv("H3_DISABLE_TOKENIZER_FAST_PATHS", "0", 1), 0);
  EXPECT_TRUE(Tokenizer::Options::from_environment().fast_paths);
  ASSERT_EQ(unsetenv("H3_DISABLE_TOKENIZER_FAST_PATHS"), 0);
  EXPECT_TRUE(Tokenizer::Options::from_environment().fast_paths);
}

TEST(TokenizerQwen3, ConcurrentEncodesGiveTheSameIds) {
  std::vector<std::string> texts;
  for (const auto& v : read_vectors(kFixtures + "/tokenizer/spec_vectors.jsonl")) texts.push_back(v.text);
  for (int i = 0; i < 200; ++i) texts.push_back(letter_word(1 + i % 50, static_cast<uint32_t>(i)) + " word" + std::to_string(i));
  const Tokenizer fresh = Tokenizer::from_file(kQwen3Dir);  // empty cache: threads race to fill it
  std::vector<std::vector<int32_t>> expected;
  for (const auto& t : texts) expected.push_back(qwen3().encode(t));
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 8; ++k)
    threads.emplace_back([&, k] {
      for (int rep = 0; rep < 3; ++rep)
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t j = (i * 7 + static_cast<size_t>(k) * 13) % texts.size();
          if (fresh.encode(texts[j]) != expected[j]) ++mismatches;
        }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

TEST(TokenizerQwen3, HugeInputsDoNotExhaustRegexResources) {
  // Long runs of each pre-token kind: letters, digits, symbols, spaces, newlines, non-ASCII letters.
  const size_t n = 1 << 20;
  for (const std::string& unit : {std::string("a"), std::string("7"), std::string("!"), std::string(" "),
                                  std::string("\n"), std::string(" \n"), cp(0x4E2D), cp(0x1F600)}) {
    std::string text;
    while (text.size() < n) text += unit;
    const auto ids = qwen3().encode(text);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(qwen3().decode_bytes(ids), text) << "unit " << shown(unit);
  }
}

TEST(TokenizerQwen3, ReportsLoadAndEncodeSpeed) {
  // Measurements for the report (best of several runs, as the machine may be shared); the assertions only
  // check that the timed work was real and that both paths agree.
  const std::string text = read_text(kFixtures + "/tokenizer/english_10k.txt");
  ASSERT_GT(text.size(), 9000u);
  using clock = std::chrono::steady_clock;
  const auto ms = [](clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
  };
  const auto t0 = clock::now();
  const Tokenizer t = Tokenizer::from_file(kQwen3Dir);
  const auto t1 = clock::now();
  const auto ids = t.encode(text);  // empty word cache
  const double cold = ms(t1, clock::now());
  const auto best_of = [&](const Tokenizer& tok, int runs) {
    double best = 1e30;
    for (int i = 0; i < runs; ++i) {
      const auto a = clock::now();
      EXPECT_EQ(tok.encode(text), ids);
      best = std::min(best, ms(a, clock::now()));
    }
    return best;
  };
  const double warm = best_of(t, 20);
  Tokenizer::Options slow_options;
  slow_options.fast_paths = false;
  const double slow = best_of(Tokenizer::from_file(kQwen3Dir, slow_options), 5);
  std::printf("[ perf     ] Qwen3 tokenizer.json load: %.0f ms\n", ms(t0, t1));
  std::printf("[ perf     ] encode %zu bytes -> %zu tokens: cold cache %.2f ms, warm cache %.2f ms, "
              "no fast paths %.2f ms\n", text.size(), ids.size(), cold, warm, slow);
  EXPECT_GT(ids.size(), text.size() / 8);
}

// ---------------------------------------------------------------------------------------------------------
// UTF-8 validation.

TEST(TokenizerUtf8, InvalidTextIsAnErrorNamingTheByteAndOffset) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"ab\x80", "byte 0x80 at offset 2"},             // lone continuation byte
      {"x\xE4\xBD", "byte 0xE4 at offset 1"},          // truncated 3-byte sequence
      {"\xE4\xBD" "a", "byte 0xE4 at offset 0"},       // truncated in the middle of the text
      {"\xC0\xAF", "byte 0xC0 at offset 0"},           // overlong '/'
      {"ok \xE0\x80\xAF", "byte 0xE0 at offset 3"},    // overlong 3-byte form
      {"\xF0\x80\x80\xAF", "byte 0xF0 at offset 0"},   // overlong 4-byte form
      {"\xED\xA0\x80", "byte 0xED at offset 0"},       // surrogate U+D800
      {"a\xED\xBF\xBF", "byte 0xED at offset 1"},      // surrogate U+DFFF
      {"\xF4\x90\x80\x80", "byte 0xF4 at offset 0"},   // above U+10FFFF
      {"\xFF", "byte 0xFF at offset 0"},
      {"<|image_pad|>\xFE", "byte 0xFE at offset 13"},  // checked before added tokens are split off
  };
  for (const auto& [text, needle] : cases) {
    try {
      qwen3().encode(text);
      ADD_FAILURE() << "no error for " << needle;
    } catch (const Error& e) {
      const std::string msg = e.what();
      EXPECT_EQ(msg.rfind("prompt is not valid UTF-8 (", 0), 0u) << msg;
      EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    }
  }
}

TEST(TokenizerUtf8, BoundaryCodePointsAreValid) {
  for (uint32_t c : {0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xD7FFu, 0xE000u, 0xFFFDu, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
    const std::string s = cp(c);
    EXPECT_EQ(utf8::first_invalid_offset(s), std::string::npos) << std::hex << c;
    EXPECT_EQ(qwen3().decode_bytes(qwen3().encode(s)), s);
  }
}

// ---------------------------------------------------------------------------------------------------------
// The split regex under PCRE2.

TEST(TokenizerRegex, WhitespaceIsExactlyUnicodeWhiteSpace) {
  // tokenizer.md §3: \s is White_Space; U+180E, U+200B, U+FEFF and U+001C..U+001F are not.
  const std::set<uint32_t> white_space = {0x09,   0x0A,   0x0B,   0x0C,   0x0D,   0x20,   0x85,   0xA0,
                                          0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006,
                                          0x2007, 0x2008, 0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000};
  std::string all;  // every scalar value in order; it starts with U+0000, which is not white space
  for (uint32_t c = 0; c <= 0x10FFFF; ++c)
    if (c < 0xD800 || c > 0xDFFF) all += cp(c);
  // Split with a pattern P+, the pieces alternate between maximal runs outside and inside P. For \s+ piece 0
  // is a gap (U+0000) and the odd pieces are matches; for \S+ piece 0 is a match and the odd pieces are
  // gaps. Either way the odd pieces hold exactly the white space.
  for (const char* pattern : {R"(\s+)", R"([\s]+)", R"(\S+)", R"([^\S]+)", R"((?:\s(?!\S)|\s)+)"}) {
    const SplitRegex re(pattern, true);
    std::set<uint32_t> in_odd_pieces;
    size_t index = 0;
    re.split(all, [&](std::string_view piece) {
      if (index++ % 2 == 0) return;
      size_t at = 0;
      while (at < piece.size()) {
        utf8proc_int32_t c = -1;
        at += static_cast<size_t>(utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(piece.data()) + at,
                                                   static_cast<utf8proc_ssize_t>(piece.size() - at), &c));
        in_odd_pieces.insert(static_cast<uint32_t>(c));
      }
    });
    EXPECT_EQ(in_odd_pieces, white_space) << pattern;
  }
  EXPECT_EQ(translate_oniguruma_pattern(R"(\s+(?!\S))"), R"(\p{White_Space}+(?!\P{White_Space}))");
}

TEST(TokenizerRegex, LettersAndNumbersFollowUtf8procUnicodeTables) {
  // U+31350 (CJK Ext. H) and U+11F50 (Kawi digit zero) are Lo / Nd since Unicode 15.0, as in utf8proc;
  // older PCRE2 tables leave them unassigned. The split must treat them as a letter and a number.
  ASSERT_EQ(utf8proc_category(0x31350), UTF8PROC_CATEGORY_LO);
  ASSERT_EQ(utf8proc_category(0x11F50), UTF8PROC_CATEGORY_ND);
  const SplitRegex split(qwen::kSplitPattern, true);
  std::vector<std::string> pieces;
  split.split("x" + cp(0x31350) + "y" + cp(0x11F50) + cp(0x11F51), [&](std::string_view p) { pieces.emplace_back(p); });
  EXPECT_EQ(pieces, (std::vector<std::string>{"x" + cp(0x31350) + "y", cp(0x11F50), cp(0x11F51)}));
}

TEST(TokenizerRegex, RejectsConstructsThatDifferBetweenEngines) {
  for (const char* p : {R"(\w+)", R"(\bx)", R"(^a)", R"(a$)", R"((?m:.))", R"([[:alpha:]])", R"([a-z&&[^b]])", R"(\h)"})
    EXPECT_THROW(translate_oniguruma_pattern(p), Error) << p;
  for (const char* p : {R"((?i:'s|'t))", R"([^\]]+)", R"(\p{Lu}\d{1,3})", R"(\Q^$\E)", R"((?<=a)b)", R"((?-i)x)"})
    EXPECT_NO_THROW(translate_oniguruma_pattern(p)) << p;
  // Inside a class \p{L} stays a class item; outside it may become a class of its own.
  const std::string in_class = translate_oniguruma_pattern(R"([^\p{L}])");
  EXPECT_EQ(in_class.rfind("[^\\p{L}", 0), 0u) << in_class;
  EXPECT_EQ(in_class.back(), ']');
}

TEST(TokenizerRegex, CaseInsensitiveContractionsUseUnicodeFolding) {
  // Oniguruma folds U+017F (long s) to 's'; PCRE2 with UCP does too (tokenizer.md §3).
  const SplitRegex split(qwen::kSplitPattern, true);
  std::vector<std::string> pieces;
  split.split("x'" + cp(0x17F), [&](std::string_view p) { pieces.emplace_back(p); });
  EXPECT_EQ(pieces, (std::vector<std::string>{"x", "'" + cp(0x17F)}));
}

// ---------------------------------------------------------------------------------------------------------
// Loading: what is accepted and what is rejected.

TEST(TokenizerLoad, RejectsUnsupportedFieldsByName) {
  expect_load_error(tiny_edited([](json& j) { j["normalizer"] = {{"type", "NFKC"}}; }), "normalizer.type");
  expect_load_error(tiny_edited([](json& j) { j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "Lowercase"}}}}}; }),
                    "normalizer.normalizers[].type");
  expect_load_error(tiny_edited([](json& j) { j["pre_tokenizer"]["pretokenizers"][1]["add_prefix_space"] = true; }),
                    "pre_tokenizer.pretokenizers[1].add_prefix_space");
  expect_load_error(tiny_edited([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed"; }),
                    "pre_tokenizer.pretokenizers[0].behavior");
  expect_load_error(tiny_edited([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["invert"] = true; }),
                    "pre_tokenizer.pretokenizers[0].invert");
  expect_load_error(tiny_edited([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"] = {{"String", " "}}; }),
                    "pre_tokenizer.pretokenizers[0].pattern");
  expect_load_error(tiny_edited([](json& j) { j["pre_tokenizer"] = {{"type", "Whitespace"}}; }), "pre_tokenizer.type");
  expect_load_error(tiny_edited([](json& j) { j["pre_tokenizer"]["pretokenizers"] = json::array(); }),
                    "pre_tokenizer.pretokenizers");
  expect_load_error(tiny_edited([](json& j) { j["pre_tokenizer"]["pretokenizers"].erase(1); }),
                    "pre_tokenizer.pretokenizers[0].type");
  expect_load_error(tiny_edited([](json& j) { j["model"]["vocab"]["Ġa"] = 3; }), "gives id 3 to two tokens");
  expect_load_error(tiny_edited([](json& j) { j["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = R"(\w+)"; }),
                    "\\w");
  expect_load_error(tiny_edited([](json& j) { j["model"]["type"] = "WordPiece"; }), "model.type");
  expect_load_error(tiny_edited([](json& j) { j["model"]["dropout"] = 0.1; }), "model.dropout");
  expect_load_error(tiny_edited([](json& j) { j["model"]["unk_token"] = "<unk>"; }), "model.unk_token");
  expect_load_error(tiny_edited([](json& j) { j["model"]["byte_fallback"] = true; }), "model.byte_fallback");
  expect_load_error(tiny_edited([](json& j) { j["model"]["continuing_subword_prefix"] = "##"; }),
                    "model.continuing_subword_prefix");
  expect_load_error(tiny_edited([](json& j) { j["model"]["end_of_word_suffix"] = "</w>"; }), "model.end_of_word_suffix");
  expect_load_error(tiny_edited([](json& j) { j["model"]["merges"].push_back({"Ġ", "zzz"}); }), "zzz");
  expect_load_error(tiny_edited([](json& j) { j["model"]["vocab"].erase("Ġ"); }), "lacks the byte-level symbol");
  expect_load_error(tiny_edited([](json& j) { j["added_tokens"][0]["lstrip"] = true; }), "added_tokens[0].lstrip");
  expect_load_error(tiny_edited([](json& j) { j["added_tokens"][3]["rstrip"] = true; }), "added_tokens[3].rstrip");
  expect_load_error(tiny_edited([](json& j) { j["added_tokens"][5]["single_word"] = true; }),
                    "added_tokens[5].single_word");
  expect_load_error("{not json", "not valid JSON");
}

TEST(TokenizerLoad, ConfigMustAgreeWithTokenizerJson) {
  const std::string tok = make_tiny_tokenizer_json();
  json config = json::parse(make_tiny_tokenizer_config_json());
  config["eos_token"] = "<|not_a_token|>";
  EXPECT_THROW(Tokenizer::from_json(tok, config.dump()), Error);
  config = json::parse(make_tiny_tokenizer_config_json());
  config["added_tokens_decoder"]["7"] = {{"content", "<|im_end|>"}};
  EXPECT_THROW(Tokenizer::from_json(tok, config.dump()), Error);
  config = json::parse(make_tiny_tokenizer_config_json());
  config["eos_token"] = {{"__type", "AddedToken"}, {"content", "<|endoftext|>"}};
  EXPECT_EQ(Tokenizer::from_json(tok, config.dump()).config().eos_token, "<|endoftext|>");
}

TEST(TokenizerLoad, MergesAsStringsOrPairsAndNormalizerFormsAreEquivalent) {
  const std::string text = "A red fox crosses fresh snow at sunrise.\n\nThe robot's tea: 20 minutes.";
  const auto expected = tiny().encode(text);
  const std::string as_strings = tiny_edited([](json& j) {
    for (auto& m : j["model"]["merges"]) m = m[0].get<std::string>() + " " + m[1].get<std::string>();
  });
  EXPECT_EQ(Tokenizer::from_json(as_strings).encode(text), expected);
  const std::string as_sequence =
      tiny_edited([](json& j) { j["normalizer"] = {{"type", "Sequence"}, {"normalizers", {{{"type", "NFC"}}}}}; });
  EXPECT_TRUE(Tokenizer::from_json(as_sequence).normalizes_nfc());
  EXPECT_EQ(Tokenizer::from_json(as_sequence).encode("e\u0301"), tiny().encode("\u00e9"));
  const Tokenizer none = Tokenizer::from_json(tiny_edited([](json& j) { j["normalizer"] = nullptr; }));
  EXPECT_FALSE(none.normalizes_nfc());
  EXPECT_NE(none.encode("e\u0301"), none.encode("\u00e9"));  // without NFC the two spellings differ
}

TEST(TokenizerLoad, LoneByteLevelWithRegexUsesTheGpt2Split) {
  const Tokenizer t = Tokenizer::from_json(minimal_tokenizer({}, json::array()).dump());
  ASSERT_EQ(t.split_patterns().size(), 1u);
  EXPECT_EQ(t.split_patterns()[0], R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)");
  EXPECT_FALSE(t.normalizes_nfc());
  EXPECT_EQ(t.vocab_size(), 256u);
  EXPECT_EQ(t.encode(" a"), (std::vector<int32_t>{*t.token_id("Ġ"), *t.token_id("a")}));
}

TEST(TokenizerLoad, IgnoreMergesTakesWholeVocabWords) {
  // "abc" is a vocab entry that no merge builds: only ignore_merges=true yields it.
  json j = minimal_tokenizer({"ab", "abc"}, json::array({"a b"}));
  const int32_t ab = 256, abc = 257;
  const int32_t c = Tokenizer::from_json(j.dump()).token_id("c").value();
  EXPECT_EQ(Tokenizer::from_json(j.dump()).encode("abc"), (std::vector<int32_t>{ab, c}));
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(Tokenizer::from_json(j.dump()).encode("abc"), (std::vector<int32_t>{abc}));
  EXPECT_EQ(Tokenizer::from_json(j.dump()).encode("abcab"), (std::vector<int32_t>{ab, c, ab}));
}

TEST(TokenizerLoad, NormalizedAddedTokensMatchTheNfcText) {
  // An added token with normalized=true is found in the NFC text, so a decomposed spelling matches it;
  // with normalized=false it is matched in the raw text only.
  json j = minimal_tokenizer({}, json::array());
  j["normalizer"] = {{"type", "NFC"}};
  j["added_tokens"] = {{{"id", 300}, {"content", "caf\u00e9"}, {"special", false}, {"normalized", true}}};
  const Tokenizer normalized = Tokenizer::from_json(j.dump());
  EXPECT_EQ(normalized.encode("le cafe\u0301!"), normalized.encode("le caf\u00e9!"));
  const auto ids = normalized.encode("le cafe\u0301!");
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 300), 1);
  j["added_tokens"][0]["normalized"] = false;
  const Tokenizer raw = Tokenizer::from_json(j.dump());
  const auto raw_ids = raw.encode("le cafe\u0301!");
  EXPECT_EQ(std::count(raw_ids.begin(), raw_ids.end(), 300), 0);
  EXPECT_EQ(raw.vocab_size(), 301u);
}

TEST(TokenizerLoad, AddedTokensMatchLeftmostLongest) {
  json j = minimal_tokenizer({}, json::array());
  j["added_tokens"] = {{{"id", 300}, {"content", "<a>"}, {"special", true}, {"normalized", false}},
                       {{"id", 301}, {"content", "<a><b>"}, {"special", true}, {"normalized", false}},
                       {{"id", 302}, {"content", "a><"}, {"special", false}, {"normalized", false}}};
  const Tokenizer t = Tokenizer::from_json(j.dump());
  // At offset 0 both "<a>" and "<a><b>" match: the longer wins. "a><" starts later, so it loses.
  EXPECT_EQ(t.encode("<a><b>"), (std::vector<int32_t>{301}));
  EXPECT_EQ(t.encode("<a><c"), (std::vector<int32_t>{300, *t.token_id("<"), *t.token_id("c")}));
  EXPECT_EQ(t.encode("xa><a>"), (std::vector<int32_t>{*t.token_id("x"), 302, *t.token_id("a"), *t.token_id(">")}));
}

// ---------------------------------------------------------------------------------------------------------
// The tiny tokenizer of the demo model.

TEST(TokenizerTiny, IsDeterministicAndShapedLikeQwen) {
  EXPECT_EQ(make_tiny_tokenizer_json(), make_tiny_tokenizer_json());
  EXPECT_EQ(make_tiny_tokenizer_config_json(), make_tiny_tokenizer_config_json());
  const Tokenizer& t = tiny();
  EXPECT_TRUE(t.normalizes_nfc());
  EXPECT_EQ(t.split_patterns(), std::vector<std::string>{std::string(qwen::kSplitPattern)});
  EXPECT_GE(t.merge_count(), 200u);
  EXPECT_LE(t.merge_count(), 500u);
  const auto order = byte_level::bytes_in_gpt2_order();
  for (int32_t id = 0; id < 256; ++id) EXPECT_EQ(t.token_id(byte_level::symbol_of_byte(order[id])), id);
  const auto first_added = static_cast<int32_t>(t.base_vocab_count());
  ASSERT_EQ(t.added_tokens().size(), qwen::kAddedTokens.size());
  for (size_t i = 0; i < qwen::kAddedTokens.size(); ++i) {
    EXPECT_EQ(t.added_tokens()[i].id, first_added + static_cast<int32_t>(i));
    EXPECT_EQ(t.added_tokens()[i].content, qwen::kAddedTokens[i].content);
    EXPECT_EQ(t.added_tokens()[i].special, qwen::kAddedTokens[i].special);
  }
  EXPECT_EQ(t.vocab_size(), t.base_vocab_count() + qwen::kAddedTokens.size());
  EXPECT_EQ(t.config().tokenizer_class, "Qwen2TokenizerFast");
  EXPECT_EQ(t.config().eos_token, "<|im_end|>");
  EXPECT_EQ(t.config().pad_token, "<|endoftext|>");
  EXPECT_FALSE(t.config().bos_token.has_value());
  EXPECT_EQ(t.config().model_max_length, 262144);
  // The merges were learned from English: common words compress.
  const std::string sentence = "The robot walks into the kitchen and makes tea for the cat.";
  EXPECT_LT(t.encode(sentence).size(), sentence.size() / 2);
}

TEST(TokenizerTiny, RoundTripsToTheNfcText) {
  std::vector<std::string> texts = {read_text(kFixtures + "/tokenizer/english_10k.txt")};
  for (const auto& v : read_vectors(kFixtures + "/tokenizer/spec_vectors.jsonl")) texts.push_back(v.text);
  std::mt19937 rng(11);
  for (int i = 0; i < 500; ++i) {
    std::string t;
    for (size_t n = rng() % 30; n > 0; --n) {
      uint32_t c = rng() % 0x2FFFF;
      if (c >= 0xD800 && c <= 0xDFFF) c = 0x301;  // combining acute: exercises NFC
      t += cp(c);
    }
    texts.push_back(t);
  }
  for (const auto& t : texts) EXPECT_EQ(tiny().decode_bytes(tiny().encode(t)), utf8::nfc(t)) << shown(t);
}

TEST(TokenizerTiny, MatchesHfTokenizersOnTheirTinyTokenizer) {
  const std::string dir = kFixtures + "/tiny_tokenizer";
  const std::string ids_path = kFixtures + "/tokenizer/tiny_ids.jsonl";
  if (!std::filesystem::exists(dir + "/tokenizer.json")) GTEST_SKIP() << "missing fixture " << dir << "/tokenizer.json";
  if (!std::filesystem::exists(ids_path)) GTEST_SKIP() << "missing fixture " << ids_path;
  const Tokenizer t = Tokenizer::from_file(dir);
  const auto vectors = read_vectors(ids_path);
  EXPECT_FALSE(vectors.empty());
  for (const auto& v : vectors) EXPECT_EQ(t.encode(v.text), v.ids) << "text: " << shown(v.text);
}

// ---------------------------------------------------------------------------------------------------------
// h3 tool tokenize

TEST(TokenizerTool, PrintsIdsAsJsonOnOneLine) {
  const auto r = run_tool({"--tokenizer", kQwen3Dir, "--text", "<Picture 1>: "});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "[21604,3826,220,16,26818,220]\n");
  EXPECT_EQ(r.err, "");
  const auto file = run_tool({"--tokenizer=" + kQwen3Dir + "/tokenizer.json", "--text=a cat<|vision_end|>"});
  EXPECT_EQ(file.out, "[64,8251,151653]\n");
  const auto empty = run_tool({"--tokenizer", kQwen3Dir, "--text", ""});
  EXPECT_EQ(empty.out, "[]\n");
}

TEST(TokenizerTool, ReadsStdinByteForByte) {
  const auto r = run_tool({"--tokenizer", kQwen3Dir, "--stdin"}, "end.\n");
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, ids_json(qwen3().encode("end.\n")) + "\n");
  EXPECT_EQ(r.out, "[408,624]\n");
}

TEST(TokenizerTool, BadUsageIsOneLineAndStatus2) {
  for (const auto& args : std::vector<std::vector<std::string>>{
           {},
           {"--text", "x"},
           {"--tokenizer", kQwen3Dir},
           {"--tokenizer", kQwen3Dir, "--text", "x", "--stdin"},
           {"--tokenizer"},
           {"--tokenizer", kQwen3Dir, "--bogus"},
           {"--tokenizer", kQwen3Dir, "--stdin=yes"}}) {  // a flag takes no value
    const auto r = run_tool(args);
    EXPECT_EQ(r.status, 2);
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_EQ(r.out, "");
  }
  const auto help = run_tool({"--help"});
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("usage: h3 tool tokenize"), std::string::npos);
}

TEST(TokenizerTool, ErrorsAreStatus1) {
  const auto bad_text = run_tool({"--tokenizer", kQwen3Dir, "--text", "a\xC0"});
  EXPECT_EQ(bad_text.status, 1);
  EXPECT_NE(bad_text.err.find("not valid UTF-8"), std::string::npos) << bad_text.err;
  const auto missing = run_tool({"--tokenizer", "/nonexistent/tokenizer", "--text", "x"});
  EXPECT_EQ(missing.status, 1);
  EXPECT_NE(missing.err.find("does not exist"), std::string::npos) << missing.err;
}
