// crest bench allreduce --sizes 1K,1M,64M [--iters N] [--warmup W]: the communicator's float
// sum allreduce, one JSON line per message size, with nccl-tests' definitions:
//   time     the slowest rank's mean time per allreduce (a barrier lines the ranks up first)
//   algbw    bytes / time
//   busbw    algbw * 2 (n - 1) / n: the bandwidth each link needs for a ring allreduce, the
//            figure to compare with the hardware's (independent of the rank count)
// Every run checks the result (each rank contributes rank + 1; the sum is known), so a broken
// transport cannot report a bandwidth.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <vector>

#include "commands.hpp"
#include "crest/core/error.hpp"
#include "crest/dist/communicator.hpp"

namespace crest::tools {
namespace {

// "1K", "64M", "1G", "4096": bytes (binary multiples, as nccl-tests).
size_t parse_size(const std::string& text) {
  if (text.empty()) throw_usage("bench allreduce --sizes: empty size");
  size_t mult = 1;
  std::string digits = text;
  switch (text.back()) {
    case 'K':
    case 'k':
      mult = size_t{1} << 10;
      digits.pop_back();
      break;
    case 'M':
    case 'm':
      mult = size_t{1} << 20;
      digits.pop_back();
      break;
    case 'G':
    case 'g':
      mult = size_t{1} << 30;
      digits.pop_back();
      break;
    default:
      break;
  }
  if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos)
    throw_usage("bench allreduce --sizes: '" + text + "' is not a size (e.g. 1K, 1M, 64M, 4096)");
  const size_t bytes = std::stoull(digits) * mult;
  if (bytes < sizeof(float) || bytes > (size_t{16} << 30))
    throw_usage("bench allreduce --sizes: '" + text + "' must be between 4 bytes and 16G");
  return bytes;
}

struct Args {
  std::string sizes = "1K,1M,64M";
  int iters = 20, warmup = 3;
  double timeout_s = 300;
};

void bench_allreduce(const Args& a) {
  if (a.iters < 1 || a.warmup < 0) throw_usage("bench allreduce: --iters >= 1 and --warmup >= 0");
  std::vector<size_t> sizes;
  std::stringstream ss(a.sizes);
  for (std::string item; std::getline(ss, item, ',');) sizes.push_back(parse_size(item));
  WorldOptions wo;
  wo.timeout_s = a.timeout_s;
  auto comm = make_world_communicator(wo);
  const int n = comm->size();
  for (size_t bytes : sizes) {
    const size_t count = bytes / sizeof(float);
    std::vector<float> buf(count);
    const float mine = static_cast<float>(comm->rank() + 1);
    const float expect = static_cast<float>(n) * static_cast<float>(n + 1) / 2.f;
    auto once = [&] {
      comm->start_allreduce(buf.data(), count, 1.f,
                            "bench allreduce of " + std::to_string(bytes) + " bytes")
          ->wait();
    };
    std::fill(buf.begin(), buf.end(), mine);
    for (int i = 0; i < a.warmup; ++i) once();
    std::fill(buf.begin(), buf.end(), mine);
    once();  // checked run
    for (size_t i = 0; i < count; ++i)
      if (buf[i] != expect)
        throw_runtime("bench allreduce: wrong result at element " + std::to_string(i) + " of a " +
                      std::to_string(bytes) + "-byte allreduce: " + std::to_string(buf[i]) +
                      ", expected " + std::to_string(expect));
    comm->barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < a.iters; ++i) once();
    const double mine_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / a.iters;
    const double t = comm->allreduce_max(mine_s);
    if (comm->rank() != 0) continue;
    const double algbw = static_cast<double>(count * sizeof(float)) / t / 1e9;
    nlohmann::json j;
    j["bench"] = "allreduce";
    j["communicator"] = comm->name();
    j["ranks"] = n;
    j["bytes"] = count * sizeof(float);
    j["dtype"] = "f32";
    j["iters"] = a.iters;
    j["time_us"] = t * 1e6;
    j["algbw_gb_s"] = algbw;
    j["busbw_gb_s"] = n > 1 ? algbw * 2.0 * (n - 1) / n : 0.0;
    j["checked"] = true;
    std::cout << j.dump() << std::endl;
  }
}

}  // namespace

void register_bench_allreduce(CLI::App& bench) {
  auto a = std::make_shared<Args>();
  CLI::App* c = bench.add_subcommand("allreduce",
                                     "allreduce time and algorithm/bus bandwidth per message size");
  c->add_option("--sizes", a->sizes, "message sizes in bytes, comma-separated (K, M, G suffixes)");
  c->add_option("--iters", a->iters, "timed allreduces per size");
  c->add_option("--warmup", a->warmup, "untimed allreduces per size first");
  c->add_option("--timeout", a->timeout_s, "watchdog deadline of each collective (s)");
  c->callback([a] { bench_allreduce(*a); });
}

}  // namespace crest::tools
