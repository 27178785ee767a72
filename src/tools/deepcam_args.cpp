// Reading the DeepCAM reference's train.py arguments as its argparse parser does
// (deepcam_args.hpp).
#include "deepcam_args.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <optional>
#include <sstream>

#include "crest/core/error.hpp"

namespace crest::tools {
namespace {

[[noreturn]] void fail(const std::string& option, const std::string& message) {
  throw_usage("config from-args deepcam: " + option + ": " + message);
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// Python's int(): an optional sign, then digits.
int64_t to_int(const std::string& text, const std::string& option) {
  const char* begin = text.data() + (!text.empty() && text[0] == '+' ? 1 : 0);
  const char* end = text.data() + text.size();
  int64_t v = 0;
  const auto [ptr, ec] = std::from_chars(begin, end, v);
  if (ec != std::errc() || ptr != end || begin == end)
    fail(option, "expected an integer, got " + quoted(text));
  return v;
}

// Python's float(), finite values only (a NaN or infinite rate is no run).
double to_double(const std::string& text, const std::string& option) {
  char* end = nullptr;
  const double v = text.empty() ? 0 : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v))
    fail(option, "expected a finite number, got " + quoted(text));
  return v;
}

std::string choice(const std::string& text, const std::string& option,
                   const std::vector<std::string>& choices) {
  for (const auto& c : choices)
    if (text == c) return text;
  std::string list;
  for (const auto& c : choices) list += (list.empty() ? "" : ", ") + c;
  fail(option, "invalid choice " + quoted(text) + " (choose from " + list + ")");
}

// A value, not an option: argparse takes "-1" or "-.5" after an option as its value.
bool is_option_like(const std::string& token) {
  if (token.size() < 2 || token[0] != '-') return false;
  char* end = nullptr;
  std::strtod(token.c_str(), &end);
  return end != token.c_str() + token.size();
}

// One pair of quotes a shell did not remove (a value copied from a script and passed without a
// shell); the reference's values reach it unquoted.
std::string unquote(const std::string& v) {
  if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front())
    return v.substr(1, v.size() - 2);
  return v;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> parts;
  std::string part;
  std::istringstream in(text);
  while (std::getline(in, part, sep)) parts.push_back(part);
  if (!text.empty() && text.back() == sep) parts.emplace_back();
  return parts;
}

// The reference's StoreDictKeyPair, then what get_lr_schedule reads from it: "type" chooses the
// keys; a key the type does not read is refused (the reference would ignore it silently).
DeepcamLrScheduleArg parse_lr_schedule(const std::string& text) {
  const std::string option = "--lr_schedule";
  const std::string forms =
      " (expected type=multistep,milestones=\"800 1600\",decay_rate=0.1 or "
      "type=cosine_annealing,t_max=N[,eta_min=x])";
  std::map<std::string, std::string> kv;
  for (const auto& pair : split(text, ',')) {
    const auto parts = split(pair, '=');
    if (parts.size() != 2 || parts[0].empty())
      fail(option, quoted(pair) + " is not key=value" + forms);
    kv[parts[0]] = unquote(parts[1]);
  }
  DeepcamLrScheduleArg s;
  s.text = text;
  if (!kv.count("type")) fail(option, "type is missing" + forms);
  s.type = choice(kv["type"], option + " type", {"multistep", "cosine_annealing"});
  const bool multistep = s.type == "multistep";
  const std::vector<std::string> required =
      multistep ? std::vector<std::string>{"milestones", "decay_rate"}
                : std::vector<std::string>{"t_max"};
  for (const auto& key : required)
    if (!kv.count(key)) fail(option, s.type + " needs " + key + forms);
  for (const auto& [key, value] : kv) {
    const std::string what = option + " " + key;
    if (key == "type") continue;
    if (multistep && key == "milestones") {
      std::istringstream in(value);
      for (std::string m; in >> m;) s.milestones.push_back(to_int(m, what));
    } else if (multistep && key == "decay_rate") {
      s.decay_rate = to_double(value, what);
    } else if (!multistep && key == "t_max") {
      s.t_max = to_int(value, what);
    } else if (!multistep && key == "eta_min") {
      s.eta_min = to_double(value, what);
    } else {
      fail(option, quoted(key) + " is not a key of type " + s.type + forms);
    }
  }
  return s;
}

enum class Arity { flag, one, one_or_more, two };

struct ArgSpec {
  std::string name;
  Arity arity;
  std::function<void(DeepcamArgs&, const std::vector<std::string>&, const std::string&)> set;
};

using Values = std::vector<std::string>;

ArgSpec text_arg(const std::string& name, std::string DeepcamArgs::*m,
                 const std::vector<std::string>& choices = {}) {
  return {name, Arity::one, [=](DeepcamArgs& a, const Values& v, const std::string& o) {
            a.*m = choices.empty() ? v[0] : choice(v[0], o, choices);
          }};
}

ArgSpec optional_text_arg(const std::string& name, std::optional<std::string> DeepcamArgs::*m) {
  return {name, Arity::one,
          [=](DeepcamArgs& a, const Values& v, const std::string&) { a.*m = v[0]; }};
}

ArgSpec int_arg(const std::string& name, int64_t DeepcamArgs::*m) {
  return {name, Arity::one,
          [=](DeepcamArgs& a, const Values& v, const std::string& o) { a.*m = to_int(v[0], o); }};
}

ArgSpec double_arg(const std::string& name, double DeepcamArgs::*m) {
  return {name, Arity::one, [=](DeepcamArgs& a, const Values& v, const std::string& o) {
            a.*m = to_double(v[0], o);
          }};
}

// utils/parser.py, in its order, then the example scripts' --adam_eps.
const std::vector<ArgSpec>& arg_specs() {
  using A = DeepcamArgs;
  static const std::vector<ArgSpec> specs{
      text_arg("wireup_method", &A::wireup_method,
               {"dummy", "nccl-openmpi", "nccl-slurm", "nccl-slurm-pmi", "mpi"}),
      text_arg("wandb_certdir", &A::wandb_certdir),
      optional_text_arg("run_tag", &A::run_tag),
      optional_text_arg("output_dir", &A::output_dir),
      optional_text_arg("checkpoint", &A::checkpoint),
      text_arg("data_dir_prefix", &A::data_dir_prefix),
      int_arg("max_inter_threads", &A::max_inter_threads),
      int_arg("max_epochs", &A::max_epochs),
      int_arg("save_frequency", &A::save_frequency),
      int_arg("gradient_accumulation_frequency", &A::gradient_accumulation_frequency),
      int_arg("logging_frequency", &A::logging_frequency),
      int_arg("local_batch_size", &A::local_batch_size),
      {"channels", Arity::one_or_more,
       [](A& a, const Values& v, const std::string& o) {
         a.channels.clear();
         for (const auto& c : v) a.channels.push_back(to_int(c, o));
       }},
      text_arg("optimizer", &A::optimizer, {"Adam", "AdamW", "LAMB"}),
      double_arg("start_lr", &A::start_lr),
      {"optimizer_betas", Arity::two,
       [](A& a, const Values& v, const std::string& o) {
         a.optimizer_betas = {to_double(v[0], o), to_double(v[1], o)};
       }},
      double_arg("weight_decay", &A::weight_decay),
      int_arg("lr_warmup_steps", &A::lr_warmup_steps),
      double_arg("lr_warmup_factor", &A::lr_warmup_factor),
      {"lr_schedule", Arity::one,
       [](A& a, const Values& v, const std::string&) { a.lr_schedule = parse_lr_schedule(v[0]); }},
      double_arg("target_iou", &A::target_iou),
      text_arg("model_prefix", &A::model_prefix),
      int_arg("batchnorm_group_size", &A::batchnorm_group_size),
      {"resume_logging", Arity::flag,
       [](A& a, const Values&, const std::string&) { a.resume_logging = true; }},
      int_arg("seed", &A::seed),
      {"adam_eps", Arity::one,
       [](A& a, const Values& v, const std::string& o) { a.adam_eps = to_double(v[0], o); }},
  };
  return specs;
}

// An exact name, else the one name it is a prefix of (argparse's allow_abbrev).
const ArgSpec& find_spec(const std::string& name) {
  std::vector<const ArgSpec*> prefixed;
  for (const auto& s : arg_specs()) {
    if (s.name == name) return s;
    if (!name.empty() && s.name.rfind(name, 0) == 0) prefixed.push_back(&s);
  }
  if (prefixed.size() == 1) return *prefixed[0];
  if (prefixed.empty())
    fail("--" + name, "not an argument of the DeepCAM reference's train.py (utils/parser.py)");
  std::string list;
  for (const auto* s : prefixed) list += (list.empty() ? "--" : ", --") + s->name;
  fail("--" + name, "ambiguous: it could be " + list);
}

// The values an option takes: its `=value`, then the tokens after it that are not options.
Values take_values(const ArgSpec& spec, const std::optional<std::string>& inline_value,
                   const std::vector<std::string>& argv, size_t& i) {
  const std::string option = "--" + spec.name;
  if (spec.arity == Arity::flag) {
    if (inline_value) fail(option, "is a flag and takes no value, got " + quoted(*inline_value));
    return {};
  }
  Values v;
  if (inline_value) v.push_back(*inline_value);
  const size_t most = spec.arity == Arity::one ? 1 : spec.arity == Arity::two ? 2 : SIZE_MAX;
  while (v.size() < most && i + 1 < argv.size() && !is_option_like(argv[i + 1]))
    v.push_back(argv[++i]);
  if (v.empty()) fail(option, "expects a value");
  if (spec.arity == Arity::two && v.size() != 2)
    fail(option, "expects 2 values, got " + std::to_string(v.size()));
  return v;
}

}  // namespace

DeepcamArgs parse_deepcam_args(const std::vector<std::string>& argv) {
  DeepcamArgs args;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& token = argv[i];
    if (token.rfind("--", 0) != 0 || token.size() == 2)
      fail(quoted(token), "unexpected: train.py takes only --name value arguments");
    const size_t eq = token.find('=');
    const std::string name = token.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    std::optional<std::string> inline_value;
    if (eq != std::string::npos) inline_value = token.substr(eq + 1);
    const ArgSpec& spec = find_spec(name);
    const Values values = take_values(spec, inline_value, argv, i);
    spec.set(args, values, "--" + spec.name);
    args.given.insert(spec.name);
  }
  return args;
}

}  // namespace crest::tools
