// The report's drawing pieces for other pages (the search study's report.html): the same SVG
// line chart, HTML escaping and style sheet as the run report (crest/train/report.hpp), so every
// crest page looks and reads alike and none needs a script or the network.
#pragma once
#include <string>
#include <vector>

namespace crest {

struct ChartSeries {
  std::string name, color;  // legend text ("" for none), CSS colour
  std::vector<double> y;    // one per x; NaN leaves a gap
};

// A line chart over epochs `x`: each series a path with a dot per point (report.cpp's
// line_chart).
std::string svg_line_chart(const std::string& id, const std::string& title,
                           const std::string& y_label, const std::vector<int>& x,
                           const std::vector<ChartSeries>& series);
std::string html_escape(const std::string& s);  // clean UTF-8, & < > " ' escaped
const char* report_css();                       // the run report's style sheet
std::string chart_color(size_t i);              // the i-th of a palette of distinct colours

}  // namespace crest
