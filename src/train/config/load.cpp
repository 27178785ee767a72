// load_config: the file, the overrides applied to its tree, then every section read through its
// table, in the order the cross-section rules need (data before model before data.target_shape).
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/cross_section.hpp"
#include "config/model_section.hpp"
#include "config/overrides.hpp"
#include "config/schema.hpp"
#include "config/sections.hpp"
#include "crest/core/utf8.hpp"
#include "crest/train/config.hpp"

namespace crest {
namespace {

using namespace config;

// Opens section `t.section` of `top`, refuses keys its table lacks, and reads it into `out`.
template <typename S>
SectionReader read_section(const Source& src, const Section& top, const Table<S>& t, S& out) {
  Section s = open_section(src, top, t.section);
  check_known_keys(src, s, t.keys());
  SectionReader r(src, std::move(s));
  read_table(t, r, out);
  return r;
}

void require_sections(const Source& src, const Section& top) {
  for (const char* name : {"model", "data", "optimizer"})
    if (!top.entries.count(name))
      throw_input(src.name() + ": " + name + ": required section is missing");
}

std::string output_dir_of(const Source& src, const SectionReader& top) {
  if (auto v = top.opt_string("output_dir")) {
    if (v->empty()) top.fail("output_dir", "must not be empty");
    return *v;
  }
  return "runs/" + std::filesystem::path(src.name()).stem().string();
}

Config build(const Source& src, const YAML::Node& root) {
  if (!root.IsDefined() || root.IsNull()) throw_input(src.name() + ": the configuration is empty");
  const Section top = open_top(src, root);
  check_known_keys(src, top, *keys_of(""));
  require_sections(src, top);
  Config c;
  c.source = src.name();
  c.output_dir = output_dir_of(src, SectionReader(src, top));
  read_section(src, top, mlperf_table(), c.mlperf);
  c.mlperf.present = top.entries.count("mlperf") > 0;

  const SectionReader data = read_section(src, top, data_table(), c.data);
  const Section model = open_section(src, top, "model");
  c.model = read_model_section(src, model, model_values_from_data(data, model, c.data));
  bind_model_to_data(data, model, c.model, c.data);

  const SectionReader opt = read_section(src, top, optimizer_table(), c.optimizer);
  const auto schedule = top.entries.find("lr_schedule");
  const bool schedule_given = schedule != top.entries.end() && !schedule->second.value.IsNull();
  if (schedule_given) read_section(src, top, lr_schedule_table(), c.lr_schedule);
  resolve_learning_rate(opt, schedule_given, c);

  const SectionReader train = read_section(src, top, train_table(), c.train);
  default_task_metrics(train, c);
  read_section(src, top, runtime_table(), c.crest);
  default_loss_scaling(train, c);  // the precision's, so after the crest section
  const SectionReader dist = read_section(src, top, dist_table(), c.dist);
  resolve_spatial(dist, c);
  resolve_pipeline(dist, c);
  return c;
}

std::string read_text(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw_input(path + ": is a directory, not a config file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input(path + ": cannot read config file: " + std::strerror(errno));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// YAML text is Unicode; a byte that is not UTF-8 (a Latin-1 config) would otherwise be carried
// into the resolved config and fail the first checkpoint write (safetensors metadata is JSON).
void require_utf8(const std::string& text, const std::string& where) {
  const size_t at = invalid_utf8_at(text);
  if (at == std::string_view::npos) return;
  const size_t line_start = text.rfind('\n', at == 0 ? 0 : at - 1);
  const size_t column = at - (line_start == std::string::npos ? 0 : line_start + 1);
  const auto line = std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
  throw_input(where + ":" + std::to_string(line + 1) + ":" + std::to_string(column + 1) +
              ": not valid UTF-8 (a config is Unicode text; was it saved as Latin-1?)");
}

YAML::Node parse(const std::string& yaml, const std::string& source) {
  require_utf8(yaml, source);
  try {
    return YAML::Load(yaml);
  } catch (const YAML::Exception& e) {
    const std::string at = e.mark.line >= 0 ? ":" + std::to_string(e.mark.line + 1) + ":" +
                                                  std::to_string(e.mark.column + 1)
                                            : "";
    throw_input(source + at + ": YAML syntax error: " + e.msg);
  }
}

}  // namespace

Config load_config_text(const std::string& yaml, const std::string& source,
                        const std::vector<std::string>& overrides) {
  YAML::Node root = parse(yaml, source);
  // Checked before overrides, which would otherwise turn a scalar document into a map.
  if (root.IsDefined() && !root.IsNull() && !root.IsMap())
    throw_input(source + ": expected key: value lines at the top level, got " + describe(root));
  Source src(source);
  for (const auto& o : overrides) {
    require_utf8(o, source + ": override '" + o + "'");
    apply_override(src, root, o);
  }
  Config c = build(src, root);
  c.overrides = overrides;
  c.resolved_yaml = to_yaml(c);
  return c;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  return load_config_text(read_text(path), path, overrides);
}

std::string to_yaml(const Config& c) {
  std::string y = "# Resolved by crest from " + c.source;
  if (!c.overrides.empty()) {
    y += " with overrides:";
    for (const auto& o : c.overrides) y += " " + o;
  }
  y += "\n# Every setting is spelled out; loading this file gives the same configuration.\n";
  y += "output_dir: " + quote(c.output_dir) + "\n";
  if (c.mlperf.present) y += print_table(mlperf_table(), c.mlperf);
  y += print_table(data_table(), c.data);
  y += print_model_section(c.model);
  y += print_table(optimizer_table(), c.optimizer);
  y += print_table(lr_schedule_table(), c.lr_schedule);
  y += print_table(train_table(), c.train);
  y += print_table(runtime_table(), c.crest);
  y += print_table(dist_table(), c.dist);
  return y;
}

std::string scaling_name(LrScaling s) { return enum_name(s); }

}  // namespace crest
