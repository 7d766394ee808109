// util/env.h: the H3_* settings parsed in one place, bad values rejected with one sentence naming the variable.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "util/env.h"
#include "util/scoped_env.h"
#include "util/error.h"

namespace h3 {
namespace {

constexpr const char* kVar = "H3_TEST_ENV_SETTING";

class UtilEnv : public ::testing::Test {
 protected:
  void TearDown() override { unsetenv(kVar); }
  void set(const char* v) { setenv(kVar, v, 1); }
  // The message of the error `fn` throws, or "" when it does not throw.
  template <typename Fn>
  std::string error_of(Fn fn) {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
};

TEST_F(UtilEnv, FlagIsSetNonEmptyAndNotZero) {
  unsetenv(kVar);
  EXPECT_FALSE(env_flag(kVar));
  set("");
  EXPECT_FALSE(env_flag(kVar));
  set("0");
  EXPECT_FALSE(env_flag(kVar));
  set("1");
  EXPECT_TRUE(env_flag(kVar));
  set("yes");
  EXPECT_TRUE(env_flag(kVar));
}

TEST_F(UtilEnv, IntInRangeOrFallback) {
  unsetenv(kVar);
  EXPECT_EQ(env_int(kVar, 8, 1, 32), 8);
  set("");
  EXPECT_EQ(env_int(kVar, 8, 1, 32), 8);
  set("32");
  EXPECT_EQ(env_int(kVar, 8, 1, 32), 32);
  set("1");
  EXPECT_EQ(env_int(kVar, 8, 1, 32), 1);
  for (const char* bad : {"0", "33", "-4", "12abc", "abc", " 7", "99999999999"}) {
    set(bad);
    const std::string msg = error_of([] { env_int(kVar, 8, 1, 32); });
    EXPECT_NE(msg.find(std::string(kVar) + " must be an integer in [1, 32], got '" + bad + "'"), std::string::npos)
        << bad << ": " << msg;
  }
}

TEST_F(UtilEnv, ChoiceNamesTheAllowedValues) {
  unsetenv(kVar);
  EXPECT_EQ(env_choice(kVar, 176, {128, 176}), 176);
  set("128");
  EXPECT_EQ(env_choice(kVar, 176, {128, 176}), 128);
  for (const char* bad : {"64", "abc", "128x", "-128"}) {
    set(bad);
    const std::string msg = error_of([] { env_choice(kVar, 176, {128, 176}); });
    EXPECT_NE(msg.find(std::string(kVar) + " must be 128 or 176, got '" + bad + "'"), std::string::npos)
        << bad << ": " << msg;
  }
}

TEST_F(UtilEnv, WordNamesTheAllowedWords) {
  unsetenv(kVar);
  EXPECT_EQ(env_word(kVar, "packed", {"packed", "head-major"}), "packed");
  set("");
  EXPECT_EQ(env_word(kVar, "packed", {"packed", "head-major"}), "packed");
  set("head-major");
  EXPECT_EQ(env_word(kVar, "packed", {"packed", "head-major"}), "head-major");
  for (const char* bad : {"Head-Major", "head-major ", "x"}) {
    set(bad);
    const std::string msg = error_of([] { env_word(kVar, "packed", {"packed", "head-major"}); });
    EXPECT_NE(msg.find(std::string(kVar) + " must be packed or head-major, got '" + bad + "'"), std::string::npos)
        << bad << ": " << msg;
  }
}

TEST_F(UtilEnv, ScopedEnvRestoresWhatWasThere) {
  unsetenv(kVar);
  {
    ScopedEnv outer(kVar, "1");
    {
      ScopedEnv inner(kVar, "2");
      EXPECT_STREQ(std::getenv(kVar), "2");
    }
    EXPECT_STREQ(std::getenv(kVar), "1");  // the outer scope's value, not unset
  }
  EXPECT_EQ(std::getenv(kVar), nullptr);
}

}  // namespace
}  // namespace h3
