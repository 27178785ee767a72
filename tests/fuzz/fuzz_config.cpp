// Run configs: the YAML file and `crest train` overrides ("key.path=value"). The input is the
// file's text; the lines after a line "%%" are overrides, one per line. Loading validates the
// whole schema (every section, the model registry's keys, cross-field checks) and prints the
// resolved YAML, which must load again.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/train/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const size_t split = text.find("\n%%\n");
  const std::string yaml(text.substr(0, split));
  std::vector<std::string> overrides;
  if (split != std::string_view::npos) {
    std::string_view rest = text.substr(split + 4);
    while (!rest.empty()) {
      const size_t end = std::min(rest.find('\n'), rest.size());
      overrides.emplace_back(rest.substr(0, end));
      rest.remove_prefix(std::min(end + 1, rest.size()));
    }
  }
  crest::Config c;
  try {
    c = crest::load_config_text(yaml, "fuzz.yaml", overrides);
  } catch (const crest::Error&) {
    return 0;
  }
  // What crest resolved and wrote into the run directory must load again (the run's own record
  // of itself, and what a resume compares with): a failure here is a finding.
  try {
    (void)crest::load_config_text(c.resolved_yaml, "fuzz.yaml (resolved)", {});
  } catch (const crest::Error& e) {
    std::fprintf(stderr, "resolved config does not load again: %s\n%s\n", e.what(),
                 c.resolved_yaml.c_str());
    std::abort();
  }
  return 0;
}
