// The study's report.html (study_report.hpp).
#include "study_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "crest/core/atomic_file.hpp"
#include "crest/train/report_charts.hpp"

namespace crest::search_detail {
namespace {

constexpr size_t kCharted = 10;  // trials drawn in the chart: the best ones

std::string number(double v) {
  if (!std::isfinite(v)) return "\xE2\x80\x93";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string cell(const std::string& s, bool left = false) {
  return std::string(left ? "<td class=\"l\">" : "<td>") + html_escape(s) + "</td>";
}

// Trials ranked as the scheduler ranks its best: trained furthest first, then by the metric.
std::vector<const TrialRecord*> ranked(const Scheduler& s, bool lower_is_better) {
  std::vector<const TrialRecord*> out;
  for (const auto& t : s.trials()) out.push_back(&t);
  const auto last = [](const TrialRecord* t) {
    return t->metric.empty() || t->status == TrialStatus::failed ? std::nan("") : t->metric.back();
  };
  std::stable_sort(out.begin(), out.end(), [&](const TrialRecord* a, const TrialRecord* b) {
    const double x = last(a), y = last(b);
    if (std::isnan(x) != std::isnan(y)) return std::isnan(y);
    if (a->metric.size() != b->metric.size()) return a->metric.size() > b->metric.size();
    if (std::isnan(x)) return false;
    return lower_is_better ? x < y : x > y;
  });
  return out;
}

// The chart's legend is a line of HTML under it: the chart's own legend, drawn above the plot,
// has room for a few short names, not for ten trials.
std::string chart(const StudyReportInput& in, const std::vector<const TrialRecord*>& order) {
  size_t epochs = 0;
  for (const auto* t : order) epochs = std::max(epochs, t->metric.size());
  std::vector<int> x;
  for (size_t e = 1; e <= epochs; ++e) x.push_back(static_cast<int>(e));
  std::vector<ChartSeries> series;
  std::string legend = "<p class=\"sub\">";
  for (size_t i = 0; i < order.size() && i < kCharted; ++i) {
    ChartSeries s{"", chart_color(i), order[i]->metric};
    s.y.resize(epochs, std::nan(""));
    legend += "<span style=\"color:" + s.color + "\">&#9632;</span> trial " +
              std::to_string(order[i]->id) + " &nbsp; ";
    series.push_back(std::move(s));
  }
  return "<div>" + svg_line_chart("chart-trials", in.metric + " per epoch", in.metric, x, series) +
         legend + "(the best " + std::to_string(series.size()) + " trials)</p></div>";
}

std::string trials_table(const StudyReportInput& in, const std::vector<const TrialRecord*>& order) {
  std::ostringstream o;
  o << "<table id=\"trials\"><tr><th>rank</th><th>trial</th><th class=\"l\">status</th>"
       "<th>epochs</th><th>"
    << html_escape(in.metric) << "</th>";
  for (const auto& k : in.keys) o << "<th class=\"l\">" << html_escape(k) << "</th>";
  o << "<th>group</th><th class=\"l\">message</th></tr>\n";
  for (size_t i = 0; i < order.size(); ++i) {
    const TrialRecord& t = *order[i];
    o << "<tr>" << cell(std::to_string(i + 1)) << cell(std::to_string(t.id))
      << cell(status_name(t.status), true) << cell(std::to_string(t.metric.size()))
      << cell(number(t.metric.empty() ? std::nan("") : t.metric.back()));
    for (const auto& k : in.keys) o << cell(value_of(t.params, k), true);
    o << cell(std::to_string(t.group)) << cell(t.message, true) << "</tr>\n";
  }
  return o.str() + "</table>\n";
}

std::string decisions(const StudyReportInput& in) {
  std::ostringstream o;
  const Scheduler& s = *in.scheduler;
  for (const auto& [trial, rung] : s.promotions())
    o << "<li>trial " << trial << " promoted to rung " << rung + 1 << " ("
      << s.rungs()[static_cast<size_t>(rung)] << " epochs)</li>\n";
  for (const auto& r : *in.rows)
    if (r.message.rfind("copied trial", 0) == 0)
      o << "<li>trial " << r.trial << " " << html_escape(r.message) << "</li>\n";
  const std::string items = o.str();
  return items.empty() ? "<p class=\"empty\">no promotions or copies</p>\n"
                       : "<ol class=\"notes\">\n" + items + "</ol>\n";
}

}  // namespace

std::string study_report_html(const StudyReportInput& in) {
  const Scheduler& s = *in.scheduler;
  const auto order = ranked(s, in.lower_is_better);
  int counts[5] = {0, 0, 0, 0, 0};
  for (const auto& t : s.trials()) ++counts[static_cast<int>(t.status)];
  std::ostringstream o;
  o << "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>crest search "
    << html_escape(in.title) << "</title>\n<style>" << report_css() << "</style>\n</head>\n<body>\n"
    << "<h1>crest search: " << html_escape(in.title) << "</h1>\n<p class=\"sub\">"
    << html_escape(in.description) << "</p>\n<dl class=\"facts\">";
  const auto fact = [&](const std::string& k, const std::string& v) {
    o << "<dt>" << html_escape(k) << "</dt><dd>" << html_escape(v) << "</dd>";
  };
  fact("trials", std::to_string(s.started()) + " of " + std::to_string(s.settings().trials) +
                     " started: " + std::to_string(counts[2]) + " completed, " +
                     std::to_string(counts[3]) + " pruned, " + std::to_string(counts[4]) +
                     " failed, " + std::to_string(counts[0] + counts[1]) + " running or paused");
  fact("optimised",
       in.metric + (in.lower_is_better ? " (lower is better)" : " (higher is better)"));
  if (const auto b = s.best())
    fact("best", "trial " + std::to_string(*b) + ": " + in.metric + " " + number(s.best_metric()) +
                     " (best.yaml)");
  o << "</dl>\n<h2>Metric per epoch</h2>\n<div class=\"charts\">" << chart(in, order)
    << "</div>\n<h2>Trials, best first</h2>\n"
    << trials_table(in, order) << "<h2>Decisions</h2>\n"
    << decisions(in)
    << "<footer>trials.jsonl and trials.csv beside this page hold every epoch of every trial; "
       "docs/search.md explains them.</footer>\n</body>\n</html>\n";
  return o.str();
}

void write_study_report(const std::string& dir, const StudyReportInput& in) {
  AtomicOutputFile f(dir + "/report.html");
  f.write(study_report_html(in));
  f.commit();
}

}  // namespace crest::search_detail
