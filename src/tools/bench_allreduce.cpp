// crest bench allreduce --sizes 1K,1M,64M [--iters N] [--warmup W] [--backend NAME]: a float sum
// allreduce, one JSON line per message size — on host memory through the job's communicator
// (MPI), or with --backend naming a device backend on its memory through its own collectives
// (NCCL on cuda: what the gradient buckets use there) — with nccl-tests' definitions:
//   time     the slowest rank's mean time per allreduce (a barrier lines the ranks up first)
//   algbw    bytes / time
//   busbw    algbw * 2 (n - 1) / n: the bandwidth each link needs for a ring allreduce, the
//            figure to compare with the hardware's (independent of the rank count)
// Every run checks the result (each rank contributes rank + 1; the sum is known), so a broken
// transport cannot report a bandwidth.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "commands.hpp"
#include "crest/backends/kernels.hpp"
#include "crest/core/error.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/engine/device_collectives_everywhere.hpp"

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
  std::string backend;  // "": host memory
};

// The values allreduced: made once for the largest size, used from the start for each size.
class AllreduceBuffer {
 public:
  virtual ~AllreduceBuffer() = default;
  virtual std::string communicator() const = 0;
  virtual void fill(size_t count, float value) = 0;
  virtual void allreduce(size_t count, const std::string& what) = 0;  // returns once complete
  // The first `count` values where the host can read them.
  virtual const float* read(size_t count) = 0;
};

class HostBuffer final : public AllreduceBuffer {
 public:
  HostBuffer(Communicator& comm, size_t count) : comm_(comm), values_(count) {}
  std::string communicator() const override { return comm_.name(); }
  void fill(size_t count, float value) override { std::fill_n(values_.begin(), count, value); }
  void allreduce(size_t count, const std::string& what) override {
    comm_.start_allreduce(values_.data(), count, 1.f, what)->wait();
  }
  const float* read(size_t /*count*/) override { return values_.data(); }

 private:
  Communicator& comm_;
  std::vector<float> values_;
};

// On a device backend's memory, reduced by its own collectives and waited for with the watchdog's
// deadline, as the gradient buckets are.
class DeviceBuffer final : public AllreduceBuffer {
 public:
  DeviceBuffer(Backend& backend, std::unique_ptr<DeviceCollectives> collectives, size_t count,
               double timeout_s)
      : backend_(backend),
        collectives_(std::move(collectives)),
        ops_(backend.vector_ops(DType::f32)),
        values_(count * sizeof(float), 256, backend.memory()),
        timeout_s_(timeout_s) {}
  std::string communicator() const override { return collectives_->name(); }
  void fill(size_t count, float value) override { ops_->fill(values_.data(), count, value); }
  void allreduce(size_t count, const std::string& what) override {
    collectives_->allreduce_sum(values_.data(), count, DType::f32, 1.0);
    collectives_->wait(timeout_s_, what);
  }
  const float* read(size_t count) override {
    copy_.resize(count);
    backend_.memory().copy_to_host(copy_.data(), values_.data(), count * sizeof(float));
    return copy_.data();
  }

 private:
  Backend& backend_;
  std::unique_ptr<DeviceCollectives> collectives_;
  std::unique_ptr<VectorOps> ops_;
  Buffer values_;
  double timeout_s_;
  std::vector<float> copy_;  // read()'s
};

// Host memory (no --backend, or a backend whose memory is the host's: MPI reads it where it is),
// else the backend's collectives, which every rank must be able to make.
std::unique_ptr<AllreduceBuffer> make_buffer(const Args& a, Communicator& comm,
                                             std::unique_ptr<Backend>& backend, size_t count) {
  if (!a.backend.empty()) backend = make_backend(a.backend);
  if (!backend || backend->memory().is_host()) return std::make_unique<HostBuffer>(comm, count);
  std::string why_not;
  auto collectives = device_collectives_everywhere(comm, *backend, why_not);
  if (!collectives)
    throw_usage("bench allreduce --backend " + a.backend + ": no collectives on its memory (" +
                why_not + ")");
  return std::make_unique<DeviceBuffer>(*backend, std::move(collectives), count, a.timeout_s);
}

// The checked run: each rank contributes rank + 1, so every element must be n (n + 1) / 2.
void check_sum(AllreduceBuffer& buffer, size_t count, int ranks) {
  const float expect = static_cast<float>(ranks) * static_cast<float>(ranks + 1) / 2.f;
  const float* v = buffer.read(count);
  for (size_t i = 0; i < count; ++i)
    if (v[i] != expect)
      throw_runtime("bench allreduce: wrong result at element " + std::to_string(i) + " of a " +
                    std::to_string(count * sizeof(float)) + "-byte allreduce: " +
                    std::to_string(v[i]) + ", expected " + std::to_string(expect));
}

void bench_allreduce(const Args& a) {
  if (a.iters < 1 || a.warmup < 0) throw_usage("bench allreduce: --iters >= 1 and --warmup >= 0");
  std::vector<size_t> sizes;
  std::stringstream ss(a.sizes);
  for (std::string item; std::getline(ss, item, ',');) sizes.push_back(parse_size(item));
  WorldOptions wo;
  wo.timeout_s = a.timeout_s;
  auto comm = make_world_communicator(wo);
  const int n = comm->size();
  std::unique_ptr<Backend> backend;
  const auto buffer =
      make_buffer(a, *comm, backend, *std::max_element(sizes.begin(), sizes.end()) / sizeof(float));
  for (size_t bytes : sizes) {
    const size_t count = bytes / sizeof(float);
    const float mine = static_cast<float>(comm->rank() + 1);
    const std::string what = "bench allreduce of " + std::to_string(bytes) + " bytes";
    buffer->fill(count, mine);
    for (int i = 0; i < a.warmup; ++i) buffer->allreduce(count, what);
    buffer->fill(count, mine);
    buffer->allreduce(count, what);
    check_sum(*buffer, count, n);
    comm->barrier();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < a.iters; ++i) buffer->allreduce(count, what);
    const double mine_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / a.iters;
    const double t = comm->allreduce_max(mine_s);
    if (comm->rank() != 0) continue;
    const double algbw = static_cast<double>(count * sizeof(float)) / t / 1e9;
    nlohmann::json j;
    j["bench"] = "allreduce";
    j["communicator"] = buffer->communicator();
    j["memory"] = backend && !backend->memory().is_host() ? backend->name() : "host";
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
  c->add_option("--backend", a->backend,
                "values on this backend's memory: a device backend's through its own "
                "collectives (cuda: NCCL); default host memory through MPI");
  c->callback([a] { bench_allreduce(*a); });
}

}  // namespace crest::tools
