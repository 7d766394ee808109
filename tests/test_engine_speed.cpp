// The DiT's speed controls through h3::Engine on a tiny snapshot with a 10-block transformer (h3 tool
// make-tiny-model --transformer-blocks 10): the defaults given explicitly are the default generation bit for bit;
// --layers frees and later reloads blocks, the restored transformer generating the default's bits again;
// token reduction and core reuse change the result, and their twins (H3_DISABLE_TOKEN_REDUCTION, core reuse 1)
// give the default's bits back; a bad token-reduction environment is refused before anything loads.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "h3/h3.h"
#include "tools/tiny_model.h"
#include "util/scoped_env.h"

using namespace h3;
namespace fs = std::filesystem;

namespace {

const std::string& ten_block_model() {
  static const std::string dir = [] {
    const std::string d = (fs::temp_directory_path() / ("h3_engine_speed_" + std::to_string(getpid()))).string();
    fs::remove_all(d);
    make_tiny_model(d, 3, 10);
    return d;
  }();
  return dir;
}

GenerationRequest small_request() {
  GenerationRequest r;
  r.prompt = "a fox in the snow";
  r.width = 64;
  r.height = 64;
  r.frames = 5;
  r.steps = 4;
  return r;
}

bool same_bits(const GenerationResult& a, const GenerationResult& b) {
  auto eq = [](const Tensor& x, const Tensor& y) {
    return x.shape() == y.shape() && std::memcmp(x.data(), y.data(), x.nbytes()) == 0;
  };
  return eq(a.video, b.video) && eq(a.audio, b.audio);
}

bool has_load_phase(const GenerationResult& r) {
  for (const PhaseTiming& t : r.timings)
    if (t.phase == Phase::Load) return true;
  return false;
}

}  // namespace

TEST(EngineSpeed, ControlsAndTheirTwins) {
  EngineOptions o;
  o.model_dir = ten_block_model();
  o.device = "cpu";
  auto engine = Engine::open(o);
  GenerationRequest r = small_request();
  const GenerationResult base = engine->generate(r);

  GenerationRequest all = r;
  all.layers = 10;
  all.core_reuse = 1;
  EXPECT_TRUE(same_bits(engine->generate(all), base));

  GenerationRequest thin = r;
  thin.layers = 7;
  const GenerationResult thinned = engine->generate(thin);
  EXPECT_FALSE(same_bits(thinned, base));
  EXPECT_TRUE(has_load_phase(thinned));  // the ranking and the blocks' changes are load time
  const GenerationResult restored = engine->generate(r);
  EXPECT_TRUE(has_load_phase(restored));  // the dropped blocks were loaded again
  EXPECT_TRUE(same_bits(restored, base));
  EXPECT_FALSE(has_load_phase(engine->generate(r)));  // nothing left to load

  GenerationRequest fast = r;
  fast.token_reduction = true;
  fast.core_reuse = 2;
  EXPECT_FALSE(same_bits(engine->generate(fast), base));
  {
    ScopedEnv off("H3_DISABLE_TOKEN_REDUCTION", "1");
    GenerationRequest twin = fast;
    twin.core_reuse = 1;
    EXPECT_TRUE(same_bits(engine->generate(twin), base));
  }

  GenerationRequest bad = r;
  bad.layers = 6;
  try {
    engine->validate(bad);
    FAIL() << "6 of 10 blocks accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("--layers must be between 7 and 10"), std::string::npos) << e.what();
  }
  ScopedEnv blocks("H3_TOKEN_REDUCTION_BLOCKS", "9:3");
  try {
    engine->validate(fast);
    FAIL() << "a bad H3_TOKEN_REDUCTION_BLOCKS accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("H3_TOKEN_REDUCTION_BLOCKS must be BEGIN:END with 0 <= BEGIN < END <= 10"),
              std::string::npos)
        << e.what();
  }
}
