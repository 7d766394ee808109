#include "text/tiny_tokenizer.h"

#include <map>
#include <nlohmann/json.hpp>
#include <string_view>
#include <utility>
#include <vector>

#include "text/byte_level.h"
#include "text/qwen_tokens.h"
#include "text/split_regex.h"
#include "text/utf8.h"

namespace h3 {

namespace {

using ordered_json = nlohmann::ordered_json;

constexpr int kTinyMergeCount = 320;
constexpr int64_t kTinyModelMaxLength = 262144;
constexpr int kMinPairCount = 2;  // a pair seen once is not worth a merge

// Training text: plain English prose about the things a video model is asked for, with digits,
// punctuation, contractions and line breaks so that every kind of pre-token occurs.
constexpr std::string_view kCorpus = R"(A small robot walks into a quiet kitchen at dawn. The light is soft and warm, and the
robot stops at the window to watch the sun rise over the hills. It is the first morning of spring.
The robot makes tea for two. It fills the kettle with water, waits for the water to boil, and then
pours it over the leaves. Steam rises from the cups. A cat sleeps on the chair by the door.

In the next scene, a red fox crosses fresh snow at sunrise. Its tracks are deep and clear, and the
snow sparkles in the early light. The fox stops, listens, and then runs towards the trees.
Birds are singing in the forest. A river runs between the rocks, and the sound of the water is
calm and steady. The camera follows the fox as it moves through the forest and into the open field.

"Where are you going?" asks the child. "I'm going to the market," says her mother. "We'll be back
before the rain starts." They walk down the street together. The shops are opening, people are
talking, and the smell of fresh bread comes from the bakery on the corner. It's a busy morning.

The video is 10 seconds long and shows 3 people dancing in a park. They're wearing bright clothes:
one in red, one in blue and one in green. The music is fast, and they move in time with the beat.
At 4.5 seconds, the camera turns to the left and shows the trees, the grass and the sky. At the end,
they stop, laugh, and wave at the camera.

A man plays the piano in a large hall. The hall is empty except for him and the piano. His hands
move slowly over the keys, and the notes fill the room. Outside, the city is dark and the streets
are wet with rain. Cars pass by, and their lights shine on the water. He doesn't look up.

Ocean waves break on the shore under a grey sky. The wind is strong, and the water is cold and
rough. A lighthouse stands on the rocks at the end of the beach. Its light turns around and around,
and the gulls fly over the waves. A dog runs along the sand, chasing the birds, and then comes back
to its owner, who is walking slowly with a long coat and a warm hat.

The chef cuts the vegetables into small pieces: carrots, onions, peppers and tomatoes. She puts
them in a hot pan with oil and salt, and the kitchen fills with the sound of cooking. Then she adds
the rice and the water, covers the pan, and waits for 20 minutes. The food is ready at 7:30 pm.

A train moves through the mountains at night. The windows are bright, and the people inside are
reading, sleeping and talking. Snow falls on the tracks. The train goes over a long bridge and into
a tunnel, and for a moment everything is dark. Then the lights come back, and the journey goes on.

Two friends sit by a fire in the woods. They talk about the past and the future, about the places
they've been and the places they want to see. The fire is warm and the stars are bright. One of them
plays a song on the guitar, and the other sings softly. It's late, but neither of them is tired.

In the studio, an artist paints a large picture of the sea. The colours are blue, green and white,
with a little yellow where the sun touches the water. She steps back, looks at the picture, and then
adds a small boat near the horizon. The painting is finished after 3 long days of work.

The children run across the playground, laughing and shouting. Some of them climb the trees, some
play with a ball, and some sit on the grass and watch the clouds. A teacher calls them, and they all
run back to the school. The bell rings. The day is over, and the playground is quiet again.

A woman reads a book in a small garden. Flowers are growing all around her: roses, tulips and
sunflowers. Bees move from flower to flower. The afternoon is long and slow, and the sun is warm on
her face. She turns the page, smiles, and keeps reading until the light begins to fade.

Slow motion: a drop of water falls into a glass of milk and makes a perfect white crown. The camera
is very close, and every detail is sharp. Then the crown falls back, and the surface becomes smooth.
The same shot is repeated 5 times, each time with a different colour of light.
)";

// One word of the training text as a sequence of symbol ids, with how often it occurs.
struct Word {
  std::vector<int32_t> symbols;
  int64_t count;
};

struct TrainedBpe {
  std::vector<std::string> vocab;  // id -> byte-level symbol string
  std::vector<std::pair<int32_t, int32_t>> merges;
};

TrainedBpe train() {
  TrainedBpe bpe;
  std::array<int32_t, 256> id_of_byte{};
  const auto order = byte_level::bytes_in_gpt2_order();
  for (int32_t id = 0; id < 256; ++id) {
    id_of_byte[order[id]] = id;
    bpe.vocab.push_back(byte_level::symbol_of_byte(order[id]));
  }

  // Word counts of the NFC text, split with Qwen's regex; std::map keeps the order deterministic.
  std::map<std::string, int64_t> word_counts;
  const SplitRegex split(qwen::kSplitPattern, true);
  split.split(utf8::nfc(kCorpus), [&](std::string_view w) { ++word_counts[std::string(w)]; });
  std::vector<Word> words;
  for (const auto& [text, count] : word_counts) {
    Word w{{}, count};
    for (char c : text) w.symbols.push_back(id_of_byte[static_cast<uint8_t>(c)]);
    words.push_back(std::move(w));
  }

  std::map<std::string, int32_t> id_of_string;
  for (int32_t id = 0; id < 256; ++id) id_of_string[bpe.vocab[id]] = id;
  for (int m = 0; m < kTinyMergeCount; ++m) {
    // The most frequent adjacent pair; ties go to the smallest (left, right) ids.
    std::map<std::pair<int32_t, int32_t>, int64_t> pair_counts;
    for (const Word& w : words)
      for (size_t i = 0; i + 1 < w.symbols.size(); ++i) pair_counts[{w.symbols[i], w.symbols[i + 1]}] += w.count;
    std::pair<int32_t, int32_t> best{};
    int64_t best_count = 0;
    for (const auto& [pair, count] : pair_counts)
      if (count > best_count) best = pair, best_count = count;
    if (best_count < kMinPairCount) break;

    const std::string merged = bpe.vocab[best.first] + bpe.vocab[best.second];
    auto [it, inserted] = id_of_string.emplace(merged, static_cast<int32_t>(bpe.vocab.size()));
    if (inserted) bpe.vocab.push_back(merged);
    bpe.merges.push_back(best);
    for (Word& w : words) {  // replace every occurrence, left to right
      std::vector<int32_t> out;
      for (size_t i = 0; i < w.symbols.size(); ++i) {
        if (i + 1 < w.symbols.size() && w.symbols[i] == best.first && w.symbols[i + 1] == best.second) {
          out.push_back(it->second);
          ++i;
        } else {
          out.push_back(w.symbols[i]);
        }
      }
      w.symbols = std::move(out);
    }
  }
  return bpe;
}

const TrainedBpe& trained() {
  static const TrainedBpe bpe = train();
  return bpe;
}

int32_t first_added_id() { return static_cast<int32_t>(trained().vocab.size()); }

ordered_json byte_level_step() {
  return ordered_json{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}};
}

}  // namespace

std::string make_tiny_tokenizer_json() {
  const TrainedBpe& bpe = trained();
  ordered_json added = ordered_json::array();
  for (size_t i = 0; i < qwen::kAddedTokens.size(); ++i) {
    const auto& t = qwen::kAddedTokens[i];
    added.push_back(ordered_json{{"id", first_added_id() + static_cast<int32_t>(i)},
                                 {"content", std::string(t.content)},
                                 {"single_word", false},
                                 {"lstrip", false},
                                 {"rstrip", false},
                                 {"normalized", false},
                                 {"special", t.special}});
  }
  ordered_json vocab = ordered_json::object();
  for (size_t id = 0; id < bpe.vocab.size(); ++id) vocab[bpe.vocab[id]] = id;
  ordered_json merges = ordered_json::array();
  for (const auto& [l, r] : bpe.merges) merges.push_back(ordered_json::array({bpe.vocab[l], bpe.vocab[r]}));

  ordered_json root;
  root["version"] = "1.0";
  root["truncation"] = nullptr;
  root["padding"] = nullptr;
  root["added_tokens"] = added;
  root["normalizer"] = ordered_json{{"type", "NFC"}};
  root["pre_tokenizer"] = ordered_json{
      {"type", "Sequence"},
      {"pretokenizers", ordered_json::array({ordered_json{{"type", "Split"},
                                                          {"pattern", ordered_json{{"Regex", std::string(qwen::kSplitPattern)}}},
                                                          {"behavior", "Isolated"},
                                                          {"invert", false}},
                                             byte_level_step()})}};
  root["post_processor"] = byte_level_step();
  root["decoder"] = byte_level_step();
  root["model"] = ordered_json{{"type", "BPE"},
                               {"dropout", nullptr},
                               {"unk_token", nullptr},
                               {"continuing_subword_prefix", ""},
                               {"end_of_word_suffix", ""},
                               {"fuse_unk", false},
                               {"byte_fallback", false},
                               {"ignore_merges", false},
                               {"vocab", vocab},
                               {"merges", merges}};
  return root.dump(2, ' ', false) + "\n";
}

std::string make_tiny_tokenizer_config_json() {
  ordered_json decoder = ordered_json::object();
  ordered_json additional = ordered_json::array();
  for (size_t i = 0; i < qwen::kAddedTokens.size(); ++i) {
    const auto& t = qwen::kAddedTokens[i];
    decoder[std::to_string(first_added_id() + static_cast<int32_t>(i))] =
        ordered_json{{"content", std::string(t.content)}, {"lstrip", false},   {"normalized", false},
                     {"rstrip", false},                   {"single_word", false}, {"special", t.special}};
  }
  // Qwen lists its special tokens other than <|endoftext|> as additional special tokens.
  for (const auto& t : qwen::kAddedTokens)
    if (t.special && t.content != "<|endoftext|>") additional.push_back(std::string(t.content));

  ordered_json root;
  root["add_bos_token"] = false;
  root["add_prefix_space"] = false;
  root["added_tokens_decoder"] = decoder;
  root["additional_special_tokens"] = additional;
  root["bos_token"] = nullptr;
  root["clean_up_tokenization_spaces"] = false;
  root["eos_token"] = "<|im_end|>";
  root["errors"] = "replace";
  root["model_max_length"] = kTinyModelMaxLength;
  root["pad_token"] = "<|endoftext|>";
  root["split_special_tokens"] = false;
  root["tokenizer_class"] = "Qwen2TokenizerFast";
  root["unk_token"] = nullptr;
  return root.dump(2, ' ', false) + "\n";
}

}  // namespace h3
