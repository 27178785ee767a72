// How a backend chooses the memory layouts of its convolutions: by its fixed rule (the default),
// or by measuring the candidates once per machine and problem (crest.autotune, --autotune;
// docs/performance.md "Layouts chosen by measurement"). A backend without layout choices ignores
// it.
#pragma once
#include <string>

namespace crest {

struct LayoutTuning {
  // Time every candidate layout of each convolution and keep the fastest (a cached choice is
  // used without timing).
  bool measure = false;
  // The per-machine cache of choices; "" = $CREST_LAYOUT_CACHE, else
  // $XDG_CACHE_HOME/crest/layouts.json, else ~/.cache/crest/layouts.json.
  std::string cache_file;
  // This run's choices, written as they are made (a training run's directory keeps them); ""
  // = none.
  std::string record_file;
  // Resume: the choices in record_file come first, whatever the cache or a measurement says, so
  // the resumed run computes with the layouts (and so the rounding) of the run it continues.
  bool reuse_record = false;
};

}  // namespace crest
