// The checkpoint loader's file side (read_checkpoint_info: the safetensors structure, the format
// tag, the CRC32C content checksum, every metadata field). The first byte picks what the rest is:
//   even: the checkpoint file itself;
//   odd:  metadata entries "key=value" separated by 0x1e, laid over a valid checkpoint's
//         metadata; the harness writes the file with the right checksum, so the mutations reach
//         the field parsers (history lines, counts, numbers) behind the checksum, which raw
//         mutation of a file would almost never pass.
// Loading tensors into a model is read_into on a verified file: fuzz_safetensors covers it.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>

#include "crest/core/error.hpp"
#include "crest/engine/checkpoint_file.hpp"
#include "crest/train/checkpoint.hpp"
#include "fuzz_input_file.hpp"

namespace {

std::map<std::string, std::string> valid_metadata() {
  return {{"format", crest::checkpoint_file::kFormat},
          {"crest_version", "0.1.0"},
          {"epoch", "1"},
          {"step_in_epoch", "0"},
          {"global_step", "4"},
          {"executor_steps", "4"},
          {"optimizer_steps", "4"},
          {"epoch_loss_sum", "0x0p+0"},
          {"best_val_loss", "inf"},
          {"epochs_since_best", "0"},
          {"status", ""},
          {"rollbacks", "0"},
          {"history",
           "0 0x1p-3 0x1.8p-1 1 0x1p-1 mae=0x1p-2,mse=0x1p-4 0x1p+0 0x1p+4 0x1p-1 0x0p+0 0x0p+0 "
           "0x0p+0 0 0\n"},
          {"ranks", "1"},
          {"batch_size", "2"},
          {"steps_per_epoch", "4"},
          {"optimizer", "sgd"},
          {"config", "output_dir: run\n"}};
}

// A directory of this process for the written checkpoints (write_safetensors renames a temporary
// file into place and fsyncs it): in /dev/shm where there is one, where fsync costs nothing (on
// a disk it made this harness 250 executions a second).
std::filesystem::path scratch_dir() {
  std::error_code ec;
  const std::filesystem::path base = std::filesystem::is_directory("/dev/shm", ec)
                                         ? std::filesystem::path("/dev/shm")
                                         : std::filesystem::temp_directory_path();
  return base / ("crest-fuzz-checkpoint-" + std::to_string(::getpid()));
}

const std::string& scratch_path() {
  static const std::string path = [] {
    std::filesystem::create_directories(scratch_dir());
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(scratch_dir(), ec);
    });
    return (scratch_dir() / "ckpt-000000000004.safetensors").string();
  }();
  return path;
}

void write_with_checksum(std::string_view entries) {
  std::map<std::string, std::string> md = valid_metadata();
  while (!entries.empty()) {
    const size_t end = std::min(entries.find('\x1e'), entries.size());
    const std::string_view entry = entries.substr(0, end);
    entries.remove_prefix(std::min(end + 1, entries.size()));
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    md[std::string(entry.substr(0, eq))] = std::string(entry.substr(eq + 1));
  }
  const float weight[2] = {0.5F, -1.0F};
  const std::vector<crest::SafetensorsEntry> tensors = {
      {"model/w", crest::DType::f32, crest::Shape({2}), weight}};
  md["checksum"] = crest::checkpoint_file::crc_text(crest::checkpoint_file::content_crc(
      md, {{"model/w", {static_cast<const void*>(weight), sizeof weight}}}));
  crest::write_safetensors(scratch_path(), tensors, md);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  static crest::fuzz::InputFile file;
  try {
    if ((data[0] & 1) == 0) {
      (void)crest::read_checkpoint_info(file.write(data + 1, size - 1));
    } else {
      write_with_checksum({reinterpret_cast<const char*>(data + 1), size - 1});
      (void)crest::read_checkpoint_info(scratch_path());
    }
  } catch (const crest::Error&) {
  }
  return 0;
}
