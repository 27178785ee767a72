// mlperf: submission info for the MLPerf log (docs/mlperf.md).
#include "config/sections.hpp"

namespace crest::config {

const Table<MlperfConfig>& mlperf_table() {
  using S = MlperfConfig;
  static const Table<S> t{"mlperf",
                          {string_field("org", &S::org),
                           {"division",
                            [](const SectionReader& r, S& s) {
                              if (auto d = r.opt_string("division")) {
                                if (*d != "closed" && *d != "open")
                                  r.fail("division", "expected closed or open, got " + quote(*d));
                                s.division = *d;
                              }
                            },
                            [](const S& s, Lines& l) {
                              if (!s.division.empty()) l.add("division", s.division);
                            }},
                           string_field("status", &S::status),
                           string_field("platform", &S::platform),
                           // crest addition
                           bool_field("stdout", &S::echo_stdout)},
                          {}};
  return t;
}

}  // namespace crest::config
