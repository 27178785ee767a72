// Settings read from environment variables (crest/core/env_setting.hpp): each spelling gives its
// value, an unset or empty variable the "" choice, and any other spelling is a usage error naming
// the variable, the value and what every accepted spelling does.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "crest/core/env_setting.hpp"
#include "support/scoped_env.hpp"

namespace crest {
namespace {

enum class Speed { slow, fast };

Speed speed() {
  return env_setting<Speed>("CREST_TEST_SPEED", {{"", Speed::slow, "by default"},
                                                 {"slow", Speed::slow, "carefully"},
                                                 {"fast", Speed::fast, "quickly"}});
}

TEST(EnvSetting, EachSpellingGivesItsValueAndUnsetTheDefault) {
  ASSERT_EQ(std::getenv("CREST_TEST_SPEED"), nullptr);
  EXPECT_EQ(speed(), Speed::slow);
  {
    const test::ScopedEnv empty("CREST_TEST_SPEED", "");
    EXPECT_EQ(speed(), Speed::slow);
  }
  const test::ScopedEnv fast("CREST_TEST_SPEED", "fast");
  EXPECT_EQ(speed(), Speed::fast);
}

TEST(EnvSetting, AnotherSpellingIsAUsageErrorNamingEveryChoice) {
  const test::ScopedEnv typo("CREST_TEST_SPEED", "Fast");
  try {
    speed();
    ADD_FAILURE() << "CREST_TEST_SPEED=Fast was accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::usage);
    EXPECT_EQ(std::string(e.what()),
              "CREST_TEST_SPEED: 'Fast' is not a setting (unset: by default, slow: carefully, "
              "fast: quickly)");
  }
}

}  // namespace
}  // namespace crest
