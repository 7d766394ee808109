#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "text/tokenizer.h"
#include "util/error.h"

using namespace h3;

namespace {

const std::string kQwen3Dir = std::string(H3_TEST_DATA_DIR) + "/qwen3_tokenizer";

const Tokenizer& qwen3() {
  static const Tokenizer t = Tokenizer::from_file(kQwen3Dir);
  return t;
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
    const auto j = nlohmann::json::parse(line);
    out.push_back({j.at("text").get<std::string>(), j.at("ids").get<std::vector<int32_t>>()});
  }
  return out;
}

}  // namespace

TEST(TokenizerQwen3, SpecVectorsAreByteExact) {
  const auto vectors = read_vectors(std::string(H3_SOURCE_DIR) + "/tests/fixtures/tokenizer/spec_vectors.jsonl");
  ASSERT_EQ(vectors.size(), 100u);
  for (const auto& v : vectors) EXPECT_EQ(qwen3().encode(v.text), v.ids) << "text: " << nlohmann::json(v.text).dump();
}
