// lr_schedule: one of two families, chosen by the keys the section uses.
//  - per epoch (CosmoFlow's reference): base_lr, linear or sqrt scaling, warmup and decay epochs;
//  - per optimizer step (DeepCAM's reference, its argument names): start_lr, type multistep,
//    cosine_annealing or polynomial (MLPerf ResNet-50's), their settings, and a linear warmup
//    (crest/optim/step_lr_schedule.hpp).
// Without the section, cross_section.cpp derives a constant per-epoch rate from the optimizer.
#include <algorithm>
#include <vector>

#include "config/sections.hpp"
#include "crest/optim/lr_schedule_registry.hpp"

namespace crest::config {
namespace {

using S = LrScheduleConfig;

const std::vector<std::string> kEpochKeys = {"base_lr", "scaling", "base_batch_size",
                                             "n_warmup_epochs", "decay_schedule"};
// The per-step keys every type shares; the registered types add their own.
const std::vector<std::string> kSharedStepKeys = {"start_lr", "type", "lr_warmup_steps",
                                                  "lr_warmup_factor"};

std::vector<std::string> step_keys() {
  std::vector<std::string> keys = kSharedStepKeys;
  for (const auto& k : lr_schedule_keys()) keys.push_back(k);
  return keys;
}

// A row printed only for the family (and step type) that uses it.
Field<S> only_printed_if(Field<S> f, bool (*when)(const S&)) {
  auto print = f.print;
  f.print = [print, when](const S& s, Lines& l) {
    if (when(s)) print(s, l);
  };
  return f;
}
bool per_epoch(const S& l) { return !l.per_step; }
bool per_step(const S& l) { return l.per_step; }
// Whether the section's schedule type reads `key` (one of the types' own keys).
bool type_reads(const S& l, const std::string& key) {
  const LrScheduleType* t = find_lr_schedule_type_or_null(l.type);
  return l.per_step && t && std::find(t->keys.begin(), t->keys.end(), key) != t->keys.end();
}
bool warmed(const S& l) {
  const LrScheduleType* t = find_lr_schedule_type_or_null(l.type);
  return l.per_step && t && t->scheduler;
}
// A type's own key: read always (a key of another type is refused by check_step_keys), printed
// when the type reads it.
Field<S> type_key(Field<S> f) {
  auto print = f.print;
  f.print = [print, key = f.key](const S& s, Lines& l) {
    if (type_reads(s, key)) print(s, l);
  };
  return f;
}

// epoch: factor lines; the keys are data, not schema.
Field<S> decay_field() {
  return {
      "decay_schedule",
      [](const SectionReader& r, S& l) {
        const Entry* e = r.get("decay_schedule");
        if (!e) return;
        const std::string path = r.path_of("decay_schedule");
        if (!e->value.IsMap())
          r.fail("decay_schedule", "expected epoch: factor lines, got " + describe(e->value));
        for (auto kv = e->value.begin(); kv != e->value.end(); ++kv) {
          const std::string kpath = path + "." + (kv->first.IsScalar() ? kv->first.Scalar() : "?");
          const int64_t epoch =
              r.to_int(kpath, kv->first, kv->first, 0, std::numeric_limits<int32_t>::max());
          const double factor = r.to_double(kpath, kv->first, kv->second);
          if (factor <= 0)
            r.source().fail(kpath, kv->first,
                            "decay factor must be positive, got " + format_double(factor));
          if (!l.decay_schedule.emplace(static_cast<int>(epoch), factor).second)
            r.source().fail(kpath, kv->first, "epoch " + std::to_string(epoch) + " appears twice");
        }
      },
      [](const S& l, Lines& out) {
        if (!per_epoch(l)) return;
        if (l.decay_schedule.empty()) return out.add("decay_schedule", "{}");
        out.raw("  decay_schedule:");
        for (const auto& [epoch, factor] : l.decay_schedule)
          out.raw("    " + std::to_string(epoch) + ": " + format_double(factor));
      }};
}

Field<S> base_batch_field() {
  Field<S> f =
      int_field("base_batch_size", &S::base_batch_size, 1, std::numeric_limits<int64_t>::max());
  auto print = f.print;
  f.print = [print](const S& l, Lines& out) {
    if (per_epoch(l) && l.base_batch_size > 0) print(l, out);
  };
  return f;
}

Field<S> milestones_field() {
  return {"milestones",
          [](const SectionReader& r, S& l) {
            if (auto v = r.opt_int_list("milestones", 0)) l.milestones = *v;
          },
          [](const S& l, Lines& out) { out.add("milestones", list_text(l.milestones)); }};
}

// The reference's checker wants a warmup factor >= 1 (hpc 3.0.0 closed_deepcam.yaml).
NumberCheck at_least_one() {
  return [](double v) { return v >= 1 ? "" : "must be >= 1, got " + format_double(v); };
}

// The family is the one whose keys the section uses; a key of the other family is refused.
void check_one_family(const SectionReader& r, S& l) {
  const auto given = [&r](const std::vector<std::string>& keys) {
    std::vector<std::string> out;
    for (const auto& k : keys)
      if (r.has(k)) out.push_back(k);
    return out;
  };
  const auto step_keys = given(crest::config::step_keys()), epoch_keys = given(kEpochKeys);
  l.per_step = !step_keys.empty();
  if (l.per_step && !epoch_keys.empty())
    r.fail(epoch_keys.front(),
           "belongs to the per-epoch schedule (CosmoFlow's), but this section "
           "uses the per-step one (" +
               step_keys.front() + ", DeepCAM's); give the keys of one family only");
}

// Each step type takes only its own settings: a silently ignored hyperparameter is a wrong
// experiment.
void check_step_keys(const SectionReader& r, const S& l) {
  const LrScheduleType& t = find_lr_schedule_type(l.type);
  const std::string type = "type: " + l.type;
  for (const char* k : {"lr_warmup_steps", "lr_warmup_factor"})
    if (r.has(k) && !t.scheduler)
      r.fail(k, "not used by " + type +
                    " (only by a schedule with a type: the reference ignores the warmup without "
                    "one); remove it or set it to null");
  for (const auto& k : lr_schedule_keys())
    if (r.has(k) && !type_reads(l, k))
      r.fail(k, "not used by " + type + " (only by " + lr_schedules_taking(k) +
                    "); remove it or set it to null");
  if (!r.has("start_lr"))
    r.fail("start_lr", "required key is missing (the per-step schedule's rate)");
  for (const auto& k : t.required)
    if (!r.has(k)) r.fail(k, "required key is missing (" + type + ")");
}

void check_milestones(const SectionReader& r, const S& l) {
  const int64_t first = l.lr_warmup_steps > 0 ? 0 : 1;
  for (size_t k = 0; k < l.milestones.size(); ++k) {
    if (l.milestones[k] < first)
      r.fail("milestones",
             "a milestone 0 never applies without warmup (the reference's first "
             "step already counts 1); the first decay can be at milestone 1");
    if (k > 0 && l.milestones[k] <= l.milestones[k - 1])
      r.fail("milestones", "must be strictly increasing, got " + list_text(l.milestones));
  }
}

void check_schedule(const SectionReader& r, S& l) {
  check_one_family(r, l);
  if (l.per_step) {
    check_step_keys(r, l);
    if (type_reads(l, "milestones")) check_milestones(r, l);
    return;
  }
  if (!r.has("base_lr"))
    r.fail("base_lr", "required key is missing (or start_lr and the per-step keys, DeepCAM's)");
  if (l.scaling != LrScaling::none && l.base_batch_size <= 0)
    r.fail("base_batch_size", "required with scaling: " + enum_name(l.scaling) +
                                  " (the global batch size at which base_lr applies)");
}

}  // namespace

const Table<LrScheduleConfig>& lr_schedule_table() {
  static const Table<S> t{
      "lr_schedule",
      {// per epoch
       only_printed_if(number_field("base_lr", &S::base_lr, positive()), per_epoch),
       only_printed_if(enum_field("scaling", &S::scaling), per_epoch), base_batch_field(),
       only_printed_if(int_field("n_warmup_epochs", &S::n_warmup_epochs, 0), per_epoch),
       decay_field(),
       // per optimizer step
       only_printed_if(number_field("start_lr", &S::start_lr, positive()), per_step),
       only_printed_if(registered_name_field("type", &S::type, lr_schedule_names, false), per_step),
       type_key(milestones_field()),
       type_key(number_field("decay_rate", &S::decay_rate, positive_up_to(1))),
       type_key(bool_field("closed_form", &S::closed_form)),
       type_key(int_field("t_max", &S::t_max, 1, std::numeric_limits<int64_t>::max())),
       type_key(number_field("eta_min", &S::eta_min, non_negative())),
       type_key(int_field("decay_steps", &S::decay_steps, 1, std::numeric_limits<int64_t>::max())),
       type_key(number_field("end_lr", &S::end_lr, non_negative())),
       type_key(number_field("power", &S::power, positive())),
       only_printed_if(int_field("lr_warmup_steps", &S::lr_warmup_steps, 0,
                                 std::numeric_limits<int64_t>::max()),
                       warmed),
       only_printed_if(number_field("lr_warmup_factor", &S::lr_warmup_factor, at_least_one()),
                       warmed)},
      check_schedule};
  return t;
}

}  // namespace crest::config
