#include "crest/dist/timeline.hpp"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "crest/core/atomic_file.hpp"
#include "crest/core/error.hpp"

namespace crest {

double Timeline::now() { return steady_seconds(); }

Timeline::Timeline(Communicator& comm, std::string path, size_t max_events)
    : path_(std::move(path)), max_events_(max_events) {
  if (path_.empty()) return;
  // A bad path is found now, not after hours of training: the directory must exist.
  if (comm.rank() == 0) {
    const std::filesystem::path dir = std::filesystem::path(path_).parent_path();
    std::error_code ec;
    if (!dir.empty() && !std::filesystem::is_directory(dir, ec))
      throw_input(path_ + ": cannot write the timeline there: " + dir.string() +
                  " is not a directory");
  }
  comm.barrier();
  origin_ = now();
}

void Timeline::span(const std::string& name, Row row, double start, double end,
                    const std::string& args) {
  if (path_.empty()) return;
  if (events_.size() >= max_events_) {
    truncated_ = true;
    return;
  }
  char head[160];
  std::snprintf(head, sizeof head, "\"ph\":\"X\",\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f",
                static_cast<int>(row), (start - origin_) * 1e6, std::max(0.0, end - start) * 1e6);
  std::string e = "{\"name\":" + nlohmann::json(name).dump() + "," + head;
  if (!args.empty()) e += ",\"args\":" + args;
  e += "}";
  events_.push_back(std::move(e));
}

void Timeline::write(Communicator& comm) {
  if (path_.empty()) return;
  // One text per rank: its events joined, each still missing the pid.
  std::string mine;
  for (const auto& e : events_) mine += e + "\n";
  if (truncated_)
    mine += "{\"name\":\"timeline truncated: " + std::to_string(max_events_) +
            " events recorded, later ones dropped\",\"ph\":\"i\",\"s\":\"p\",\"tid\":0,\"ts\":0}\n";
  std::vector<std::byte> bytes(mine.size());
  if (!mine.empty()) std::memcpy(bytes.data(), mine.data(), mine.size());
  const auto parts = comm.allgather_parts(bytes);
  if (comm.rank() != 0) return;
  std::string out = "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  bool first = true;
  auto add = [&](const std::string& e) {
    out += (first ? "" : ",\n") + e;
    first = false;
  };
  for (size_t r = 0; r < parts.size(); ++r) {
    const std::string pid = std::to_string(r);
    add("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" + pid + ",\"args\":{\"name\":\"rank " +
        pid + "\"}}");
    add("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + pid +
        ",\"tid\":0,\"args\":{\"name\":\"compute\"}}");
    add("{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" + pid +
        ",\"tid\":1,\"args\":{\"name\":\"communication\"}}");
    const std::string text(reinterpret_cast<const char*>(parts[r].data()), parts[r].size());
    size_t at = 0;
    for (size_t nl; (nl = text.find('\n', at)) != std::string::npos; at = nl + 1)
      add("{\"pid\":" + pid + "," +
          text.substr(at + 1, nl - at - 1));  // splice the pid in after '{'
  }
  out += "\n]}\n";
  write_file_atomically(path_, out);
}

}  // namespace crest
