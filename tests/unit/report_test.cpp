// The performance report (crest/train/report.hpp): per-layer rates from a profile, the JSON
// document (numbers exactly the inputs, null where not finite), the HTML page (hostile names
// escaped, no script or network reference, the edge cases: one epoch, no validation, NaN losses,
// zero-time layers, bench runs without epochs) and writing (atomic, errors name the path).
// tests/interop/report_render.py opens real reports in headless Chromium.
#include "crest/train/report.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "support/file_size_limit.hpp"
#include "support/test_util.hpp"
#include "unit/data_formats_test_util.hpp"

namespace crest {
namespace {

using crest::test::FileSizeLimit;

using nlohmann::json;
using test::expect_input_error;
using test::ScratchDir;

using test::slurp;

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

// The markup of one chart (<svg id="ID" ...> to its </svg>), "" when absent.
std::string chart(const std::string& page, const std::string& id) {
  const size_t start = page.find("<svg id=\"" + id + "\"");
  if (start == std::string::npos) return "";
  return page.substr(start, page.find("</svg>", start) + 6 - start);
}

OpProfile op(const std::string& name, const std::string& kind, double fwd_s, double bwd_s,
             double fwd_flops, double bwd_data_flops, double bwd_weight_flops) {
  OpProfile p;
  p.name = name;
  p.kind = kind;
  p.forward_s = fwd_s;
  p.backward_s = bwd_s;
  p.flops.forward = fwd_flops;
  p.flops.backward_data = bwd_data_flops;
  p.flops.backward_weights = bwd_weight_flops;
  return p;
}

ReportEpoch epoch(int n, double loss, bool validated, double val_loss = kReportNaN,
                  double val_mae = kReportNaN) {
  ReportEpoch e;
  e.epoch = n;
  e.lr = 0.01 * n;
  e.train_loss = loss;
  e.validated = validated;
  e.val_loss = val_loss;
  if (validated) e.val_metrics = {val_mae};  // the run's one metric, mae
  e.seconds = 2.5 * n;
  e.train_seconds = 2.0 * n;
  e.samples_per_s = 100.0 + n;
  e.data_wait_s = 0.25 * n;
  e.allreduce_s = 0.5 * n;
  e.allreduce_exposed_s = 0.125 * n;
  return e;
}

PerformanceReport sample_report() {
  PerformanceReport r;
  r.run.source = "crest train";
  r.run.metrics = {{"mae", "mean absolute error"}};
  r.run.config = "configs/demo.yaml";
  r.run.backend = "onednn";
  r.run.status = "success";
  r.run.ranks = 2;
  r.run.nodes = 1;
  r.run.threads = 3;
  r.run.batch_per_rank = 4;
  r.run.global_batch = 8;
  r.run.parameter_count = 90832;
  r.run.steps_per_epoch = 5;
  r.run.train_samples = 40;
  r.run.eval_samples = 16;
  r.run.train_flops_per_step = 4e9;
  r.run.samples_per_s = 123.25;
  r.run.step_s = 0.0625;
  r.peak = ReportPeak{80.0, "given", "a test figure"};
  r.epochs = {epoch(1, 0.75, true, 0.5, 0.375), epoch(2, 0.5, true, 0.25, 0.3125)};
  r.time = report_time(r.epochs);
  r.profiled_steps = 4;
  r.layers = report_layers(
      {op("conv1", "conv", 0.2, 0.4, 1e9, 1e9, 2e9), op("flatten", "flatten", 0, 0, 0, 0, 0)}, 4,
      r.peak.gflops);
  r.notes = {"a note"};
  r.created = "2026-01-02T03:04:05Z";
  return r;
}

TEST(Report, LayerRowsAreMeansPerStepAndRatesOfTheMeasuredTime) {
  const auto rows = report_layers({op("conv1", "conv", 0.2, 0.4, 1e9, 1e9, 2e9)}, 4, 80.0);
  ASSERT_EQ(rows.size(), 1u);
  const ReportLayer& l = rows[0];
  EXPECT_EQ(l.name, "conv1");
  EXPECT_EQ(l.kind, "conv");
  EXPECT_DOUBLE_EQ(l.forward_ms, 50.0);    // 0.2 s over 4 steps
  EXPECT_DOUBLE_EQ(l.backward_ms, 100.0);  // 0.4 s over 4 steps
  EXPECT_DOUBLE_EQ(l.gflop_per_step, 4.0);
  EXPECT_DOUBLE_EQ(l.gflops, 4.0 * 4 / 0.6);  // 16 GFLOP in 0.6 s
  EXPECT_DOUBLE_EQ(l.forward_gflops, 1.0 * 4 / 0.2);
  EXPECT_DOUBLE_EQ(l.backward_gflops, 3.0 * 4 / 0.4);
  EXPECT_DOUBLE_EQ(l.percent_of_peak, 100.0 * (16 / 0.6) / 80.0);
}

TEST(Report, ZeroTimeLayersAndMissingPeakGiveNoRateRatherThanZero) {
  const auto rows =
      report_layers({op("fast", "flatten", 0, 0, 0, 0, 0), op("conv", "conv", 0, 0.5, 1e9, 1e9, 0)},
                    2, kReportNaN);
  EXPECT_EQ(rows[0].forward_ms, 0.0);
  EXPECT_TRUE(std::isnan(rows[0].gflops));
  EXPECT_TRUE(std::isnan(rows[0].percent_of_peak));
  // Forward took no measurable time: no forward rate, but the op as a whole has one.
  EXPECT_TRUE(std::isnan(rows[1].forward_gflops));
  EXPECT_DOUBLE_EQ(rows[1].backward_gflops, 1.0 * 2 / 0.5);
  EXPECT_DOUBLE_EQ(rows[1].gflops, 2.0 * 2 / 0.5);
  EXPECT_TRUE(std::isnan(rows[1].percent_of_peak));  // no peak
  // No profiled steps: nothing is a mean.
  EXPECT_TRUE(std::isnan(report_layers({op("a", "conv", 1, 1, 1, 1, 1)}, 0, 10)[0].forward_ms));
}

TEST(Report, TimeBreakdownSumsEpochsAndComputeIsTheRest) {
  const ReportTime t = report_time({epoch(1, 1, false), epoch(2, 1, false)});
  EXPECT_DOUBLE_EQ(t.steps_s, 6.0);
  EXPECT_DOUBLE_EQ(t.data_wait_s, 0.75);
  EXPECT_DOUBLE_EQ(t.allreduce_s, 1.5);
  EXPECT_DOUBLE_EQ(t.allreduce_exposed_s, 0.375);
  EXPECT_DOUBLE_EQ(t.validation_s, 1.5);
  EXPECT_DOUBLE_EQ(t.compute_s(), 6.0 - 0.75 - 0.375);
  ReportTime odd;  // clock noise can make the waits exceed the steps: never a negative compute
  odd.steps_s = 1;
  odd.data_wait_s = 2;
  EXPECT_EQ(odd.compute_s(), 0.0);
}

TEST(Report, JsonNumbersAreTheInputs) {
  const PerformanceReport r = sample_report();
  // Through text and back, as a reader of report.json sees it.
  const json j = json::parse(report_json(r).dump());
  EXPECT_EQ(j["format"], "crest performance report");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["created"], r.created);
  EXPECT_EQ(j["run"]["source"], "crest train");
  EXPECT_EQ(j["run"]["config"], "configs/demo.yaml");
  EXPECT_EQ(j["run"]["ranks"], 2);
  EXPECT_EQ(j["run"]["threads_per_rank"], 3);
  EXPECT_EQ(j["run"]["global_batch"], 8);
  EXPECT_EQ(j["run"]["parameter_count"], 90832);
  EXPECT_EQ(j["run"]["train_gflop_per_step"].get<double>(), 4.0);
  EXPECT_EQ(j["run"]["samples_per_s"].get<double>(), 123.25);
  EXPECT_EQ(j["run"]["step_s"].get<double>(), 0.0625);
  EXPECT_TRUE(j["run"]["step_s_median"].is_null());
  EXPECT_EQ(j["peak"]["gflops"].get<double>(), 80.0);
  EXPECT_EQ(j["peak"]["source"], "given");
  EXPECT_EQ(j["peak"]["how"], "a test figure");
  ASSERT_EQ(j["epochs"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const ReportEpoch& e = r.epochs[i];
    const json& je = j["epochs"][i];
    EXPECT_EQ(je["epoch"], e.epoch);
    EXPECT_EQ(je["lr"].get<double>(), e.lr);
    EXPECT_EQ(je["train_loss"].get<double>(), e.train_loss);
    EXPECT_EQ(je["val_loss"].get<double>(), e.val_loss);
    EXPECT_EQ(je["val_mae"].get<double>(), e.val_metrics.at(0));
    EXPECT_EQ(je["validated"], true);
    EXPECT_EQ(je["seconds"].get<double>(), e.seconds);
    EXPECT_EQ(je["train_seconds"].get<double>(), e.train_seconds);
    EXPECT_EQ(je["samples_per_s"].get<double>(), e.samples_per_s);
    EXPECT_EQ(je["data_wait_s"].get<double>(), e.data_wait_s);
    EXPECT_EQ(je["allreduce_s"].get<double>(), e.allreduce_s);
    EXPECT_EQ(je["allreduce_exposed_s"].get<double>(), e.allreduce_exposed_s);
  }
  EXPECT_EQ(j["time"]["steps_s"].get<double>(), r.time.steps_s);
  EXPECT_EQ(j["time"]["compute_s"].get<double>(), r.time.compute_s());
  EXPECT_EQ(j["time"]["data_wait_s"].get<double>(), r.time.data_wait_s);
  EXPECT_EQ(j["time"]["allreduce_s"].get<double>(), r.time.allreduce_s);
  EXPECT_EQ(j["time"]["allreduce_exposed_s"].get<double>(), r.time.allreduce_exposed_s);
  EXPECT_EQ(j["time"]["validation_s"].get<double>(), r.time.validation_s);
  EXPECT_EQ(j["profiled_steps"], 4);
  ASSERT_EQ(j["layers"].size(), 2u);
  const ReportLayer& l = r.layers[0];
  const json& jl = j["layers"][0];
  EXPECT_EQ(jl["name"], "conv1");
  EXPECT_EQ(jl["kind"], "conv");
  EXPECT_EQ(jl["forward_ms"].get<double>(), l.forward_ms);
  EXPECT_EQ(jl["backward_ms"].get<double>(), l.backward_ms);
  EXPECT_EQ(jl["gflop_per_step"].get<double>(), l.gflop_per_step);
  EXPECT_EQ(jl["gflops"].get<double>(), l.gflops);
  EXPECT_EQ(jl["forward_gflops"].get<double>(), l.forward_gflops);
  EXPECT_EQ(jl["backward_gflops"].get<double>(), l.backward_gflops);
  EXPECT_EQ(jl["percent_of_peak"].get<double>(), l.percent_of_peak);
  // The zero-time layer: its times are 0, its rates unknown (null), not 0.
  EXPECT_EQ(j["layers"][1]["forward_ms"].get<double>(), 0.0);
  EXPECT_TRUE(j["layers"][1]["gflops"].is_null());
  EXPECT_TRUE(j["layers"][1]["percent_of_peak"].is_null());
  EXPECT_EQ(j["notes"], json::array({"a note"}));
}

TEST(Report, PageShowsTheNumbersAndAllItsCharts) {
  const std::string page = report_html(sample_report());
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  for (const char* id : {"chart-loss", "chart-mae", "chart-throughput", "chart-time",
                         "chart-layer-time", "chart-layer-gflops"})
    EXPECT_NE(chart(page, id), "") << id;
  // Two epochs: a line and a dot per point in each loss series.
  const std::string loss = chart(page, "chart-loss");
  EXPECT_EQ(count(loss, "<circle"), 4u);
  EXPECT_EQ(count(loss, "<path d=\"M"), 2u);
  EXPECT_EQ(count(chart(page, "chart-throughput"), "<rect x="), 2u);
  // One row per layer; the peak line on the GFLOP/s chart.
  EXPECT_EQ(count(chart(page, "chart-layer-time"), "<g class=\"row\">"), 2u);
  EXPECT_NE(chart(page, "chart-layer-gflops").find("class=\"ref\""), std::string::npos);
  EXPECT_NE(page.find("peak 80.00 GFLOP/s"), std::string::npos);
  // Table figures: conv1 50 ms forward, 100 ms backward, 26.67 GFLOP/s = 33.3% of 80.
  EXPECT_NE(page.find("<td>50.00</td><td>100.0</td>"), std::string::npos);
  EXPECT_NE(page.find("<td>26.67</td>"), std::string::npos);
  EXPECT_NE(page.find(">33.3%<"), std::string::npos);
  EXPECT_NE(page.find("a note"), std::string::npos);
}

TEST(Report, PageNeedsNoScriptAndReferencesNoNetwork) {
  const std::string page = report_html(sample_report());
  std::string rest = page;
  // The SVG namespace is an identifier, never fetched; remove it and no URL may remain.
  for (size_t at; (at = rest.find("xmlns=\"http://www.w3.org/2000/svg\"")) != std::string::npos;)
    rest.erase(at, 34);
  EXPECT_EQ(rest.find("://"), std::string::npos);
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(page.find(" src="), std::string::npos);
  EXPECT_EQ(page.find(" href="), std::string::npos);
  EXPECT_EQ(page.find("url("), std::string::npos);
  EXPECT_NE(page.find("Content-Security-Policy\" content=\"default-src 'none'"), std::string::npos);
}

TEST(Report, HostileNamesAreEscapedInThePageAndKeptInTheJson) {
  PerformanceReport r = sample_report();
  const std::string evil = "<script>alert(\"x\")</script>";
  const std::string quotes = "a'b\"c&d</title>";
  r.run.config = "</title><script>alert(1)</script>";
  r.notes = {"<img src=x onerror=alert(1)>"};
  r.layers = report_layers(
      {op(evil, "<b>kind</b>", 0.1, 0.1, 1e9, 0, 0), op(quotes, "conv", 0.1, 0.1, 1e9, 0, 0),
       op("bad\xff\xfe utf8 \x01 ctl", "conv", 0.1, 0.1, 1e9, 0, 0)},
      1, 80);
  const std::string page = report_html(r);
  std::string lower = page;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  EXPECT_EQ(lower.find("<script"), std::string::npos);
  EXPECT_EQ(lower.find("<img"), std::string::npos);
  EXPECT_EQ(page.find("<b>"), std::string::npos);
  EXPECT_EQ(count(page, "</title>"), count(page, "<title>"));  // only real titles are closed
  EXPECT_NE(page.find("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(page.find("a&#39;b&quot;c&amp;d&lt;/title&gt;"), std::string::npos);
  // In attributes too (the table cell's title): the quote cannot end the attribute.
  EXPECT_NE(page.find("title=\"a&#39;b&quot;c&amp;d&lt;/title&gt;\""), std::string::npos);
  // Broken UTF-8 and control characters become U+FFFD, so the page stays valid UTF-8.
  EXPECT_EQ(page.find('\xff'), std::string::npos);
  EXPECT_EQ(page.find('\x01'), std::string::npos);
  EXPECT_NE(page.find("bad\xEF\xBF\xBD\xEF\xBF\xBD utf8 \xEF\xBF\xBD ctl"), std::string::npos);
  // The JSON keeps the names as they are (its own escaping), broken bytes replaced.
  ScratchDir dir;
  write_report(dir.file("r"), r);
  const json j = json::parse(slurp(dir.file("r/report.json")));
  EXPECT_EQ(j["layers"][0]["name"], evil);
  EXPECT_EQ(j["layers"][0]["kind"], "<b>kind</b>");
  EXPECT_EQ(j["layers"][1]["name"], quotes);
  EXPECT_EQ(j["layers"][2]["name"], "bad\xEF\xBF\xBD\xEF\xBF\xBD utf8 \x01 ctl");
  EXPECT_EQ(j["run"]["config"], r.run.config);
}

TEST(Report, LongNamesAreShortenedInChartsOnlyAtCharacterBoundaries) {
  PerformanceReport r = sample_report();
  std::string name;
  for (int i = 0; i < 40; ++i) name += "\xC3\xA9";  // é: two bytes each
  r.layers = report_layers({op(name, "conv", 0.1, 0.1, 1e9, 0, 0)}, 1, 80);
  const std::string page = report_html(r);
  std::string cut;
  for (int i = 0; i < 30; ++i) cut += "\xC3\xA9";
  EXPECT_NE(chart(page, "chart-layer-time").find(">" + cut + "\xE2\x80\xA6<title>"),
            std::string::npos);
  EXPECT_NE(page.find(">" + name + "</td>"), std::string::npos);  // the table has it whole
}

TEST(Report, OneEpochWithoutValidationDrawsSinglePointsAndSaysThereIsNoValidation) {
  PerformanceReport r = sample_report();
  r.epochs = {epoch(1, 0.5, false)};
  r.run.eval_samples = 0;
  r.time = report_time(r.epochs);
  const std::string page = report_html(r);
  const std::string loss = chart(page, "chart-loss");
  ASSERT_NE(loss, "");
  EXPECT_EQ(count(loss, "<circle"), 1u);  // the one value is visible as a dot
  EXPECT_EQ(loss.find("validation loss"), std::string::npos);
  EXPECT_EQ(chart(page, "chart-mae"), "");
  EXPECT_NE(page.find("No validation in this run"), std::string::npos);
  EXPECT_EQ(count(chart(page, "chart-throughput"), "<rect x="), 1u);
  const json j = report_json(r);
  EXPECT_TRUE(j["epochs"][0]["val_loss"].is_null());
  EXPECT_TRUE(j["epochs"][0]["val_mae"].is_null());
  EXPECT_EQ(j["epochs"][0]["validated"], false);
}

TEST(Report, NonFiniteLossesLeaveGapsAndNullsNotNanText) {
  PerformanceReport r = sample_report();
  r.epochs = {epoch(1, 0.5, true, 0.4, 0.3), epoch(2, kReportNaN, true, INFINITY, kReportNaN),
              epoch(3, 0.25, true, 0.2, 0.1)};
  r.time = report_time(r.epochs);
  const std::string page = report_html(r);
  const std::string loss = chart(page, "chart-loss");
  // Each series is cut at epoch 2: two separate pieces, two dots.
  EXPECT_EQ(count(loss, "<circle"), 4u);
  const std::regex train_path("data-series=\"train loss\"><path d=\"M[0-9. ]+M[0-9. ]+\"");
  EXPECT_TRUE(std::regex_search(loss, train_path)) << loss;
  EXPECT_FALSE(std::regex_search(page, std::regex("\\b-?(nan|inf)\\b", std::regex::icase)));
  const json j = json::parse(report_json(r).dump());
  EXPECT_TRUE(j["epochs"][1]["train_loss"].is_null());
  EXPECT_TRUE(j["epochs"][1]["val_loss"].is_null());
  EXPECT_EQ(j["epochs"][2]["train_loss"].get<double>(), 0.25);

  r.epochs = {epoch(1, kReportNaN, false)};  // nothing finite to plot at all
  EXPECT_NE(chart(report_html(r), "chart-loss").find("no finite values to plot"),
            std::string::npos);
}

TEST(Report, BenchRunsWithoutEpochsShowTimeAndLayersOnly) {
  PerformanceReport r = sample_report();
  r.run.source = "crest bench train";
  r.epochs.clear();
  r.time = ReportTime{};
  r.time.steps_s = 0.5;
  r.profiled_steps = 3;
  const std::string page = report_html(r);
  EXPECT_EQ(chart(page, "chart-loss"), "");
  EXPECT_EQ(chart(page, "chart-throughput"), "");
  EXPECT_NE(page.find("No epochs"), std::string::npos);
  EXPECT_NE(chart(page, "chart-time").find("3 timed steps"), std::string::npos);
  EXPECT_NE(chart(page, "chart-layer-time"), "");
  EXPECT_EQ(report_json(r)["epochs"], json::array());
}

TEST(Report, EmptyReportStillRenders) {
  PerformanceReport r;  // no run facts, no peak, no epochs, no layers
  const std::string page = report_html(r);
  EXPECT_NE(page.find("No per-layer profile"), std::string::npos);
  EXPECT_NE(page.find("</html>"), std::string::npos);
  EXPECT_FALSE(std::regex_search(page, std::regex("\\b-?(nan|inf)\\b", std::regex::icase)));
  const json j = json::parse(report_json(r).dump());
  EXPECT_TRUE(j["peak"]["gflops"].is_null());
  EXPECT_TRUE(j["run"]["samples_per_s"].is_null());
}

TEST(Report, WritesBothFilesIntoANewDirectoryAndLeavesNoTemporaryFile) {
  ScratchDir dir;
  const std::string out = dir.file("runs/a/b");
  PerformanceReport r = sample_report();
  r.created.clear();  // the writer stamps it
  EXPECT_EQ(write_report(out, r), out + "/report.html");
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(out))
    names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"report.html", "report.json"}));
  const json j = json::parse(slurp(out + "/report.json"));
  const std::string created = j["created"];
  EXPECT_TRUE(std::regex_match(created, std::regex("\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\dZ")))
      << created;
  r.created = created;
  EXPECT_EQ(j, json::parse(report_json(r).dump()));
  EXPECT_EQ(slurp(out + "/report.html"), report_html(r));
  // Writing again replaces both.
  r.notes = {"second"};
  write_report(out, r);
  EXPECT_EQ(json::parse(slurp(out + "/report.json"))["notes"], json::array({"second"}));
}

TEST(Report, DirectoryThatCannotBeCreatedIsAnErrorNamingIt) {
  ScratchDir dir;
  const std::string blocker = dir.file("a-file");
  std::ofstream(blocker) << "x";
  expect_input_error([&] { write_report(blocker + "/sub", sample_report()); },
                     {blocker + "/sub", "cannot create the report directory"});
  expect_input_error([&] { check_report_dir(blocker); }, {blocker, "not a directory"});
}

TEST(Report, WriteFailureNamesTheFileAndKeepsTheEarlierReport) {
  ScratchDir dir;
  const std::string out = dir.file("r");
  PerformanceReport r = sample_report();
  write_report(out, r);
  const std::string old_json = slurp(out + "/report.json"), old_html = slurp(out + "/report.html");
  r.notes = {std::string(1 << 16, 'x')};  // larger than the limit below
  {
    FileSizeLimit limit(old_json.size() + 1000);
    ASSERT_TRUE(limit.ok());
    expect_input_error([&] { write_report(out, r); }, {out + "/report.json", "write failed"});
  }
  // Atomic: the old files are untouched and no temporary file is left beside them.
  EXPECT_EQ(slurp(out + "/report.json"), old_json);
  EXPECT_EQ(slurp(out + "/report.html"), old_html);
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(out)) entries += e.is_regular_file();
  EXPECT_EQ(entries, 2u);
}

}  // namespace
}  // namespace crest
