// lr_schedule: the reference's schedule (linear or sqrt scaling, warmup, decay at epochs). Without
// the section, cross_section.cpp derives a constant rate from the optimizer.
#include "config/sections.hpp"

namespace crest::config {
namespace {

using S = LrScheduleConfig;

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
    if (l.base_batch_size > 0) print(l, out);
  };
  return f;
}

void check_schedule(const SectionReader& r, S& l) {
  if (l.scaling != LrScaling::none && l.base_batch_size <= 0)
    r.fail("base_batch_size", "required with scaling: " + enum_name(l.scaling) +
                                  " (the global batch size at which base_lr applies)");
}

}  // namespace

const Table<LrScheduleConfig>& lr_schedule_table() {
  static const Table<S> t{"lr_schedule",
                          {required(number_field("base_lr", &S::base_lr, positive())),
                           enum_field("scaling", &S::scaling), base_batch_field(),
                           int_field("n_warmup_epochs", &S::n_warmup_epochs, 0), decay_field()},
                          check_schedule};
  return t;
}

}  // namespace crest::config
