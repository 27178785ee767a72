// Search spaces (crest/search/search_space.hpp): parsing, samplers, conditions, grids, seeds, and
// the check of every parameter against the config schema.
#include "crest/search/search_space.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <set>
#include <string>

#include "crest/core/error.hpp"
#include "crest/search/space_check.hpp"
#include "support/cli_util.hpp"
#include "support/tiny_run.hpp"

namespace crest {
namespace {

const std::string kDemo = std::string(CREST_SOURCE_DIR) + "/configs/cosmoflow-demo.yaml";

SearchSpace space_of(const std::string& params) {
  return parse_search_space("parameters:\n" + params, "space.yaml");
}

// The message of the crest::Error (input) that parsing `params` throws.
std::string parse_error(const std::string& params) {
  try {
    space_of(params);
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    return e.what();
  }
  ADD_FAILURE() << "no error for: " << params;
  return "";
}

TEST(SearchSpace, SamplersStayInTheirRangesAndIntegersAreIntegers) {
  const SearchSpace s = space_of(
      "  lr_schedule.base_lr: {loguniform: [1e-4, 1e-1]}\n"
      "  model.dropout: {uniform: [0, 0.5]}\n"
      "  model.conv_size: {randint: [4, 6]}\n"
      "  data.batch_size: {choice: [2, 4, 8]}\n");
  std::set<std::string> ints, batches;
  double log_sum = 0;
  const int n = 400;
  for (int i = 0; i < n; ++i) {
    const Assignment a = sample_trial(s, 7, static_cast<uint64_t>(i));
    ASSERT_EQ(a.size(), 4u);
    const double lr = std::stod(value_of(a, "lr_schedule.base_lr"));
    EXPECT_GE(lr, 1e-4);
    EXPECT_LE(lr, 1e-1);
    log_sum += std::log10(lr);
    const double d = std::stod(value_of(a, "model.dropout"));
    EXPECT_GE(d, 0);
    EXPECT_LT(d, 0.5);
    ints.insert(value_of(a, "model.conv_size"));
    batches.insert(value_of(a, "data.batch_size"));
  }
  // Log-uniform: the mean exponent is the middle of [-4, -1], not near -1 as uniform would be.
  EXPECT_NEAR(log_sum / n, -2.5, 0.2);
  EXPECT_EQ(ints, (std::set<std::string>{"4", "5", "6"}));
  EXPECT_EQ(batches, (std::set<std::string>{"2", "4", "8"}));
}

TEST(SearchSpace, TheSameSeedAndIndexGiveTheSameTrialAndOtherSeedsOthers) {
  const SearchSpace s = space_of("  model.dropout: {uniform: [0, 0.5]}\n");
  EXPECT_EQ(sample_trial(s, 3, 5), sample_trial(s, 3, 5));
  EXPECT_NE(sample_trial(s, 3, 5), sample_trial(s, 4, 5));
  EXPECT_NE(sample_trial(s, 3, 5), sample_trial(s, 3, 6));
}

TEST(SearchSpace, AConditionalParameterIsSetOnlyWhenItsConditionHolds) {
  const SearchSpace s = space_of(
      "  optimizer.name: {choice: [SGD, LARC]}\n"
      "  optimizer.larc_mode: {choice: [clip, scale], when: {optimizer.name: LARC}}\n");
  int larc = 0;
  for (uint64_t i = 0; i < 64; ++i) {
    const Assignment a = sample_trial(s, 1, i);
    const bool is_larc = value_of(a, "optimizer.name") == "LARC";
    larc += is_larc;
    EXPECT_EQ(value_of(a, "optimizer.larc_mode").empty(), !is_larc);
  }
  EXPECT_GT(larc, 0);
  EXPECT_LT(larc, 64);
  // The grid has SGD once (larc_mode unset) and LARC with each mode.
  const std::vector<Assignment> g = grid_trials(s);
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0], (Assignment{{"optimizer.name", "SGD"}}));
  EXPECT_EQ(g[1], (Assignment{{"optimizer.name", "LARC"}, {"optimizer.larc_mode", "clip"}}));
  EXPECT_EQ(g[2], (Assignment{{"optimizer.name", "LARC"}, {"optimizer.larc_mode", "scale"}}));
}

TEST(SearchSpace, AGridIsEveryCombinationFirstParameterSlowest) {
  const SearchSpace s = space_of(
      "  data.batch_size: {choice: [2, 4]}\n"
      "  data.seed: {grid: [0, 1, 2]}\n");
  const std::vector<Assignment> g = grid_trials(s);
  ASSERT_EQ(g.size(), 6u);
  EXPECT_EQ(g[1], (Assignment{{"data.batch_size", "2"}, {"data.seed", "1"}}));
  EXPECT_EQ(g[3], (Assignment{{"data.batch_size", "4"}, {"data.seed", "0"}}));
  try {
    grid_trials(space_of("  model.dropout: {uniform: [0, 0.5]}\n"));
    FAIL() << "a grid over a continuous range";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("model.dropout"), std::string::npos) << e.what();
  }
}

// 30 two-value lists are 2^30 grid points: refused when the grid passes 100,000 (at the 17th
// parameter), naming it, instead of exhausting memory while enumerating (found by reading, next
// to the fuzz_search_space campaign).
TEST(SearchSpace, AGridOfMoreThanAHundredThousandPointsIsRefusedBeforeItIsBuilt) {
  std::string params;
  for (int i = 0; i < 30; ++i) params += "  model.p" + std::to_string(i) + ": {grid: [0, 1]}\n";
  try {
    grid_trials(space_of(params));
    FAIL() << "a grid of 2^30 points";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_NE(std::string(e.what()).find("space.yaml: parameters.model.p16: the grid has more than "
                                         "100000 points"),
              std::string::npos)
        << e.what();
  }
}

TEST(SearchSpace, MalformedEntriesAreRefusedNamingTheFileLineAndKey) {
  std::string m = parse_error("  model.dropout: {uniform: [0.5, 0.1]}\n");
  EXPECT_NE(m.find("space.yaml:2: parameters.model.dropout"), std::string::npos) << m;
  EXPECT_NE(m.find("low 0.5 > high 0.1"), std::string::npos) << m;
  m = parse_error("  lr_schedule.base_lr: {loguniform: [0, 0.1]}\n");
  EXPECT_NE(m.find("parameters.lr_schedule.base_lr: loguniform bounds must be > 0"),
            std::string::npos)
      << m;
  m = parse_error("  data.batch_size: {choice: []}\n");
  EXPECT_NE(m.find("parameters.data.batch_size: choice takes a non-empty list"), std::string::npos)
      << m;
  m = parse_error("  data.batch_size: {normal: [1, 2]}\n");
  EXPECT_NE(m.find("unknown sampler 'normal'"), std::string::npos) << m;
  m = parse_error("  model.conv_size: {randint: [2.5, 8]}\n");
  EXPECT_NE(m.find("bounds must be integers"), std::string::npos) << m;
  m = parse_error("  optimizer.larc_mode: {choice: [clip], when: {optimizer.name: LARC}}\n");
  EXPECT_NE(m.find("when: optimizer.name is not a parameter declared above"), std::string::npos)
      << m;
}

TEST(SearchSpace, KeysAndValuesAreCheckedAgainstTheConfigSchema) {
  const auto refused = [](const std::string& params) {
    try {
      check_space_against_config(space_of(params), kDemo, {});
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 2);
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(
      refused("  model.dropout: {uniform: [0, 0.5]}\n"
              "  optimizer.name: {choice: [SGD, LARC]}\n"
              "  optimizer.larc_base: {choice: [SGD], when: {optimizer.name: LARC}}\n"
              "  optimizer.larc_mode: {choice: [clip, scale], when: {optimizer.name: LARC}}\n"),
      "accepted");
  // Keys are checked together, as the schema checks them: LARC without its base optimizer.
  std::string m = refused("  optimizer.name: {choice: [SGD, LARC]}\n");
  EXPECT_NE(m.find("parameters.optimizer.name: the value LARC"), std::string::npos) << m;
  EXPECT_NE(m.find("optimizer.larc_base"), std::string::npos) << m;
  m = refused(
      "  lr_schedule.base_lr: {loguniform: [1e-4, 1e-1]}\n"
      "  model.dropuot: {uniform: [0, 0.5]}\n");
  EXPECT_NE(m.find("space.yaml:3: parameters.model.dropuot"), std::string::npos)
      << "the parameter the schema refuses is named, not the one probed: " << m;
  m = refused("  model.dropuot: {uniform: [0, 0.5]}\n");
  EXPECT_NE(m.find("space.yaml:2: parameters.model.dropuot"), std::string::npos) << m;
  EXPECT_NE(m.find("dropuot"), m.rfind("dropuot"))
      << "the loader's own message names it too: " << m;
  m = refused("  data.batch_size: {choice: [2, -4]}\n");
  EXPECT_NE(m.find("parameters.data.batch_size: the value -4"), std::string::npos) << m;
  m = refused("  model.dropout: {uniform: [0, 1.5]}\n");
  EXPECT_NE(m.find("the value 1.5"), std::string::npos) << m;
}

}  // namespace
}  // namespace crest

namespace crest {
namespace {

// The space the README's search example names is shipped, and every parameter in it is one the
// demo config accepts.
TEST(SearchSpace, TheShippedDemoSpaceFitsTheDemoConfig) {
  const std::string path = std::string(CREST_SOURCE_DIR) + "/configs/cosmoflow-demo-space.yaml";
  const SearchSpace space = load_search_space(path);
  EXPECT_EQ(space.parameters.size(), 2u);
  EXPECT_NO_THROW(check_space_against_config(space, kDemo, {}));
  EXPECT_NE(test::read_text(std::string(CREST_SOURCE_DIR) + "/README.md")
                .find("--space configs/cosmoflow-demo-space.yaml"),
            std::string::npos);
}

}  // namespace
}  // namespace crest
