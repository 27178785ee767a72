// The performance report (report.hpp): the JSON document, the self-contained HTML page with its
// SVG charts, and writing both atomically.
//
// The charts are drawn here as SVG text rather than by a script in the page: the page then needs
// no JavaScript and no library, renders the same in any browser or offline viewer, and a test
// can check its geometry without running our code in the browser. Every string that reaches the
// page or the JSON comes from the run (layer names come from YAML model files), so all of them go
// through html() / the JSON library; numbers that are not finite are shown as "–" and written as
// null.
#include "crest/train/report.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "crest/core/atomic_file.hpp"
#include "crest/core/error.hpp"
#include "crest/train/report_charts.hpp"

namespace crest {
namespace {

bool finite(double v) { return std::isfinite(v); }

// Valid UTF-8 with C0 controls (except tab and newline) and broken sequences replaced by U+FFFD:
// a layer name is user text and may be anything.
std::string clean_utf8(const std::string& s) {
  static const char kReplacement[] = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      if (c < 0x20 && c != '\t' && c != '\n')
        out += kReplacement;
      else if (c == 0x7F)
        out += kReplacement;
      else
        out += static_cast<char>(c);
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if ((c & 0xE0) == 0xC0)
      len = 2, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0)
      len = 3, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0)
      len = 4, cp = c & 0x07;
    bool ok = len > 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80)
        ok = false;
      else
        cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not valid UTF-8 either.
    if (ok)
      ok = !(len == 2 && cp < 0x80) && !(len == 3 && cp < 0x800) && !(len == 4 && cp < 0x10000) &&
           !(cp >= 0xD800 && cp <= 0xDFFF) && cp <= 0x10FFFF;
    if (ok) {
      out.append(s, i, len);
      i += len;
    } else {
      out += kReplacement;
      ++i;
    }
  }
  return out;
}

// Text for HTML content and attribute values (both quote kinds escaped).
// "mae" -> "MAE": metric short names are abbreviations.
std::string upper(std::string s) {
  for (char& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

std::string html(const std::string& raw) {
  const std::string s = clean_utf8(raw);
  std::string out;
  out.reserve(s.size() + 16);
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

// At most `max` code points of clean UTF-8, with an ellipsis when cut (chart labels; the full
// name stays in the table and in the label's tooltip).
std::string shorten(const std::string& raw, size_t max) {
  const std::string s = clean_utf8(raw);
  size_t points = 0, cut = s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) continue;  // continuation byte
    if (points == max) {
      cut = i;
      break;
    }
    ++points;
  }
  return cut < s.size() ? s.substr(0, cut) + "\xE2\x80\xA6" : s;
}

// About `sig` significant digits, without exponents in the usual range; "–" when not finite.
std::string num(double v, int sig = 4) {
  if (!finite(v)) return "\xE2\x80\x93";
  if (v == 0) return "0";  // exactly nothing (an op without arithmetic), not a rounded 0.0000
  char buf[64];
  const double a = std::fabs(v);
  if (a != 0 && (a >= 1e7 || a < 1e-4)) {
    std::snprintf(buf, sizeof buf, "%.*e", sig - 1, v);
  } else {
    const int digits = a == 0 ? 0 : static_cast<int>(std::floor(std::log10(a))) + 1;
    std::snprintf(buf, sizeof buf, "%.*f", std::max(0, sig - digits), v);
  }
  return buf;
}

// Axis ticks are round numbers already: the shortest form ("0.5", not "0.500").
std::string tick(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

std::string pct(double part, double whole) {
  return whole > 0 && finite(part) ? num(100.0 * part / whole, 3) + "%" : "\xE2\x80\x93";
}

// SVG coordinates: one decimal is finer than a pixel.
std::string c1(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", finite(v) ? v : 0.0);
  return buf;
}

nlohmann::json jnum(double v) { return finite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

// Ticks for an axis covering [lo, hi]: a 1/2/5 × 10^k step, the range widened to whole steps.
struct Axis {
  double lo = 0, hi = 1;
  std::vector<double> ticks;
};
Axis nice_axis(double lo, double hi, int target = 5) {
  if (!finite(lo) || !finite(hi)) lo = 0, hi = 1;
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {  // a flat series: give it room instead of dividing by zero
    const double pad = lo == 0 ? 1.0 : std::fabs(lo) * 0.1;
    lo -= lo == 0 ? 0 : pad;
    hi += pad;
  }
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double f = raw / mag;
  const double step = (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
  Axis a;
  a.lo = std::floor(lo / step + 1e-9) * step;
  a.hi = std::ceil(hi / step - 1e-9) * step;
  for (int i = 0;; ++i) {
    const double t = a.lo + i * step;
    if (t > a.hi + step * 1e-6 || i > 50) break;
    a.ticks.push_back(std::fabs(t) < step * 1e-9 ? 0.0 : t);
  }
  return a;
}

const char* kFont = "font-family=\"system-ui, sans-serif\"";

// The opening of a chart: a titled, labelled <svg> with a viewBox so it scales with the page.
std::string svg_open(const std::string& id, const std::string& title, double w, double h) {
  return "<svg id=\"" + html(id) +
         "\" class=\"chart\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 " + c1(w) + " " +
         c1(h) + "\" width=\"" + c1(w) + "\" height=\"" + c1(h) + "\" role=\"img\" aria-label=\"" +
         html(title) + "\" " + kFont + " font-size=\"12\"><title>" + html(title) + "</title>\n";
}

std::string text(double x, double y, const std::string& s, const std::string& extra = "") {
  return "<text x=\"" + c1(x) + "\" y=\"" + c1(y) + "\"" + (extra.empty() ? "" : " " + extra) +
         ">" + html(s) + "</text>";
}

// Horizontal gridlines at the y axis' ticks, with the tick labels left of the plot.
template <class ToY>
std::string y_gridlines(double left, double width, const Axis& ya, ToY py) {
  std::string s = "<g class=\"axes\" stroke=\"#d0d4da\" stroke-width=\"1\">";
  for (double t : ya.ticks)
    s += "<line x1=\"" + c1(left) + "\" x2=\"" + c1(left + width) + "\" y1=\"" + c1(py(t)) +
         "\" y2=\"" + c1(py(t)) + "\"/>";
  s += "</g><g fill=\"#555\" text-anchor=\"end\">";
  for (double t : ya.ticks) s += text(left - 6, py(t) + 4, tick(t));
  return s + "</g>";
}

std::string rect(double x, double y, double w, double h, const std::string& fill,
                 const std::string& tip) {
  return "<rect x=\"" + c1(x) + "\" y=\"" + c1(y) + "\" width=\"" + c1(std::max(0.0, w)) +
         "\" height=\"" + c1(std::max(0.0, h)) + "\" fill=\"" + fill + "\"><title>" + html(tip) +
         "</title></rect>";
}

struct Series {
  std::string name, color;
  std::vector<double> y;  // one per x; NaN leaves a gap
};

// Per-epoch line chart: each series a path broken at non-finite values, with a dot per point
// (so a one-epoch run still shows its value).
std::string line_chart(const std::string& id, const std::string& title, const std::string& y_label,
                       const std::vector<int>& x, const std::vector<Series>& series) {
  const double W = 560, H = 300, L = 68, R = 16, T = 34, B = 44;
  const double pw = W - L - R, ph = H - T - B;
  double ymin = INFINITY, ymax = -INFINITY;
  for (const Series& s : series)
    for (double v : s.y)
      if (finite(v)) ymin = std::min(ymin, v), ymax = std::max(ymax, v);
  const bool any = finite(ymin);
  // Losses and errors are >= 0: start at 0 so the eye reads ratios right.
  const Axis ya = nice_axis(any ? std::min(0.0, ymin) : 0.0, any ? ymax : 1.0);
  const double xmin = x.empty() ? 0 : *std::min_element(x.begin(), x.end());
  const double xmax = x.empty() ? 1 : *std::max_element(x.begin(), x.end());
  const double x0 = xmin == xmax ? xmin - 1 : xmin, x1 = xmin == xmax ? xmax + 1 : xmax;
  auto px = [&](double v) { return L + (v - x0) / (x1 - x0) * pw; };
  auto py = [&](double v) { return T + ph - (v - ya.lo) / (ya.hi - ya.lo) * ph; };
  std::string s = svg_open(id, title, W, H);
  s += text(L, 18, title, "font-weight=\"600\" font-size=\"13\"") + "\n";
  s += y_gridlines(L, pw, ya, py);
  s += "<g fill=\"#555\" text-anchor=\"middle\">";
  const size_t every = std::max<size_t>(1, (x.size() + 9) / 10);  // at most ~10 epoch labels
  for (size_t i = 0; i < x.size(); i += every)
    s += text(px(x[i]), T + ph + 16, std::to_string(x[i]));
  s += "</g>";
  s += text(L + pw / 2, H - 6, "epoch", "fill=\"#555\" text-anchor=\"middle\"");
  s += text(14, T + ph / 2, y_label,
            "fill=\"#555\" text-anchor=\"middle\" transform=\"rotate(-90 14 " + c1(T + ph / 2) +
                ")\"") +
       "\n";
  s += "<rect class=\"frame\" x=\"" + c1(L) + "\" y=\"" + c1(T) + "\" width=\"" + c1(pw) +
       "\" height=\"" + c1(ph) + "\" fill=\"none\" stroke=\"#9aa0a6\"/>\n";
  if (!any)
    s += text(L + pw / 2, T + ph / 2, "no finite values to plot",
              "fill=\"#b00\" text-anchor=\"middle\"");
  double lx = L + pw;  // legend, right-aligned above the plot
  for (auto it = series.rbegin(); it != series.rend(); ++it) {
    lx -= 14 + 7.0 * static_cast<double>(it->name.size()) + 18;
    s += "<line x1=\"" + c1(lx) + "\" x2=\"" + c1(lx + 14) + "\" y1=\"14\" y2=\"14\" stroke=\"" +
         it->color + "\" stroke-width=\"2.5\"/>" + text(lx + 18, 18, it->name, "fill=\"#333\"");
  }
  for (const Series& sr : series) {
    std::string d;
    bool pen = false;
    for (size_t i = 0; i < x.size() && i < sr.y.size(); ++i) {
      if (!finite(sr.y[i])) {
        pen = false;
        continue;
      }
      d += (pen ? "L" : "M") + c1(px(x[i])) + " " + c1(py(sr.y[i])) + " ";
      pen = true;
    }
    s += "<g class=\"series\" data-series=\"" + html(sr.name) + "\">";
    if (!d.empty())
      s += "<path d=\"" + d + "\" fill=\"none\" stroke=\"" + sr.color + "\" stroke-width=\"2\"/>";
    for (size_t i = 0; i < x.size() && i < sr.y.size(); ++i)
      if (finite(sr.y[i]))
        s += "<circle cx=\"" + c1(px(x[i])) + "\" cy=\"" + c1(py(sr.y[i])) +
             "\" r=\"3.5\" fill=\"" + sr.color + "\"><title>" +
             html(sr.name + ", epoch " + std::to_string(x[i]) + ": " + num(sr.y[i], 6)) +
             "</title></circle>";
    s += "</g>\n";
  }
  return s + "</svg>\n";
}

// One bar per epoch (throughput).
std::string bar_chart(const std::string& id, const std::string& title, const std::string& y_label,
                      const std::vector<int>& x, const std::vector<double>& y,
                      const std::string& color) {
  const double W = 560, H = 300, L = 68, R = 16, T = 34, B = 44;
  const double pw = W - L - R, ph = H - T - B;
  double ymax = 0;
  for (double v : y)
    if (finite(v)) ymax = std::max(ymax, v);
  const Axis ya = nice_axis(0, ymax > 0 ? ymax : 1);
  auto py = [&](double v) { return T + ph - (v - ya.lo) / (ya.hi - ya.lo) * ph; };
  const double slot = pw / static_cast<double>(std::max<size_t>(1, x.size()));
  const double bw = std::min(60.0, slot * 0.7);
  std::string s = svg_open(id, title, W, H);
  s += text(L, 18, title, "font-weight=\"600\" font-size=\"13\"") + "\n";
  s += y_gridlines(L, pw, ya, py);
  s += text(L + pw / 2, H - 6, "epoch", "fill=\"#555\" text-anchor=\"middle\"");
  s += text(14, T + ph / 2, y_label,
            "fill=\"#555\" text-anchor=\"middle\" transform=\"rotate(-90 14 " + c1(T + ph / 2) +
                ")\"") +
       "\n";
  const size_t every = std::max<size_t>(1, (x.size() + 9) / 10);
  s += "<g class=\"bars\">";
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
    const double cx = L + slot * (static_cast<double>(i) + 0.5);
    if (finite(y[i]) && y[i] > 0)
      s += rect(cx - bw / 2, py(y[i]), bw, py(0) - py(y[i]), color,
                "epoch " + std::to_string(x[i]) + ": " + num(y[i], 5) + " " + y_label);
    if (i % every == 0)
      s += text(cx, T + ph + 16, std::to_string(x[i]), "fill=\"#555\" text-anchor=\"middle\"");
  }
  s += "</g>\n<line x1=\"" + c1(L) + "\" x2=\"" + c1(L + pw) + "\" y1=\"" + c1(T + ph) +
       "\" y2=\"" + c1(T + ph) + "\" stroke=\"#9aa0a6\"/>\n";
  return s + "</svg>\n";
}

struct HBarRow {
  std::string label;
  std::vector<double> parts;  // stacked left to right; NaN counts as 0
  std::string value;          // printed after the bar
};

// Horizontal stacked bars, one row per item (layers, epochs), with an optional reference line
// (the peak) and a legend of the parts.
std::string hbar_chart(const std::string& id, const std::string& title, const std::string& x_label,
                       const std::vector<HBarRow>& rows, const std::vector<std::string>& part_names,
                       const std::vector<std::string>& colors, double ref = kReportNaN,
                       const std::string& ref_label = "") {
  const double W = 820, L = 210, R = 110, T = 46, row_h = 18, B = 40;
  const double H = T + row_h * static_cast<double>(std::max<size_t>(1, rows.size())) + B;
  const double pw = W - L - R;
  double xmax = finite(ref) ? ref : 0;
  for (const HBarRow& r : rows) {
    double sum = 0;
    for (double v : r.parts) sum += finite(v) && v > 0 ? v : 0;
    xmax = std::max(xmax, sum);
  }
  const Axis xa = nice_axis(0, xmax > 0 ? xmax : 1, 6);
  auto px = [&](double v) { return L + (v - xa.lo) / (xa.hi - xa.lo) * pw; };
  const double bottom = T + row_h * static_cast<double>(std::max<size_t>(1, rows.size()));
  std::string s = svg_open(id, title, W, H);
  s += text(8, 18, title, "font-weight=\"600\" font-size=\"13\"") + "\n";
  double lx = L;
  for (size_t k = 0; k < part_names.size(); ++k) {
    s += "<rect x=\"" + c1(lx) + "\" y=\"26\" width=\"12\" height=\"12\" fill=\"" +
         colors[k % colors.size()] + "\"/>" + text(lx + 16, 36, part_names[k], "fill=\"#333\"");
    lx += 16 + 7.0 * static_cast<double>(part_names[k].size()) + 20;
  }
  s += "<g class=\"axes\" stroke=\"#e3e6ea\">";
  for (double t : xa.ticks)
    s += "<line x1=\"" + c1(px(t)) + "\" x2=\"" + c1(px(t)) + "\" y1=\"" + c1(T) + "\" y2=\"" +
         c1(bottom) + "\"/>";
  s += "</g><g fill=\"#555\" text-anchor=\"middle\">";
  for (double t : xa.ticks) s += text(px(t), bottom + 14, tick(t));
  s += "</g>" + text(L + pw / 2, H - 6, x_label, "fill=\"#555\" text-anchor=\"middle\"") + "\n";
  if (rows.empty())
    s += text(L + pw / 2, T + 13, "nothing measured", "fill=\"#b00\" text-anchor=\"middle\"");
  s += "<g class=\"bars\">";
  for (size_t i = 0; i < rows.size(); ++i) {
    const HBarRow& r = rows[i];
    const double y = T + row_h * static_cast<double>(i);
    s += "<g class=\"row\"><text x=\"" + c1(L - 6) + "\" y=\"" + c1(y + 13) +
         "\" text-anchor=\"end\" fill=\"#222\">" + html(shorten(r.label, 30)) + "<title>" +
         html(r.label) + "</title></text>";
    double at = 0;
    for (size_t k = 0; k < r.parts.size(); ++k) {
      const double v = finite(r.parts[k]) && r.parts[k] > 0 ? r.parts[k] : 0;
      s += rect(
          px(at), y + 2, px(at + v) - px(at), row_h - 4, colors[k % colors.size()],
          r.label + ": " + (k < part_names.size() ? part_names[k] : "") + " " + num(r.parts[k], 4));
      at += v;
    }
    s += text(px(at) + 5, y + 13, r.value, "fill=\"#444\"") + "</g>";
  }
  s += "</g>\n";
  if (finite(ref) && ref > 0) {
    s += "<line class=\"ref\" x1=\"" + c1(px(ref)) + "\" x2=\"" + c1(px(ref)) + "\" y1=\"" +
         c1(T - 4) + "\" y2=\"" + c1(bottom) +
         "\" stroke=\"#c0392b\" stroke-dasharray=\"5 3\" stroke-width=\"1.5\"/>" +
         text(px(ref) - 4, T - 8, ref_label, "fill=\"#c0392b\" text-anchor=\"end\"") + "\n";
  }
  s += "<line x1=\"" + c1(L) + "\" x2=\"" + c1(L) + "\" y1=\"" + c1(T) + "\" y2=\"" + c1(bottom) +
       "\" stroke=\"#9aa0a6\"/>\n";
  return s + "</svg>\n";
}

const char* kCss = R"(
:root { color-scheme: light; }
body { font-family: system-ui, sans-serif; margin: 0 auto; max-width: 1100px; padding: 16px 24px 48px;
       color: #1d2125; background: #fff; line-height: 1.4; }
h1 { font-size: 22px; margin: 8px 0 2px; }
h2 { font-size: 17px; margin: 28px 0 8px; border-bottom: 1px solid #e3e6ea; padding-bottom: 4px; }
.sub { color: #5f6368; margin: 0 0 12px; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0; }
dl.facts dt { color: #5f6368; }
dl.facts dd { margin: 0; }
.charts { display: flex; flex-wrap: wrap; gap: 16px; }
svg.chart { max-width: 100%; height: auto; background: #fff; }
table { border-collapse: collapse; font-size: 13px; margin: 8px 0; }
th, td { padding: 3px 8px; border-bottom: 1px solid #eceff1; text-align: right; white-space: nowrap; }
th { background: #f6f8fa; position: sticky; top: 0; }
td.l, th.l { text-align: left; }
td.name { max-width: 260px; overflow: hidden; text-overflow: ellipsis; }
.bar { display: inline-block; height: 9px; background: #54a24b; vertical-align: middle; margin-left: 6px; }
.empty { color: #5f6368; font-style: italic; }
.notes li { margin: 2px 0; }
footer { margin-top: 32px; color: #80868b; font-size: 12px; }
)";

const std::string kTrainColor = "#1f77b4", kValColor = "#ff7f0e", kForwardColor = "#4c78a8",
                  kBackwardColor = "#f58518", kComputeColor = "#54a24b", kWaitColor = "#e45756",
                  kAllreduceColor = "#b279a2", kValidColor = "#9d9da1";

std::string fact(const std::string& k, const std::string& v) {
  return "<dt>" + html(k) + "</dt><dd>" + html(v) + "</dd>";
}

// The halo exchanges of a spatially split run, per split layer: "" when no layer has one.
std::string halo_table(const std::vector<ReportLayer>& layers) {
  std::ostringstream o;
  for (const ReportLayer& l : layers) {
    if (l.halo.empty()) continue;
    o << "<tr><td class=\"l name\">" << html(l.name) << "</td><td>" << num(l.halo_exchange_ms, 3)
      << "</td><td>" << num(l.halo_exposed_ms, 3) << "</td><td>"
      << (finite(l.halo_hidden_fraction) ? pct(l.halo_hidden_fraction, 1) : "\xE2\x80\x93")
      << "</td><td class=\"l\">" << html(l.halo) << "</td></tr>";
  }
  if (o.str().empty()) return "";
  return "<h3>Halo exchanges (spatial split)</h3><p>Per step, one rank: from posting the "
         "messages to their completion, the part the layer waited for, and the part hidden "
         "behind its compute.</p><table id=\"halo-table\"><tr><th class=\"l\">layer</th>"
         "<th>exchange ms</th><th>exposed ms</th><th>hidden</th><th class=\"l\">how</th></tr>" +
         o.str() + "</table>";
}

std::string utc_now() {
  const std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

double ReportTime::compute_s() const {
  return std::max(0.0, steps_s - data_wait_s - allreduce_exposed_s);
}

std::vector<ReportLayer> report_layers(const std::vector<OpProfile>& ops, int64_t steps,
                                       double peak_gflops) {
  std::vector<ReportLayer> rows;
  rows.reserve(ops.size());
  const double n = static_cast<double>(steps);
  for (const OpProfile& p : ops) {
    ReportLayer r;
    r.name = p.name;
    r.kind = p.kind;
    const double fwd = p.flops.forward, bwd = p.flops.backward_data + p.flops.backward_weights;
    r.forward_ms = steps > 0 ? 1e3 * p.forward_s / n : kReportNaN;
    r.backward_ms = steps > 0 ? 1e3 * p.backward_s / n : kReportNaN;
    r.gflop_per_step = (fwd + bwd) / 1e9;
    // A rate needs a measured time: an op too quick for the clock (or never run) has none.
    auto rate = [&](double flops, double seconds) {
      return steps > 0 && seconds > 0 ? flops * n / seconds / 1e9 : kReportNaN;
    };
    r.gflops = rate(fwd + bwd, p.forward_s + p.backward_s);
    r.forward_gflops = rate(fwd, p.forward_s);
    r.backward_gflops = rate(bwd, p.backward_s);
    if (finite(peak_gflops) && peak_gflops > 0 && finite(r.gflops))
      r.percent_of_peak = 100.0 * r.gflops / peak_gflops;
    rows.push_back(std::move(r));
  }
  return rows;
}

void add_halo_layers(std::vector<ReportLayer>& rows,
                     const std::vector<SpatialSplit::HaloLayer>& halo, int64_t steps) {
  const double n = static_cast<double>(std::max<int64_t>(steps, 1));
  for (const auto& h : halo)
    for (ReportLayer& r : rows)
      if (r.name == h.layer) {
        r.halo = h.overlap;
        r.halo_exchange_ms = 1e3 * h.transfer_s / n;
        r.halo_exposed_ms = 1e3 * h.exposed_s / n;
        r.halo_hidden_fraction = h.exchanges > 0 ? h.hidden_fraction : kReportNaN;
      }
}

ReportTime report_time(const std::vector<ReportEpoch>& epochs) {
  ReportTime t;
  for (const ReportEpoch& e : epochs) {
    t.steps_s += e.train_seconds;
    t.data_wait_s += e.data_wait_s;
    t.allreduce_s += e.allreduce_s;
    t.allreduce_exposed_s += e.allreduce_exposed_s;
    t.validation_s += std::max(0.0, e.seconds - e.train_seconds);
  }
  return t;
}

ReportPeak measure_report_peak(Backend& backend, int threads, int64_t n, int iters) {
  const auto t0 = std::chrono::steady_clock::now();
  const PeakRate g = backend.peak(DType::f32, n, iters);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ReportPeak p;
  const std::string what = backend.name() + " fp32 matmul " + std::to_string(n) + "\xC2\xB3 with " +
                           std::to_string(threads) + " thread" + (threads == 1 ? "" : "s") +
                           " (the code of `crest bench peak`)";
  if (!g.supported) {
    p.source = "none";
    p.how = what + " has no optimised implementation on this CPU (" + g.implementation +
            "): no peak to compare with";
    return p;
  }
  p.gflops = g.gflops;
  p.source = "measured";
  p.how = "measured right after the run: " + what + ", " + g.implementation + ", best of " +
          std::to_string(iters) + " after a warm-up, " + num(took, 2) + " s";
  return p;
}

nlohmann::json report_json(const PerformanceReport& r) {
  using nlohmann::json;
  json j;
  j["format"] = "crest performance report";
  j["version"] = 1;
  j["crest_version"] = CREST_VERSION;
  j["created"] = r.created;
  const ReportRun& u = r.run;
  j["run"] = {{"source", u.source},
              {"model", u.model},
              {"config", u.config},
              {"backend", u.backend},
              {"isa", u.isa},
              {"status", u.status},
              {"ranks", u.ranks},
              {"nodes", u.nodes},
              {"threads_per_rank", u.threads},
              {"batch_per_rank", u.batch_per_rank},
              {"global_batch", u.global_batch},
              {"parameter_count", u.parameter_count},
              {"steps_per_epoch", u.steps_per_epoch},
              {"train_samples", u.train_samples},
              {"eval_samples", u.eval_samples},
              {"train_gflop_per_step", u.train_flops_per_step / 1e9},
              {"samples_per_s", jnum(u.samples_per_s)},
              {"step_s", jnum(u.step_s)},
              {"step_s_median", jnum(u.step_s_median)}};
  j["peak"] = {{"gflops", jnum(r.peak.gflops)},
               {"source", r.peak.source},
               {"how", r.peak.how},
               {"dtype", "f32"}};
  json epochs = json::array();
  for (const ReportEpoch& e : r.epochs) {
    epochs.push_back({{"epoch", e.epoch},
                      {"lr", jnum(e.lr)},
                      {"train_loss", jnum(e.train_loss)},
                      {"validated", e.validated},
                      {"val_loss", e.validated ? jnum(e.val_loss) : json(nullptr)},
                      {"seconds", jnum(e.seconds)},
                      {"train_seconds", jnum(e.train_seconds)},
                      {"samples_per_s", jnum(e.samples_per_s)},
                      {"data_wait_s", jnum(e.data_wait_s)},
                      {"allreduce_s", jnum(e.allreduce_s)},
                      {"allreduce_exposed_s", jnum(e.allreduce_exposed_s)}});
    for (size_t k = 0; k < u.metrics.size(); ++k)
      epochs.back()["val_" + u.metrics[k].name] =
          k < e.val_metrics.size() ? jnum(e.val_metrics[k]) : json(nullptr);
  }
  j["epochs"] = std::move(epochs);
  const ReportTime& t = r.time;
  j["time"] = {{"steps_s", jnum(t.steps_s)},
               {"compute_s", jnum(t.compute_s())},
               {"data_wait_s", jnum(t.data_wait_s)},
               {"allreduce_s", jnum(t.allreduce_s)},
               {"allreduce_exposed_s", jnum(t.allreduce_exposed_s)},
               {"validation_s", jnum(t.validation_s)}};
  j["profiled_steps"] = r.profiled_steps;
  json layers = json::array();
  for (const ReportLayer& l : r.layers) {
    json row = {{"name", l.name},
                {"kind", l.kind},
                {"forward_ms", jnum(l.forward_ms)},
                {"backward_ms", jnum(l.backward_ms)},
                {"gflop_per_step", jnum(l.gflop_per_step)},
                {"gflops", jnum(l.gflops)},
                {"forward_gflops", jnum(l.forward_gflops)},
                {"backward_gflops", jnum(l.backward_gflops)},
                {"percent_of_peak", jnum(l.percent_of_peak)}};
    if (!l.halo.empty())
      row["halo"] = {{"overlap", l.halo},
                     {"exchange_ms", jnum(l.halo_exchange_ms)},
                     {"exposed_ms", jnum(l.halo_exposed_ms)},
                     {"hidden_fraction", jnum(l.halo_hidden_fraction)}};
    layers.push_back(std::move(row));
  }
  j["layers"] = std::move(layers);
  j["notes"] = r.notes;
  return j;
}

std::string report_html(const PerformanceReport& r) {
  const ReportRun& u = r.run;
  std::ostringstream o;
  const std::string heading = u.source + " \xC2\xB7 " + u.model;
  // The CSP forbids every fetch (scripts, images, fonts, frames): the page can only show what
  // it carries, and a browser reports a violation if anything in it tried to reach out.
  o << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
       "'unsafe-inline'\">\n"
    << "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
    << "<title>crest performance report: " << html(heading) << "</title>\n<style>" << kCss
    << "</style>\n</head>\n<body>\n";
  o << "<header><h1>crest performance report</h1><p class=\"sub\">" << html(heading) << " \xC2\xB7 "
    << html(r.created) << "</p></header>\n";

  // Run facts.
  o << "<section id=\"run\"><h2>Run</h2><dl class=\"facts\">";
  o << fact("command", u.source) << fact("config", u.config.empty() ? "\xE2\x80\x93" : u.config)
    << fact("status", u.status)
    << fact("backend", u.isa.empty() ? u.backend : u.backend + " (" + u.isa + ")")
    << fact("ranks", std::to_string(u.ranks) + " on " + std::to_string(u.nodes) + " node" +
                         (u.nodes == 1 ? "" : "s") + ", " + std::to_string(u.threads) +
                         " compute thread" + (u.threads == 1 ? "" : "s") + " per rank")
    << fact("batch", std::to_string(u.batch_per_rank) + " per rank, " +
                         std::to_string(u.global_batch) + " global")
    << fact("parameters", std::to_string(u.parameter_count))
    << fact("work per step",
            num(u.train_flops_per_step / 1e9, 4) + " GFLOP per rank (forward + backward)");
  if (u.steps_per_epoch > 0)
    o << fact("per epoch", std::to_string(u.steps_per_epoch) + " steps, " +
                               std::to_string(u.train_samples) + " training samples, " +
                               std::to_string(u.eval_samples) + " validation samples");
  o << fact("throughput", num(u.samples_per_s, 4) + " samples/s (job-wide)")
    << fact("step time",
            num(u.step_s * 1e3, 4) + " ms" +
                (finite(u.step_s_median) ? " best, " + num(u.step_s_median * 1e3, 4) + " ms median"
                                         : ""));
  if (finite(u.step_s) && u.step_s > 0 && u.train_flops_per_step > 0)
    o << fact(
        "achieved",
        num(u.train_flops_per_step / u.step_s / 1e9, 4) + " GFLOP/s per rank" +
            (finite(r.peak.gflops) && r.peak.gflops > 0
                 ? " = " + pct(u.train_flops_per_step / u.step_s / 1e9, r.peak.gflops) + " of peak"
                 : ""));
  o << fact("peak", finite(r.peak.gflops)
                        ? num(r.peak.gflops, 4) + " GFLOP/s (" + r.peak.source + ")"
                        : "none")
    << fact("peak source", r.peak.how);
  o << "</dl></section>\n";

  if (!r.notes.empty()) {
    o << "<section id=\"notes\"><h2>Notes</h2><ul class=\"notes\">";
    for (const std::string& n : r.notes) o << "<li>" << html(n) << "</li>";
    o << "</ul></section>\n";
  }

  // Curves and throughput per epoch.
  std::vector<int> xs;
  std::vector<double> train_loss, val_loss, sps;
  std::vector<std::vector<double>> val_metrics(u.metrics.size());
  bool validated = false;
  for (const ReportEpoch& e : r.epochs) {
    xs.push_back(e.epoch);
    train_loss.push_back(e.train_loss);
    val_loss.push_back(e.validated ? e.val_loss : kReportNaN);
    for (size_t k = 0; k < u.metrics.size(); ++k)
      val_metrics[k].push_back(k < e.val_metrics.size() ? e.val_metrics[k] : kReportNaN);
    sps.push_back(e.samples_per_s);
    validated = validated || e.validated;
  }
  o << "<section id=\"curves\"><h2>Training curves</h2>";
  if (r.epochs.empty()) {
    o << "<p class=\"empty\">No epochs: a benchmark of single steps on random data has no loss "
         "curve.</p>";
  } else {
    o << "<div class=\"charts\">";
    std::vector<Series> loss{{"train loss", kTrainColor, train_loss}};
    if (validated) loss.push_back({"validation loss", kValColor, val_loss});
    o << line_chart("chart-loss", "Loss per epoch", "loss", xs, loss);
    for (size_t k = 0; validated && k < u.metrics.size(); ++k) {
      const std::string label = upper(u.metrics[k].name);
      o << line_chart("chart-" + u.metrics[k].name, "Validation " + label + " per epoch",
                      u.metrics[k].title, xs, {{"validation " + label, kValColor, val_metrics[k]}});
    }
    o << "</div>";
    if (!validated)
      o << "<p class=\"empty\">No validation in this run (data.n_valid: 0): no validation loss or "
           "metrics.</p>";
  }
  o << "</section>\n<section id=\"throughput\"><h2>Throughput</h2>";
  if (r.epochs.empty())
    o << "<p>" << html(num(u.samples_per_s, 4)) << " samples/s from the best of "
      << r.profiled_steps << " timed steps.</p>";
  else
    o << bar_chart("chart-throughput", "Training throughput per epoch", "samples/s", xs, sps,
                   kTrainColor);

  // Time breakdown: per epoch and in total.
  o << "</section>\n<section id=\"time\"><h2>Where the time went</h2>";
  const ReportTime& t = r.time;
  std::vector<HBarRow> trows;
  for (const ReportEpoch& e : r.epochs) {
    const double compute = std::max(0.0, e.train_seconds - e.data_wait_s - e.allreduce_exposed_s);
    trows.push_back({"epoch " + std::to_string(e.epoch),
                     {compute, e.data_wait_s, e.allreduce_exposed_s,
                      std::max(0.0, e.seconds - e.train_seconds)},
                     num(e.seconds, 3) + " s"});
  }
  trows.push_back(
      {r.epochs.empty() ? std::to_string(r.profiled_steps) + " timed steps" : "whole run",
       {t.compute_s(), t.data_wait_s, t.allreduce_exposed_s, t.validation_s},
       num(t.steps_s + t.validation_s, 3) + " s"});
  o << hbar_chart("chart-time", "Time: compute, data wait, exposed allreduce, validation",
                  "seconds", trows, {"compute", "data wait", "exposed allreduce", "validation"},
                  {kComputeColor, kWaitColor, kAllreduceColor, kValidColor});
  o << "<table id=\"time-table\"><tr><th class=\"l\">part</th><th>seconds</th><th>share of "
       "training steps</th></tr>"
    << "<tr><td class=\"l\">training steps</td><td>" << num(t.steps_s, 4) << "</td><td>"
    << pct(t.steps_s, t.steps_s) << "</td></tr><tr><td class=\"l\">compute (the rest)</td><td>"
    << num(t.compute_s(), 4) << "</td><td>" << pct(t.compute_s(), t.steps_s)
    << "</td></tr><tr><td class=\"l\">data wait</td><td>" << num(t.data_wait_s, 4) << "</td><td>"
    << pct(t.data_wait_s, t.steps_s) << "</td></tr><tr><td class=\"l\">allreduce, exposed</td><td>"
    << num(t.allreduce_exposed_s, 4) << "</td><td>" << pct(t.allreduce_exposed_s, t.steps_s)
    << "</td></tr><tr><td class=\"l\">allreduce, running (hidden "
    << pct(t.allreduce_s - t.allreduce_exposed_s, t.allreduce_s) << ")</td><td>"
    << num(t.allreduce_s, 4) << "</td><td>" << pct(t.allreduce_s, t.steps_s)
    << "</td></tr><tr><td class=\"l\">validation (outside the steps)</td><td>"
    << num(t.validation_s, 4) << "</td><td>\xE2\x80\x93</td></tr></table>";
  if (u.ranks == 1) o << "<p class=\"empty\">One rank: no gradient allreduce.</p>";

  if (!r.epochs.empty()) {
    o << "<h3>Per epoch</h3><table id=\"epoch-table\"><tr><th>epoch</th><th>learning "
         "rate</th><th>train loss</th>"
         "<th>val loss</th>";
    for (const ReportMetric& m : u.metrics) o << "<th>val " << html(upper(m.name)) << "</th>";
    o << "<th>samples/s</th><th>steps s</th><th>data wait s</th>"
         "<th>allreduce s</th><th>exposed s</th><th>epoch s</th></tr>";
    for (const ReportEpoch& e : r.epochs) {
      o << "<tr><td>" << e.epoch << "</td><td>" << num(e.lr, 4) << "</td><td>"
        << num(e.train_loss, 5) << "</td><td>"
        << (e.validated ? num(e.val_loss, 5) : "\xE2\x80\x93") << "</td><td>";
      for (size_t k = 0; k < u.metrics.size(); ++k)
        o << (k < e.val_metrics.size() ? num(e.val_metrics[k], 5) : "\xE2\x80\x93") << "</td><td>";
      o << num(e.samples_per_s, 4) << "</td><td>" << num(e.train_seconds, 4) << "</td><td>"
        << num(e.data_wait_s, 3) << "</td><td>" << num(e.allreduce_s, 3) << "</td><td>"
        << num(e.allreduce_exposed_s, 3) << "</td><td>" << num(e.seconds, 4) << "</td></tr>";
    }
    o << "</table>";
  }

  // Layers.
  o << "</section>\n<section id=\"layers\"><h2>Layers</h2>";
  if (r.layers.empty()) {
    o << "<p class=\"empty\">No per-layer profile in this run.</p>";
  } else {
    double layer_ms = 0;
    std::vector<HBarRow> lrows, grows;
    for (const ReportLayer& l : r.layers) {
      const double ms =
          (finite(l.forward_ms) ? l.forward_ms : 0) + (finite(l.backward_ms) ? l.backward_ms : 0);
      layer_ms += ms;
      lrows.push_back({l.name, {l.forward_ms, l.backward_ms}, num(ms, 3) + " ms"});
      grows.push_back({l.name,
                       {l.gflops},
                       finite(l.percent_of_peak) ? pct(l.percent_of_peak, 100) : num(l.gflops, 3)});
    }
    o << "<p>Means over " << r.profiled_steps << " profiled training step"
      << (r.profiled_steps == 1 ? "" : "s") << " of one rank; the layers add up to "
      << html(num(layer_ms, 4)) << " ms per step";
    if (finite(u.step_s) && u.step_s > 0)
      o << " of a " << html(num(u.step_s * 1e3, 4)) << " ms step";
    o << ". % of peak divides a layer's GFLOP/s by the peak figure in the run facts: a measured "
         "GEMM rate, "
         "not the chip's theoretical peak, so a layer measured while the machine was quieter than "
         "during the "
         "peak measurement can pass 100%.</p>";
    o << hbar_chart("chart-layer-time", "Forward and backward time per layer and step",
                    "milliseconds per step", lrows, {"forward", "backward"},
                    {kForwardColor, kBackwardColor});
    const bool peak = finite(r.peak.gflops) && r.peak.gflops > 0;
    o << hbar_chart("chart-layer-gflops", "Achieved GFLOP/s per layer (forward + backward)",
                    "GFLOP/s", grows, {"GFLOP/s"}, {kComputeColor},
                    peak ? r.peak.gflops : kReportNaN,
                    peak ? "peak " + num(r.peak.gflops, 4) + " GFLOP/s" : "");
    o << "<table id=\"layer-table\"><tr><th>#</th><th class=\"l\">layer</th><th "
         "class=\"l\">kind</th>"
         "<th>forward ms</th><th>backward ms</th><th>total ms</th><th>share</th><th>GFLOP/step</th>"
         "<th>GFLOP/s</th><th class=\"l\">% of peak</th></tr>";
    for (size_t i = 0; i < r.layers.size(); ++i) {
      const ReportLayer& l = r.layers[i];
      const double ms =
          (finite(l.forward_ms) ? l.forward_ms : 0) + (finite(l.backward_ms) ? l.backward_ms : 0);
      o << "<tr><td>" << i + 1 << "</td><td class=\"l name\" title=\"" << html(l.name) << "\">"
        << html(l.name) << "</td><td class=\"l\">" << html(l.kind) << "</td><td>"
        << num(l.forward_ms, 4) << "</td><td>" << num(l.backward_ms, 4) << "</td><td>" << num(ms, 4)
        << "</td><td>" << pct(ms, layer_ms) << "</td><td>" << num(l.gflop_per_step, 4)
        << "</td><td>" << num(l.gflops, 4) << "</td><td class=\"l\">";
      if (finite(l.percent_of_peak))
        o << num(l.percent_of_peak, 3)
          << "%<span class=\"bar\" style=\"width:" << c1(std::clamp(l.percent_of_peak, 0.0, 100.0))
          << "px\"></span>";
      else
        o << "\xE2\x80\x93";
      o << "</td></tr>";
    }
    o << "</table>";
    o << halo_table(r.layers);
  }
  o << "</section>\n<footer>Written by crest " << CREST_VERSION << " at " << html(r.created)
    << ". The same numbers are in report.json beside this page; docs/report.md explains "
       "them.</footer>\n</body>\n</html>\n";
  return o.str();
}

void check_report_dir(const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec))
    throw_input(dir + ": cannot write the report there: it exists and is not a directory");
  std::filesystem::create_directories(dir, ec);
  if (ec) throw_input(dir + ": cannot create the report directory: " + ec.message());
  // Creating (and dropping) the temporary file the writer will use proves the directory writable.
  AtomicOutputFile probe(dir + "/report.json");
  probe.abandon();
}

std::string write_report(const std::string& dir, const PerformanceReport& report) {
  PerformanceReport r = report;
  if (r.created.empty()) r.created = utc_now();
  check_report_dir(dir);
  // Invalid UTF-8 in a name is replaced rather than refused: a report must not fail on it.
  write_file_atomically(
      dir + "/report.json",
      report_json(r).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  const std::string page = dir + "/report.html";
  write_file_atomically(page, report_html(r));
  return page;
}

}  // namespace crest

namespace crest {

std::string svg_line_chart(const std::string& id, const std::string& title,
                           const std::string& y_label, const std::vector<int>& x,
                           const std::vector<ChartSeries>& series) {
  std::vector<Series> s;
  for (const auto& c : series) s.push_back({c.name, c.color, c.y});
  return line_chart(id, title, y_label, x, s);
}

std::string html_escape(const std::string& s) { return html(s); }

const char* report_css() { return kCss; }

std::string chart_color(size_t i) {
  static const char* kPalette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return kPalette[i % (sizeof kPalette / sizeof kPalette[0])];
}

}  // namespace crest
