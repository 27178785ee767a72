#include "crest/data/validate.hpp"

#include <algorithm>
#include <filesystem>
#include <map>
#include <ostream>
#include <sstream>

#include "crest/core/cpus.hpp"
#include "crest/core/error.hpp"
#include "crest/core/name_registry.hpp"
#include "crest/core/parallel_for.hpp"
#include "crest/core/progress.hpp"
#include "crest/core/units.hpp"
#include "crest/data/data_family.hpp"

namespace crest {
namespace {

namespace fs = std::filesystem;

bool has_splits(const std::string& dir) {
  std::error_code ec;
  return fs::is_directory(fs::path(dir) / "train", ec) ||
         fs::is_directory(fs::path(dir) / "validation", ec);
}

// A layout of a family, as dataset_files found it.
struct Found {
  const DataFamily* family = nullptr;
  const SampleFileLayout* layout = nullptr;
};

// The first layout (families by name, layouts in their order) that `name` matches, among
// `families`; none: a file of no sample layout (a label companion, a README).
Found layout_of(const std::string& name, const std::vector<const DataFamily*>& families) {
  for (const DataFamily* f : families)
    for (const SampleFileLayout& l : f->layouts)
      if (l.matches(name)) return {f, &l};
  return {};
}

std::string patterns(const std::vector<const DataFamily*>& families) {
  std::string out;
  for (const DataFamily* f : families)
    for (const SampleFileLayout& l : f->layouts) out += (out.empty() ? "" : ", ") + l.pattern;
  return out;
}

// The split directories to check, and the files of each, all of one layout.
std::vector<std::string> dataset_files(const std::string& dir, Found& found,
                                       const std::string& format) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw_input(dir + ": not a directory");
  std::vector<const DataFamily*> families;
  if (!format.empty()) {
    const auto names = data_family_names();
    if (std::find(names.begin(), names.end(), format) == names.end())
      throw_usage("validate: --format must be one of " + join_names(names) + ", got '" + format +
                  "'");
    families.push_back(&find_data_family(format));
  } else {
    for (const auto& name : data_family_names()) families.push_back(&find_data_family(name));
  }
  std::vector<fs::path> dirs;
  for (const char* split : {"train", "validation", "val"})  // val: torchvision's ImageNet
    if (fs::is_directory(fs::path(dir) / split, ec)) dirs.push_back(fs::path(dir) / split);
  if (dirs.empty()) dirs.push_back(dir);
  // One level of subdirectories too: an image split's class folders.
  for (size_t k = 0, n = dirs.size(); k < n; ++k)
    for (fs::directory_iterator it(dirs[k], ec), end; !ec && it != end; it.increment(ec))
      if (it->is_directory(ec) && !it->path().filename().string().starts_with("."))
        dirs.push_back(it->path());
  std::map<std::string, std::pair<Found, std::vector<std::string>>> by_layout;
  for (const auto& d : dirs)
    for (fs::directory_iterator it(d, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!it->is_regular_file(ec) || name.starts_with(".")) continue;
      const Found f = layout_of(name, families);
      if (!f.layout) continue;
      auto& entry = by_layout[f.layout->name];
      entry.first = f;
      entry.second.push_back(it->path().string());
    }
  if (ec) throw_input(dir + ": cannot list: " + ec.message());
  if (by_layout.empty())
    throw_input(dir + ": no sample files found (" + patterns(families) +
                std::string(format.empty() ? "" : " for " + format) + ")");
  if (by_layout.size() > 1)
    throw_input(dir + ": holds sample files of several formats; pass --format or separate them");
  found = by_layout.begin()->second.first;
  auto files = by_layout.begin()->second.second;
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::string ValidateReport::summary() const {
  std::ostringstream s;
  s << "validated " << files << " files (" << format << ", sample shape " << sample_shape.str()
    << "): " << samples << " good samples, " << human_bytes(static_cast<double>(bytes)) << ", "
    << errors.size() << " bad files";
  return s.str();
}

ValidateReport validate_dataset(const ValidateOptions& o, std::ostream& log) {
  ValidateReport r;
  Found found;
  const std::vector<std::string> files = dataset_files(o.dir, found, o.format);
  std::vector<SampleFileFacts> facts(files.size());
  std::vector<std::string> errors(files.size());
  Progress progress("validate", static_cast<int64_t>(files.size()));
  const int threads = o.threads > 0 ? o.threads : usable_cpus();
  std::vector<std::vector<std::byte>> records(
      static_cast<size_t>(parallel_for_workers(files.size(), threads)));  // one per worker
  // A bad file is a finding, not a failure: every file is checked and its error kept.
  parallel_for(files.size(), threads, [&](size_t i, int worker) {
    try {
      facts[i] = found.layout->check(files[i], o, records[static_cast<size_t>(worker)]);
    } catch (const Error& e) {
      std::string what = e.what();
      // Messages from the readers start with the path; the report lists the path separately.
      if (what.starts_with(files[i] + ": ")) what = what.substr(files[i].size() + 2);
      errors[i] = what;
    } catch (const std::exception& e) {
      errors[i] = e.what();
    }
    progress.advance(1, facts[i].bytes);
  });

  // The expected shape: given, or the most common one among the readable files.
  if (o.sample_shape) {
    r.sample_shape = *o.sample_shape;
  } else {
    std::map<std::string, std::pair<int, Shape>> votes;
    for (size_t i = 0; i < facts.size(); ++i)
      if (errors[i].empty()) {
        auto& v = votes[facts[i].shape.str()];
        ++v.first;
        v.second = facts[i].shape;
      }
    int best = 0;
    for (const auto& [key, v] : votes)
      if (v.first > best) {
        best = v.first;
        r.sample_shape = v.second;
      }
  }
  std::string variant;  // of the readable files (gzip TFRecords)
  for (size_t i = 0; i < files.size(); ++i) {
    const SampleFileFacts& f = facts[i];
    if (errors[i].empty() && f.shape != r.sample_shape)
      errors[i] = "sample shape " + f.shape.str() + " differs from the expected " +
                  r.sample_shape.str() +
                  (o.sample_shape ? " (--sample-shape)" : " (the majority of the files)");
    r.bytes += f.bytes;
    if (!f.variant.empty()) variant = f.variant;
    if (errors[i].empty())
      r.samples += f.samples;
    else
      r.errors.emplace_back(files[i], errors[i]);
  }
  r.files = static_cast<int64_t>(files.size());
  r.format = found.layout->name + (variant.empty() ? "" : "-" + variant);
  if (found.family->check_root && has_splits(o.dir))
    for (auto& problem : found.family->check_root(o.dir, r.sample_shape))
      r.errors.push_back(std::move(problem));
  progress.finish();
  r.seconds = progress.elapsed_s();
  log << r.summary() << "\n";
  for (const auto& [file, what] : r.errors) log << "  " << file << ": " << what << "\n";
  return r;
}

}  // namespace crest
