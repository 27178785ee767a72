// Checkpoints between groups (checkpoint_transfer.hpp).
#include "checkpoint_transfer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "crest/core/atomic_file.hpp"
#include "crest/core/error.hpp"
#include "crest/dist/communicator.hpp"
#include "crest/train/checkpoint.hpp"
#include "trial_runner.hpp"

namespace crest::search_detail {
namespace fs = std::filesystem;
namespace {

// The checkpoint written at the end of epoch `epoch` (1-based), or "". Names carry the global
// step zero-padded, so the newest sorts last and is looked at first.
std::string checkpoint_at_epoch(const std::string& run_dir, int epoch) {
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir + "/checkpoints", ec)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".safetensors" && name.rfind("ckpt-", 0) == 0)
      names.push_back(name);
  }
  std::sort(names.rbegin(), names.rend());
  for (const auto& name : names) {
    try {
      const TrainingPosition p = read_checkpoint_info(run_dir + "/checkpoints/" + name).position;
      if (p.epoch == epoch && p.step_in_epoch == 0) return name;
    } catch (const Error&) {
      // rotated away or damaged: not the one
    }
  }
  return "";
}

std::vector<std::byte> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw_input(path + ": cannot open");
  in.seekg(0, std::ios::end);
  std::vector<std::byte> bytes(static_cast<size_t>(in.tellg()));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!in) throw_input(path + ": read failed");
  return bytes;
}

// [name length: 4 bytes, little endian][name][file]; an empty name says there is none.
std::vector<std::byte> frame(const std::string& name, const std::vector<std::byte>& file) {
  const auto n = static_cast<uint32_t>(name.size());
  std::vector<std::byte> out;
  out.reserve(4 + name.size() + file.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<std::byte>((n >> (8 * i)) & 0xff));
  for (char c : name) out.push_back(static_cast<std::byte>(c));
  out.insert(out.end(), file.begin(), file.end());
  return out;
}

}  // namespace

CheckpointServer::CheckpointServer(Communicator& world, std::string out_dir)
    : world_(world), out_dir_(std::move(out_dir)), thread_([this] { serve(); }) {}

CheckpointServer::~CheckpointServer() {
  stopping_ = true;
  thread_.join();
}

void CheckpointServer::serve() {
  while (!stopping_) {
    std::optional<Communicator::Message> m;
    try {
      m = world_.try_receive(Communicator::kAnySource, kWantCheckpoint);
    } catch (const std::exception&) {
      return;  // the communicator is going away with the job
    }
    if (!m) {
      const timespec pause{0, 2'000'000};
      nanosleep(&pause, nullptr);
      continue;
    }
    int request[2] = {0, 0};  // trial, epoch
    std::memcpy(request, m->bytes.data(), std::min(sizeof request, m->bytes.size()));
    const std::string dir = trial_dir(out_dir_, request[0]);
    std::string name = checkpoint_at_epoch(dir, request[1]);
    std::vector<std::byte> file;
    try {
      if (!name.empty()) file = read_file(dir + "/checkpoints/" + name);
    } catch (const Error&) {
      name.clear();  // rotated away between listing and reading: the receiver asks again
    }
    world_.send(m->source, kCheckpointBytes, frame(name, file));
  }
}

FetchedCheckpoint fetch_checkpoint(Communicator& world, int donor_leader, int donor, int epoch) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int attempt = 0; attempt < 5; ++attempt) {
    const int ask[2] = {donor, epoch};
    std::vector<std::byte> request(sizeof ask);
    std::memcpy(request.data(), ask, sizeof ask);
    world.send(donor_leader, kWantCheckpoint, request);
    const auto m = world.receive(donor_leader, kCheckpointBytes, 600,
                                 "trial " + std::to_string(donor) + "'s checkpoint");
    uint32_t n = 0;
    for (int i = 0; i < 4; ++i)
      n |= static_cast<uint32_t>(m.bytes.at(static_cast<size_t>(i))) << (8 * i);
    if (n == 0) continue;
    FetchedCheckpoint c;
    c.name.assign(reinterpret_cast<const char*>(m.bytes.data()) + 4, n);
    c.bytes.assign(m.bytes.begin() + 4 + n, m.bytes.end());
    c.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return c;
  }
  throw_runtime("trial " + std::to_string(donor) + " has no checkpoint of epoch " +
                std::to_string(epoch) + " to copy (train.checkpoint_every must save every epoch)");
}

std::string install_checkpoint(const std::string& run_dir, const FetchedCheckpoint& c) {
  const std::string dir = run_dir + "/checkpoints";
  fs::create_directories(dir);
  // The receiver's own checkpoints go: the newest must be the donor's, whatever its step.
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") fs::remove(e.path());
  std::string path = dir + "/" + c.name;
  AtomicOutputFile f(path);
  f.write(c.bytes.data(), c.bytes.size());
  f.commit();
  return path;
}

}  // namespace crest::search_detail
