// MLPerf log lines: the JSON spelling (numbers, escaping, key order, non-finite values), the line
// layout of mlperf-logging's mllog.py, the writer (each line on disk at once, an old log moved
// aside and never replaced, append, failures naming the file) and the MLPerf observer's events on
// a fake run driven through its RunObserver hooks. tests/interop/mllog_interop.py runs the
// official compliance checker on the log of a real training run.
#include "crest/train/mllog.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/train/config.hpp"
#include "crest/train/observers.hpp"
#include "crest/train/trainer.hpp"
#include "support/file_size_limit.hpp"
#include "support/test_util.hpp"
#include "unit/data_formats_test_util.hpp"

namespace crest {
namespace {

using crest::test::FileSizeLimit;

using test::expect_input_error;
using test::ScratchDir;

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  return lines;
}

// Strict JSON (nlohmann rejects NaN tokens, trailing text, bad escapes) of one :::MLLOG line.
nlohmann::json parse_line(const std::string& line) {
  const std::string token = ":::MLLOG ";
  EXPECT_EQ(line.rfind(token, 0), 0u) << line;
  return nlohmann::json::parse(line.substr(token.size()));
}

TEST(MllogJson, IntegersStayIntegersAndDoublesRoundTrip) {
  EXPECT_EQ(mllog_json(0), "0");
  EXPECT_EQ(mllog_json(-7), "-7");
  EXPECT_EQ(mllog_json(int64_t{9007199254740993}), "9007199254740993");  // beyond double's 2^53
  EXPECT_EQ(mllog_json(uint64_t{18446744073709551615u}), "18446744073709551615");
  // Python writes a float that happens to be whole as 3.0, and reads it back as a float.
  EXPECT_EQ(mllog_json(3.0), "3.0");
  EXPECT_EQ(mllog_json(-0.0), "-0.0");
  EXPECT_EQ(mllog_json(0.1), "0.1");
  EXPECT_EQ(mllog_json(0.124), "0.124");
  EXPECT_EQ(mllog_json(1e-05), "1e-05");
  EXPECT_EQ(mllog_json(1e16), "1e+16");
  // repr(float)'s switch between fixed and scientific notation (exponents -4..15 are fixed).
  EXPECT_EQ(mllog_json(0.0001), "0.0001");
  EXPECT_EQ(mllog_json(0.00012), "0.00012");
  EXPECT_EQ(mllog_json(1.5e-7), "1.5e-07");
  EXPECT_EQ(mllog_json(1e15), "1000000000000000.0");
  EXPECT_EQ(mllog_json(1234567890123456.7), "1234567890123456.8");
  EXPECT_EQ(mllog_json(12345678901234567.0), "1.2345678901234568e+16");
  EXPECT_EQ(mllog_json(123456.789), "123456.789");
  EXPECT_EQ(mllog_json(-2.5e-300), "-2.5e-300");
  EXPECT_EQ(mllog_json(std::numeric_limits<double>::max()), "1.7976931348623157e+308");
  EXPECT_EQ(mllog_json(std::numeric_limits<double>::denorm_min()), "5e-324");
  EXPECT_EQ(mllog_json(0.0), "0.0");
  // The shortest text that reads back to the very same double (17 digits where needed).
  for (double v :
       {0.1 + 0.2, 1.0 / 3.0, 0.12399999999999999, std::numeric_limits<double>::denorm_min(),
        std::numeric_limits<double>::max(), 123456.789e-300}) {
    const std::string text = mllog_json(v);
    EXPECT_EQ(nlohmann::json::parse(text).get<double>(), v) << text;
  }
  EXPECT_EQ(mllog_json(0.1 + 0.2), "0.30000000000000004");
  EXPECT_EQ(mllog_json(true), "true");
  EXPECT_EQ(mllog_json(false), "false");
  EXPECT_EQ(mllog_json(nullptr), "null");
}

TEST(MllogJson, NonFiniteNumbersBecomeNullSoTheLineStaysJson) {
  EXPECT_EQ(mllog_json(std::numeric_limits<double>::quiet_NaN()), "null");
  EXPECT_EQ(mllog_json(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(mllog_json(-std::numeric_limits<double>::infinity()), "null");
  const MllogValue list = {1.5, std::nan(""), 2};
  EXPECT_EQ(mllog_json(list), "[1.5, null, 2]");
  EXPECT_TRUE(nlohmann::json::parse(mllog_json(list))[1].is_null());
}

TEST(MllogJson, StringsAreEscapedLikePythonEnsureAscii) {
  EXPECT_EQ(mllog_json(""), R"("")");
  EXPECT_EQ(mllog_json("plain /path/x.cpp"), R"("plain /path/x.cpp")");  // '/' is not escaped
  EXPECT_EQ(mllog_json("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(mllog_json("\n\r\t\b\f"), R"("\n\r\t\b\f")");
  EXPECT_EQ(mllog_json(std::string("\x01\x1f", 2)), R"("\u0001\u001f")");
  EXPECT_EQ(mllog_json(std::string("nul\0x", 5)), R"("nul\u0000x")");
  EXPECT_EQ(mllog_json("\x7f"), "\"\x7f\"");               // DEL is ASCII: Python leaves it raw
  EXPECT_EQ(mllog_json("caf\xc3\xa9"), R"("caf\u00e9")");  // é, 2 bytes
  EXPECT_EQ(mllog_json("\xe2\x82\xac"), R"("\u20ac")");    // €, 3 bytes
  EXPECT_EQ(mllog_json("\xf0\x9f\x98\x80"), R"("\ud83d\ude00")");  // 😀: a surrogate pair
  // Bytes that are not UTF-8 (a Latin-1 file name, a cut sequence, an overlong '/', an encoded
  // surrogate) each become U+FFFD instead of invalid output.
  EXPECT_EQ(mllog_json("caf\xe9"), R"("caf\ufffd")");
  EXPECT_EQ(mllog_json("\xe2\x82"), R"("\ufffd\ufffd")");
  EXPECT_EQ(mllog_json("\xc0\xaf"), R"("\ufffd\ufffd")");
  EXPECT_EQ(mllog_json("\xed\xa0\x80"), R"("\ufffd\ufffd\ufffd")");
  // Every output is ASCII JSON that decodes to the text (the checker reads files as Latin-1).
  const std::string text = "t\xc3\xa9st \xf0\x9f\x98\x80 \"q\" \\";
  const std::string out = mllog_json(text);
  for (char c : out) EXPECT_LT(static_cast<unsigned char>(c), 0x80) << out;
  EXPECT_EQ(nlohmann::json::parse(out).get<std::string>(), text);
}

TEST(MllogJson, ContainersUsePythonSeparatorsAndKeepKeyOrder) {
  MllogValue obj = MllogValue::object();
  obj["zeta"] = 1;
  obj["alpha"] = MllogValue::array({32, 64});
  obj["mid"] = MllogValue::object();
  EXPECT_EQ(mllog_json(obj), R"({"zeta": 1, "alpha": [32, 64], "mid": {}})");
  EXPECT_EQ(mllog_json(MllogValue::array()), "[]");
  EXPECT_EQ(mllog_json(MllogValue{{"k\"ey", "v"}}), R"({"k\"ey": "v"})");
}

TEST(MllogLine, HasTheLayoutOfMllogPy) {
  const auto where = std::source_location::current();
  const std::string line = mllog_line(1700000000123, MllogEventType::point_in_time, "eval_error",
                                      0.5, {{"epoch_num", 3}}, where);
  EXPECT_EQ(line,
            ":::MLLOG {\"namespace\": \"\", \"time_ms\": 1700000000123, \"event_type\": "
            "\"POINT_IN_TIME\", "
            "\"key\": \"eval_error\", \"value\": 0.5, \"metadata\": {\"file\": "
            "\"tests/unit/mllog_test.cpp\", "
            "\"lineno\": " +
                std::to_string(where.line()) + ", \"epoch_num\": 3}}");
  const auto j = parse_line(
      mllog_line(5, MllogEventType::interval_start, "init_start", nullptr, nullptr, where));
  EXPECT_EQ(j["event_type"], "INTERVAL_START");
  EXPECT_TRUE(j["value"].is_null());
  EXPECT_EQ(j["metadata"].size(), 2u);  // file and lineno only
  EXPECT_EQ(
      parse_line(mllog_line(5, MllogEventType::interval_end, "x", 1, nullptr, where))["event_type"],
      "INTERVAL_END");
}

TEST(MllogLine, MetadataMayNotOverrideTheCallSite) {
  const auto where = std::source_location::current();
  try {
    (void)mllog_line(1, MllogEventType::point_in_time, "k", 1, {{"lineno", 3}}, where);
    ADD_FAILURE() << "expected an internal error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::runtime);
    EXPECT_NE(std::string(e.what()).find("'lineno'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(
      (void)mllog_line(1, MllogEventType::point_in_time, "k", 1, MllogValue::array({1}), where),
      Error);
}

TEST(MllogLine, SourceFileIsRelativeToTheRepository) {
  EXPECT_EQ(mllog_source_file("/work/main/src/train/mlperf_observer.cpp"),
            "src/train/mlperf_observer.cpp");
  EXPECT_EQ(mllog_source_file("/home/u/src/crest/tests/unit/mllog_test.cpp"),
            "tests/unit/mllog_test.cpp");
  EXPECT_EQ(mllog_source_file("/x/include/crest/train/mllog.hpp"), "include/crest/train/mllog.hpp");
  EXPECT_EQ(mllog_source_file("elsewhere.cpp"), "elsewhere.cpp");
}

TEST(MllogLine, TimeIsMillisecondsSinceTheUnixEpoch) {
  const int64_t now = mllog_now_ms();
  EXPECT_GT(now, int64_t{1577836800000});  // after 2020-01-01: milliseconds, not seconds
  EXPECT_LT(now, int64_t{4102444800000});  // before 2100
}

TEST(MllogWriter, EveryLineIsInTheFileAsSoonAsItIsLogged) {
  ScratchDir dir;
  std::ostringstream echo;
  MllogWriter w(dir.file("run/mllog.txt"), {.echo = &echo});  // creates run/
  w.start("init_start");
  // Read while the writer is still open: nothing waits in a buffer.
  EXPECT_EQ(lines_of(read_text(w.path())).size(), 1u);
  const int line_of_event = __LINE__ + 1;
  w.event("eval_error", 0.25, {{"epoch_num", 2}});
  const auto lines = lines_of(read_text(w.path()));
  ASSERT_EQ(lines.size(), 2u);
  const auto j = parse_line(lines[1]);
  EXPECT_EQ(j["key"], "eval_error");
  EXPECT_EQ(j["value"].get<double>(), 0.25);
  EXPECT_EQ(j["metadata"]["file"], "tests/unit/mllog_test.cpp");  // the caller, not mllog.cpp
  EXPECT_EQ(j["metadata"]["lineno"], line_of_event);
  EXPECT_EQ(j["metadata"]["epoch_num"], 2);
  EXPECT_EQ(echo.str(), read_text(w.path()));
  EXPECT_TRUE(w.moved_previous_to().empty());
}

TEST(MllogWriter, AFreshLogMovesThePreviousOneAsideAndAppendAddsToIt) {
  ScratchDir dir;
  const std::string path = dir.file("mllog.txt");
  { MllogWriter(path, {}).event("submission_org", "first"); }
  {
    MllogWriter w(path, {});
    EXPECT_EQ(w.moved_previous_to(), dir.file("mllog.1.txt"));
    w.event("submission_org", "second");
  }
  std::filesystem::create_directory(dir.file("mllog.2.txt"));  // a name in the way is skipped
  {
    MllogWriter w(path, {});
    EXPECT_EQ(w.moved_previous_to(), dir.file("mllog.3.txt"));
    w.event("submission_org", "third");
  }
  EXPECT_EQ(parse_line(read_text(dir.file("mllog.1.txt")))["value"], "first");
  EXPECT_EQ(parse_line(read_text(dir.file("mllog.3.txt")))["value"], "second");
  EXPECT_EQ(lines_of(read_text(path)).size(), 1u);
  {
    MllogWriter w(path, {.append = true});
    EXPECT_TRUE(w.moved_previous_to().empty());
    w.event("submission_org", "resumed");
  }
  const auto lines = lines_of(read_text(path));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(parse_line(lines[0])["value"], "third");
  EXPECT_EQ(parse_line(lines[1])["value"], "resumed");
}

TEST(MllogWriter, UnwritableDirectoryThrowsNamingThePath) {
  ScratchDir dir;
  // A regular file where the directory should be: fails for root too, unlike permissions.
  test::write_file_bytes(dir.file("plain"), test::bytes_of("not a directory"));
  const std::string under_file = dir.file("plain") + "/run/mllog.txt";
  expect_input_error([&] { MllogWriter w(under_file, {}); },
                     {dir.file("plain") + "/run", "MLPerf log"});
  // The log's own name taken by a directory that cannot be moved aside is not the case here
  // (directories move too); a file inside a read-only directory is, for non-root users.
  if (::geteuid() != 0) {
    const std::string ro = dir.file("ro");
    std::filesystem::create_directory(ro);
    std::filesystem::permissions(
        ro, std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
    expect_input_error([&] { MllogWriter w(ro + "/mllog.txt", {}); },
                       {ro + "/mllog.txt", "cannot create"});
    std::filesystem::permissions(ro, std::filesystem::perms::owner_all);
  }
}

TEST(MllogWriter, WriteFailureThrowsNamingTheFileAndStopsTheLog) {
  ScratchDir dir;
  MllogWriter w(dir.file("mllog.txt"), {});
  w.start("init_start");
  const auto size = std::filesystem::file_size(w.path());
  {
    FileSizeLimit limit(size + 20);  // not room for another line
    ASSERT_TRUE(limit.ok());
    expect_input_error([&] { w.end("init_stop"); }, {w.path(), "cannot write the MLPerf log"});
  }
  // No line after a gap: the writer stays failed and says so.
  expect_input_error([&] { w.start("run_start"); }, {w.path(), "earlier write"});
}

// ---- The observer on a fake run -------------------------------------------------------------

Config demo_config(const std::vector<std::string>& overrides) {
  return load_config(test::source_path("configs/cosmoflow-demo.yaml"), overrides);
}

RunFacts facts_of(const Config& config) {
  RunFacts f;
  f.config = &config;
  f.ranks = 4;
  f.local_ranks = 2;
  f.nodes = 2;
  f.backend = "onednn";
  f.global_batch = config.data.batch_size * 4;
  f.train_samples = 64;
  f.eval_samples = 16;
  f.steps_per_epoch = 4;
  return f;
}

EpochStats epoch_stats(int epoch, double val_mae) {
  EpochStats st;
  st.epoch = epoch;
  st.validated = true;
  st.val_metrics = {{"mae", val_mae}};
  st.val_loss = val_mae * val_mae;
  return st;
}

// Runs the observer through `epochs` the way the trainer calls it (with staging) and returns the
// log's lines, parsed.
std::vector<nlohmann::json> fake_run_epochs(const Config& config,
                                            const std::vector<EpochStats>& epochs,
                                            std::string* printed = nullptr, bool echo = false) {
  ScratchDir dir;
  const std::string path = dir.file("out/mllog.txt");
  std::ostringstream log;
  {
    MlperfObserverOptions options = mlperf_options(config, make_task(config), false);
    options.echo = echo;
    auto obs = make_mlperf_observer(path, log, options);
    const RunFacts facts = facts_of(config);
    obs->init_start(config);
    obs->staging_start();
    obs->staging_stop(2.5);
    obs->init_stop(facts);
    obs->run_start(facts);
    TrainSummary summary;
    for (const EpochStats& st : epochs) {
      obs->epoch_start(st.epoch);
      obs->step_end(StepInfo{});
      obs->eval_start(st);
      obs->eval_stop(st);
      summary.epochs.push_back(st);
      obs->epoch_stop(summary.epochs.back());
    }
    obs->run_stop(summary);
  }
  if (printed) *printed = log.str();
  std::vector<nlohmann::json> out;
  for (const auto& l : lines_of(read_text(path))) out.push_back(parse_line(l));
  return out;
}

// `maes.size()` CosmoFlow epochs with these validation MAEs.
std::vector<nlohmann::json> fake_run(const Config& config, const std::vector<double>& maes,
                                     std::string* printed = nullptr, bool echo = false) {
  std::vector<EpochStats> epochs;
  for (size_t i = 0; i < maes.size(); ++i)
    epochs.push_back(epoch_stats(static_cast<int>(i) + 1, maes[i]));
  return fake_run_epochs(config, epochs, printed, echo);
}

std::vector<std::string> keys_of(const std::vector<nlohmann::json>& lines) {
  std::vector<std::string> keys;
  for (const auto& j : lines) keys.push_back(j["key"]);
  return keys;
}

const nlohmann::json& only(const std::vector<nlohmann::json>& lines, const std::string& key) {
  const nlohmann::json* found = nullptr;
  for (const auto& j : lines)
    if (j["key"] == key) {
      EXPECT_EQ(found, nullptr) << "more than one " << key;
      found = &j;
    }
  if (!found) throw std::runtime_error("no " + key + " line");
  return *found;
}

TEST(MlperfObserver, LogsTheCheckersEventsInOrder) {
  const Config config = demo_config(
      {"mlperf.org=ACME", "mlperf.division=closed", "mlperf.status=onprem", "mlperf.platform=2xCPU",
       "train.target_mae=0.124", "model.l2=0.01", "lr_schedule.decay_schedule={2: 0.5, 8: 0.25}"});
  std::string printed;
  const auto lines = fake_run(config, {0.3, 0.1}, &printed);
  const std::vector<std::string> expected = {"cache_clear",
                                             "init_start",
                                             "submission_benchmark",
                                             "submission_org",
                                             "submission_division",
                                             "submission_status",
                                             "submission_platform",
                                             "staging_start",
                                             "staging_stop",
                                             "number_of_nodes",
                                             "accelerators_per_node",
                                             "seed",
                                             "global_batch_size",
                                             "train_samples",
                                             "eval_samples",
                                             "gradient_accumulation_steps",
                                             "opt_name",
                                             "opt_base_learning_rate",
                                             "opt_learning_rate_warmup_epochs",
                                             "opt_learning_rate_warmup_factor",
                                             "opt_learning_rate_decay_boundary_epochs",
                                             "opt_learning_rate_decay_factor",
                                             "dropout",
                                             "opt_weight_decay",
                                             "init_stop",
                                             "run_start",
                                             "epoch_start",
                                             "eval_start",
                                             "eval_stop",
                                             "epoch_stop",
                                             "eval_error",
                                             "epoch_start",
                                             "eval_start",
                                             "eval_stop",
                                             "epoch_stop",
                                             "eval_error",
                                             "run_stop"};
  EXPECT_EQ(keys_of(lines), expected);
  // Interval kinds as mllog's start/end/event.
  for (const auto& j : lines) {
    const std::string key = j["key"], type = j["event_type"];
    const bool starts = key.ends_with("_start"), stops = key.ends_with("_stop");
    EXPECT_EQ(type, starts ? "INTERVAL_START" : stops ? "INTERVAL_END" : "POINT_IN_TIME") << key;
    EXPECT_EQ(j["namespace"], "");
    EXPECT_TRUE(j["time_ms"].is_number_integer());
    EXPECT_EQ(j["metadata"]["file"], "src/train/mlperf_observer.cpp");
    EXPECT_GT(j["metadata"]["lineno"].get<int>(), 0);
  }
  // Times never go backwards.
  for (size_t i = 1; i < lines.size(); ++i) EXPECT_GE(lines[i]["time_ms"], lines[i - 1]["time_ms"]);
  EXPECT_EQ(only(lines, "submission_benchmark")["value"], "cosmoflow");
  EXPECT_EQ(only(lines, "submission_org")["value"], "ACME");
  EXPECT_EQ(only(lines, "submission_division")["value"], "closed");
  EXPECT_EQ(only(lines, "submission_status")["value"], "onprem");
  EXPECT_EQ(only(lines, "submission_platform")["value"], "2xCPU");
  EXPECT_EQ(only(lines, "staging_stop")["metadata"]["staging_duration_s"], 2.5);
  EXPECT_EQ(only(lines, "number_of_nodes")["value"], 2);
  EXPECT_EQ(only(lines, "accelerators_per_node")["value"], 0);  // CPU backend
  EXPECT_EQ(only(lines, "global_batch_size")["value"], 16);
  EXPECT_EQ(only(lines, "train_samples")["value"], 64);
  EXPECT_EQ(only(lines, "eval_samples")["value"], 16);
  EXPECT_EQ(only(lines, "opt_name")["value"], "sgd");
  // The demo: base_lr 0.01, linear scaling from base batch 4, global batch 16: peak 0.04, x4.
  EXPECT_DOUBLE_EQ(only(lines, "opt_base_learning_rate")["value"].get<double>(), 0.04);
  EXPECT_DOUBLE_EQ(only(lines, "opt_learning_rate_warmup_factor")["value"].get<double>(), 4.0);
  EXPECT_EQ(only(lines, "opt_learning_rate_warmup_epochs")["value"], 1);
  EXPECT_EQ(only(lines, "opt_learning_rate_decay_boundary_epochs")["value"],
            nlohmann::json::array({2, 8}));
  EXPECT_EQ(only(lines, "opt_learning_rate_decay_factor")["value"],
            nlohmann::json::array({0.5, 0.25}));
  EXPECT_EQ(only(lines, "dropout")["value"], 0.5);
  EXPECT_EQ(only(lines, "opt_weight_decay")["value"], 0.01);
  // Epoch numbers on every epoch and eval event; eval_error is the epoch's val_mae, exactly.
  std::vector<double> errors;
  for (const auto& j : lines) {
    const std::string key = j["key"];
    if (key == "epoch_start" || key == "epoch_stop" || key == "eval_start" || key == "eval_stop" ||
        key == "eval_error") {
      EXPECT_TRUE(j["metadata"].contains("epoch_num")) << j;
    }
    if (j["key"] == "eval_error") errors.push_back(j["value"]);
  }
  EXPECT_EQ(errors, (std::vector<double>{0.3, 0.1}));
  const auto& stop = only(lines, "run_stop");
  EXPECT_EQ(stop["metadata"]["status"], "success");  // 0.1 <= 0.124 in the last epoch
  EXPECT_EQ(stop["metadata"]["epoch_num"], 2);
  // Not echoed unless asked; the path is printed.
  EXPECT_EQ(printed.find(":::MLLOG"), std::string::npos) << printed;
  EXPECT_NE(printed.find("mllog.txt"), std::string::npos) << printed;
}

TEST(MlperfObserver, StatusIsSuccessOnlyWhenTheTargetWasReached) {
  EXPECT_EQ(only(fake_run(demo_config({"train.target_mae=0.124"}), {0.3, 0.2}),
                 "run_stop")["metadata"]["status"],
            "aborted");
  // Without a target the trainer calls a finished run a success; MLPerf does not.
  EXPECT_EQ(only(fake_run(demo_config({}), {0.3, 0.1}), "run_stop")["metadata"]["status"],
            "aborted");
  // Exactly on the target counts (<=), as in the trainer's stop and the checker's rule.
  EXPECT_EQ(only(fake_run(demo_config({"train.target_mae=0.125"}), {0.125}),
                 "run_stop")["metadata"]["status"],
            "success");
}

TEST(MlperfObserver, DefaultsPassTheCheckersValueRules) {
  const auto lines = fake_run(demo_config({}), {0.3});
  EXPECT_EQ(only(lines, "submission_org")["value"], "UNDEFINED");
  EXPECT_EQ(only(lines, "submission_platform")["value"], "UNDEFINED");
  EXPECT_EQ(only(lines, "submission_division")["value"], "closed");
  EXPECT_EQ(only(lines, "submission_status")["value"], "research");
}

TEST(MlperfObserver, EchoesEveryLineWhenAsked) {
  std::string printed;
  const auto lines = fake_run(demo_config({"mlperf.stdout=true"}), {0.3}, &printed, true);
  size_t echoed = 0;
  for (const auto& l : lines_of(printed))
    if (l.rfind(":::MLLOG ", 0) == 0) ++echoed;
  EXPECT_EQ(echoed, lines.size());
}

TEST(MlperfObserver, AResumedRunAppendsAndSaysWhereItContinues) {
  const Config config = demo_config({});
  ScratchDir dir;
  const std::string path = dir.file("mllog.txt");
  std::ostringstream log;
  { MllogWriter(path, {}).event("submission_org", "interrupted run"); }
  {
    auto obs = make_mlperf_observer(path, log, mlperf_options(config, make_task(config), true));
    RunFacts facts = facts_of(config);
    facts.first_epoch = 2;  // epochs 1 and 2 done
    facts.first_step = 8;
    obs->init_start(config);
    obs->init_stop(facts);
    obs->run_start(facts);
    obs->run_stop(TrainSummary{});
  }
  std::vector<nlohmann::json> lines;
  for (const auto& l : lines_of(read_text(path))) lines.push_back(parse_line(l));
  const auto& resumed = only(lines, "crest_resumed");
  EXPECT_EQ(resumed["metadata"]["epoch_num"], 3);
  EXPECT_EQ(resumed["metadata"]["global_step"], 8);
  EXPECT_EQ(lines.front()["value"], "interrupted run");  // the earlier part stays first
  EXPECT_FALSE(std::filesystem::exists(dir.file("mllog.1.txt")));
}

TEST(MlperfObserver, StdoutKeyIsParsedRoundTripsAndIsChecked) {
  EXPECT_FALSE(demo_config({}).mlperf.echo_stdout);
  const Config on = demo_config({"mlperf.stdout=true"});
  EXPECT_TRUE(on.mlperf.echo_stdout);
  EXPECT_NE(on.resolved_yaml.find("  stdout: true"), std::string::npos) << on.resolved_yaml;
  EXPECT_TRUE(load_config_text(on.resolved_yaml, "<resolved>").mlperf.echo_stdout);
  try {
    (void)demo_config({"mlperf.stdout=maybe"});
    ADD_FAILURE() << "mlperf.stdout=maybe accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("mlperf.stdout"), std::string::npos) << e.what();
  }
}

TEST(MlperfObserver, ARunEndingInAnErrorStillLogsAnAbortedRunStop) {
  const Config config = demo_config({"train.target_mae=0.124"});
  ScratchDir dir;
  const std::string path = dir.file("mllog.txt");
  std::ostringstream log;
  {
    auto obs = make_mlperf_observer(path, log);
    const RunFacts facts = facts_of(config);
    obs->init_start(config);
    obs->init_stop(facts);
    obs->run_start(facts);
    obs->epoch_start(1);
    // The trainer throws here; unwinding destroys the observer.
  }
  const auto lines = lines_of(read_text(path));
  ASSERT_FALSE(lines.empty());
  const auto last = parse_line(lines.back());
  EXPECT_EQ(last["key"], "run_stop");
  EXPECT_EQ(last["metadata"]["status"], "aborted");
  EXPECT_EQ(last["metadata"]["epoch_num"], 1);
}

// ---- DeepCAM's epoch figures and run_stop (deepcam/src/deepCam/driver/*.py, train.py) --------

Config deepcam_config(const std::vector<std::string>& overrides) {
  return load_config(test::source_path("configs/deepcam-demo.yaml"), overrides);
}

// A DeepCAM epoch whose figures all differ, so a figure logged in the wrong place shows.
EpochStats deepcam_epoch(int epoch, double train_iou, double val_iou) {
  EpochStats st;
  st.epoch = epoch;
  st.lr = 0.001 * epoch;
  st.train_loss = 7.0 * epoch;  // the epoch's mean: not what the reference logs
  st.last_batch_loss = 0.5 * epoch;
  st.last_batch_metrics = {{"iou", train_iou}};
  st.validated = true;
  st.val_loss = 0.25 * epoch;
  st.val_metrics = {{"iou", val_iou}};
  return st;
}

std::vector<double> values_of(const std::vector<nlohmann::json>& lines, const std::string& key) {
  std::vector<double> v;
  for (const auto& j : lines)
    if (j["key"] == key) v.push_back(j["value"].get<double>());
  return v;
}

TEST(MlperfObserver, DeepcamLogsTheReferencesEpochFiguresInItsOrder) {
  const Config config =
      deepcam_config({"train.target_iou=0.82", "train.gradient_accumulation_frequency=2"});
  const auto lines =
      fake_run_epochs(config, {deepcam_epoch(1, 0.5, 0.6), deepcam_epoch(2, 0.8, 0.85)});
  std::vector<std::string> keys = keys_of(lines);
  keys.erase(keys.begin(), std::find(keys.begin(), keys.end(), "epoch_start"));
  const std::vector<std::string> epoch = {"epoch_start", "learning_rate", "train_accuracy",
                                          "train_loss",  "eval_start",    "eval_accuracy",
                                          "eval_loss"};
  std::vector<std::string> expected = epoch;
  expected.insert(expected.end(), {"eval_stop", "epoch_stop"});
  expected.insert(expected.end(), epoch.begin(), epoch.end());
  expected.insert(expected.end(),
                  {"target_accuracy_reached", "eval_stop", "epoch_stop", "run_stop"});
  EXPECT_EQ(keys, expected);
  EXPECT_EQ(values_of(lines, "learning_rate"), (std::vector<double>{0.001, 0.002}));
  // The last micro-batch's IoU and its loss divided by the accumulation (k = 2), as the
  // reference's criterion(outputs, label) / gradient_accumulation_frequency.
  EXPECT_EQ(values_of(lines, "train_accuracy"), (std::vector<double>{0.5, 0.8}));
  EXPECT_EQ(values_of(lines, "train_loss"), (std::vector<double>{0.25, 0.5}));
  EXPECT_EQ(values_of(lines, "eval_accuracy"), (std::vector<double>{0.6, 0.85}));
  EXPECT_EQ(values_of(lines, "eval_loss"), (std::vector<double>{0.25, 0.5}));
  EXPECT_EQ(values_of(lines, "target_accuracy_reached"), (std::vector<double>{0.82}));
  for (const auto& j : lines) {
    if (j["key"] == "train_loss" || j["key"] == "eval_accuracy") {
      EXPECT_TRUE(j["metadata"].contains("epoch_num")) << j;
    }
  }
  EXPECT_EQ(only(lines, "run_stop")["metadata"]["status"], "success");
}

TEST(MlperfObserver, DeepcamEndsSuccessWhenTheEpochsRunOutAsItsReferenceDoes) {
  // train.py's only run_stop says "success", target reached or not; CosmoFlow's log stays
  // "aborted" then (StatusIsSuccessOnlyWhenTheTargetWasReached).
  const auto lines = fake_run_epochs(deepcam_config({"train.target_iou=0.82"}),
                                     {deepcam_epoch(1, 0.5, 0.6), deepcam_epoch(2, 0.6, 0.7)});
  EXPECT_TRUE(values_of(lines, "target_accuracy_reached").empty());
  const auto& stop = only(lines, "run_stop");
  EXPECT_EQ(stop["metadata"]["status"], "success");
  EXPECT_EQ(stop["metadata"]["epoch_num"], 2);
}

TEST(MlperfObserver, DeepcamEpochWithoutValidationStillLogsItsTrainingFigures) {
  EpochStats st = deepcam_epoch(1, 0.5, 0.6);
  st.validated = false;
  st.val_metrics.clear();
  ScratchDir dir;
  std::ostringstream log;
  const Config config = deepcam_config({});
  {
    auto obs = make_mlperf_observer(dir.file("mllog.txt"), log,
                                    mlperf_options(config, make_task(config), false));
    const RunFacts facts = facts_of(config);
    obs->init_start(config);
    obs->init_stop(facts);
    obs->run_start(facts);
    obs->epoch_start(1);
    obs->epoch_stop(st);
    TrainSummary summary;
    summary.epochs.push_back(st);
    obs->run_stop(summary);
  }
  std::vector<nlohmann::json> lines;
  for (const auto& l : lines_of(read_text(dir.file("mllog.txt")))) lines.push_back(parse_line(l));
  std::vector<std::string> keys = keys_of(lines);
  keys.erase(keys.begin(), std::find(keys.begin(), keys.end(), "epoch_start"));
  EXPECT_EQ(keys, (std::vector<std::string>{"epoch_start", "learning_rate", "train_accuracy",
                                            "train_loss", "epoch_stop", "run_stop"}));
  EXPECT_EQ(values_of(lines, "train_loss"), (std::vector<double>{0.5}));  // k = 1
}

TEST(MlperfObserver, UnwritableOutputDirThrowsNamingThePath) {
  ScratchDir dir;
  test::write_file_bytes(dir.file("plain"), test::bytes_of("x"));
  std::ostringstream log;
  expect_input_error([&] { make_mlperf_observer(dir.file("plain") + "/mllog.txt", log); },
                     {dir.file("plain"), "MLPerf log"});
}

}  // namespace
}  // namespace crest
