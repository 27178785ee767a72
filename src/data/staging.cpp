#include "crest/data/staging.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <ostream>

#include "crest/core/atomic_file.hpp"
#include "crest/core/error.hpp"
#include "crest/core/parallel_for.hpp"
#include "crest/core/progress.hpp"
#include "crest/core/units.hpp"
#include "crest/data/formats/crc32c.hpp"
#include "crest/data/formats/tfrecord.hpp"
#include "crest/dist/communicator.hpp"
#include "formats/file_io.hpp"

namespace crest {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kManifest = ".crest-stage.json";
// Copy buffer: small enough to stay in the core's L2 cache between read(), CRC and write().
// Measured on 1 GiB of page-cached files: 256 KiB copies 3-4x faster than 8 MiB (which makes
// every byte travel through memory twice more) and on par with cp's in-kernel copy.
constexpr size_t kChunk = size_t{256} << 10;

struct FileToStage {
  std::string rel;  // relative to from/ and to/
  int64_t source_bytes = 0;
};

struct StagedFile {
  std::string rel;
  int64_t source_bytes = 0, bytes = 0;  // bytes: the file's size on disk
  uint32_t crc = 0;                     // of the bytes staged (a partial file's parts, in order)
  int64_t part_bytes = -1;              // a partial file's staged bytes; -1: the whole file
};

// CRC32C and size of a file's bytes.
std::pair<uint32_t, int64_t> checksum_file(const std::string& path, std::vector<std::byte>& buf) {
  formats_io::InputFile in(path);
  uint32_t crc = 0;
  int64_t total = 0;
  for (size_t n; (n = in.read_some(buf.data(), buf.size())) > 0;) {
    crc = crc32c(buf.data(), n, crc);
    total += static_cast<int64_t>(n);
  }
  return {crc, total};
}

bool is_gzip_tfrecord(const std::string& path) {
  if (path.size() < 9 || path.compare(path.size() - 9, 9, ".tfrecord") != 0) return false;
  unsigned char magic[2] = {0, 0};
  std::ifstream f(path, std::ios::binary);
  f.read(reinterpret_cast<char*>(magic), 2);
  return f.gcount() == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
}

// File f's destination, its directory created.
std::string destination_of(const StageOptions& o, const FileToStage& f) {
  std::string dst = (fs::path(o.to) / f.rel).string();
  std::error_code ec;
  fs::create_directories(fs::path(dst).parent_path(), ec);
  if (ec) throw_input(fs::path(dst).parent_path().string() + ": cannot create: " + ec.message());
  return dst;
}

StagedFile stage_one(const StageOptions& o, const FileToStage& f, std::vector<std::byte>& buf) {
  const std::string src = (fs::path(o.from) / f.rel).string(), dst = destination_of(o, f);
  // No fsync per file: staging copies thousands of files and the manifest, written last, is what
  // says the staging is complete.
  AtomicOutputFile file(dst, CommitSync::rename_only);
  StagedFile out;
  out.rel = f.rel;
  out.source_bytes = f.source_bytes;
  if (o.inflate && is_gzip_tfrecord(src)) {
    // Every record's CRCs are checked by the reader; the plain output is re-read below.
    TfRecordReader reader(src, TfRecordCompression::gzip);
    std::vector<std::byte> record;
    // Plain framing written here rather than through TfRecordWriter: it would fsync and rename
    // on its own, and staging renames once after verification.
    uint64_t records = 0;
    while (reader.next(record)) {
      uint8_t head[12];
      const uint64_t len = record.size();
      std::memcpy(head, &len, 8);
      const uint32_t lcrc = crc32c_mask(crc32c(head, 8));
      std::memcpy(head + 8, &lcrc, 4);
      const uint32_t dcrc = crc32c_mask(crc32c(record.data(), record.size()));
      file.write(head, 12);
      file.write(record.data(), record.size());
      file.write(&dcrc, 4);
      ++records;
    }
    file.close_descriptor();
    // Verify what landed on disk: it must parse with every CRC intact and hold the same records.
    TfRecordReader check(file.temp_path(), TfRecordCompression::none);
    uint64_t again = 0;
    while (check.next(record)) ++again;
    if (again != records)
      throw_input(dst + ": verification failed: " + std::to_string(again) + " records on disk, " +
                  std::to_string(records) + " written");
    std::tie(out.crc, out.bytes) = checksum_file(file.temp_path(), buf);
  } else {
    formats_io::InputFile in(src);
    // The temporary file is written as mkstemp made it, never truncated: on ext4 a
    // truncate-to-zero marks the file for writeback on close (auto_da_alloc), which made every
    // staged file wait for the disk.
    uint32_t crc = 0;
    int64_t total = 0;
    for (size_t n; (n = in.read_some(buf.data(), buf.size())) > 0;) {
      crc = crc32c(buf.data(), n, crc);
      file.write(buf.data(), n);
      total += static_cast<int64_t>(n);
    }
    file.close_descriptor();
    if (total != f.source_bytes)
      throw_input(src + ": changed while staging (" + std::to_string(f.source_bytes) +
                  " bytes listed, " + std::to_string(total) + " read)");
    // The size on disk must be what was read. The bytes are not read back: that would come from
    // the page cache just written, proving nothing about the device, at the cost of a second
    // pass; the checksum of what was read goes into the manifest instead.
    std::error_code size_ec;
    const auto on_disk = static_cast<int64_t>(fs::file_size(file.temp_path(), size_ec));
    if (size_ec || on_disk != total)
      throw_input(dst + ": verification failed: " + std::to_string(on_disk) + " bytes on disk, " +
                  std::to_string(total) + " read from " + src);
    out.crc = crc;
    out.bytes = total;
  }
  file.commit();
  return out;
}

// The parts `ranges` of source file f: each range read and written at its own offset, the file
// then extended to the source's size, so the bytes between are holes that read as zeros.
StagedFile stage_part(const StageOptions& o, const FileToStage& f,
                      const std::vector<ByteRange>& ranges, std::vector<std::byte>& buf) {
  const std::string src = (fs::path(o.from) / f.rel).string(), dst = destination_of(o, f);
  AtomicOutputFile file(dst, CommitSync::rename_only);
  formats_io::InputFile in(src);
  StagedFile out{f.rel, f.source_bytes, f.source_bytes, 0, 0};
  for (const ByteRange& r : ranges) {
    if (r.end() > static_cast<uint64_t>(f.source_bytes))
      throw_input(src + ": a part to stage ends at byte " + std::to_string(r.end()) +
                  ", past the file's " + std::to_string(f.source_bytes));
    for (uint64_t at = r.offset; at < r.end();) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(buf.size(), r.end() - at));
      in.read_exact_at(at, buf.data(), n, "the part to stage");
      out.crc = crc32c(buf.data(), n, out.crc);
      file.write_at(at, buf.data(), n);
      at += n;
    }
    out.part_bytes += static_cast<int64_t>(r.bytes);
  }
  file.resize(static_cast<uint64_t>(f.source_bytes));
  file.close_descriptor();
  std::error_code ec;
  const auto on_disk = static_cast<int64_t>(fs::file_size(file.temp_path(), ec));
  if (ec || on_disk != f.source_bytes)
    throw_input(dst + ": verification failed: " + std::to_string(on_disk) + " bytes on disk, " +
                std::to_string(f.source_bytes) + " in " + src);
  file.commit();
  return out;
}

// File f whole, or its parts where StageOptions::parts gives some.
StagedFile stage_file(const StageOptions& o, const FileToStage& f, std::vector<std::byte>& buf) {
  if (!o.parts) return stage_one(o, f, buf);
  const std::vector<ByteRange> ranges = merge_ranges(
      o.parts((fs::path(o.from) / f.rel).string(), static_cast<uint64_t>(f.source_bytes)));
  if (ranges.empty() || range_bytes(ranges) == static_cast<uint64_t>(f.source_bytes))
    return stage_one(o, f, buf);
  return stage_part(o, f, ranges, buf);
}

// Every file of the dataset: top-level files, then each split's sorted files and those of its
// subdirectories (class folders), one level down.
std::vector<FileToStage> list_dataset(const StageOptions& o) {
  std::error_code ec;
  if (!fs::is_directory(o.from, ec))
    throw_input(o.from + ": not a directory (the dataset to stage)");
  // The sorted names of a directory's regular files (or subdirectories), hidden ones left out.
  auto entries = [&](const fs::path& dir, bool directories) {
    std::vector<std::string> names;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!name.empty() && name[0] != '.' &&
          (directories ? it->is_directory(ec) : it->is_regular_file(ec)))
        names.push_back(name);
    }
    if (ec) throw_input(dir.string() + ": cannot list: " + ec.message());
    std::sort(names.begin(), names.end());
    return names;
  };
  std::vector<FileToStage> mine;
  auto add = [&](const std::string& rel) {
    const auto n = fs::file_size(fs::path(o.from) / rel, ec);
    if (ec) throw_input((fs::path(o.from) / rel).string() + ": cannot stat: " + ec.message());
    mine.push_back({rel, static_cast<int64_t>(n)});
  };
  for (const std::string& top : entries(o.from, false)) add(top);  // stats.h5: every rank
  bool any_split = false;
  for (const std::string& split : o.splits) {
    const fs::path dir = fs::path(o.from) / split;
    if (!fs::is_directory(dir, ec)) continue;
    any_split = true;
    for (const std::string& name : entries(dir, false)) add(split + "/" + name);
    // One level of subdirectories: an image split's class folders.
    for (const std::string& sub : entries(dir, true))
      for (const std::string& name : entries(dir / sub, false)) add(split + "/" + sub + "/" + name);
  }
  if (!any_split) {
    std::string list;
    for (const auto& s : o.splits) list += (list.empty() ? "" : ", ") + s + "/";
    throw_input(o.from + ": holds none of " + list + " (expected the dataset's split directories)");
  }
  return mine;
}

// `ranks`: 1 for a single-process staging, the job size for a distributed one (which leaves the
// whole dataset on every node).
json manifest_of(const StageOptions& o, int ranks, const std::vector<StagedFile>& files) {
  json m;
  m["format"] = "crest staging manifest 1";
  m["source"] = fs::absolute(o.from).lexically_normal().string();
  m["inflate"] = o.inflate;
  m["staged_by_ranks"] = ranks;  // informational: a staging holds the same whatever wrote it
  if (o.parts) m["parts"] = o.parts_text;
  json list = json::array();
  for (const auto& f : files) {
    json entry{
        {"path", f.rel}, {"source_bytes", f.source_bytes}, {"bytes", f.bytes}, {"crc32c", f.crc}};
    if (f.part_bytes >= 0) entry["part_bytes"] = f.part_bytes;
    list.push_back(entry);
  }
  m["files"] = list;
  return m;
}

// True when `to` holds a complete staging of exactly these source files.
bool existing_staging_matches(const StageOptions& o, const std::vector<FileToStage>& want) {
  const fs::path mpath = fs::path(o.to) / kManifest;
  std::ifstream in(mpath);
  if (!in) return false;
  json m;
  try {
    in >> m;
    // Any complete staging holds the same, whichever rank count wrote it: the whole dataset, or
    // the same parts of it.
    if (m.value("source", "") != fs::absolute(o.from).lexically_normal().string() ||
        m.value("inflate", !o.inflate) != o.inflate ||
        m.value("parts", "") != (o.parts ? o.parts_text : ""))
      return false;
    const json& files = m.at("files");
    if (files.size() != want.size()) return false;
    for (size_t i = 0; i < want.size(); ++i) {
      const json& f = files[i];
      if (f.at("path").get<std::string>() != want[i].rel ||
          f.at("source_bytes").get<int64_t>() != want[i].source_bytes)
        return false;
      std::error_code ec;
      if (static_cast<int64_t>(fs::file_size(fs::path(o.to) / want[i].rel, ec)) !=
              f.at("bytes").get<int64_t>() ||
          ec)
        return false;
    }
  } catch (const std::exception&) {
    return false;  // a damaged manifest means: stage again
  }
  return true;
}

// Why `to`, not empty, cannot be reused: the refusal's text.
std::string not_reusable(const StageOptions& o) {
  std::string held;
  try {
    std::ifstream in(fs::path(o.to) / kManifest);
    json m;
    if (in >> m) held = m.contains("parts") ? m.at("parts").get<std::string>() : "every file whole";
  } catch (const std::exception&) {
  }
  const std::string wanted = o.parts ? o.parts_text : "every file whole";
  std::string why = o.to + ": exists and is not empty (and is not a complete staging of " + o.from +
                    (held.empty() || held == wanted ? "" : " with " + wanted) + ")";
  if (!held.empty() && held != wanted) why += "; it holds a staging of " + held;
  return why + "; refusing to write over it (pass --overwrite, or another directory)";
}

// The manifest last, atomically: its presence means every file listed is complete and verified.
void write_manifest(const StageOptions& o, int ranks, const std::vector<StagedFile>& staged) {
  const std::string mpath = (fs::path(o.to) / kManifest).string();
  write_file_atomically(mpath, manifest_of(o, ranks, staged).dump(1) + "\n");
}

int64_t total_bytes(const std::vector<FileToStage>& files) {
  int64_t total = 0;
  for (const auto& f : files) total += f.source_bytes;
  return total;
}

// Every rank's text; throws (on every rank alike) when any rank's is not empty, naming it.
void fail_together(Communicator& comm, const std::string& mine) {
  std::vector<std::byte> bytes(mine.size());
  if (!mine.empty()) std::memcpy(bytes.data(), mine.data(), mine.size());
  const auto parts = comm.allgather_parts(bytes);
  for (size_t r = 0; r < parts.size(); ++r)
    if (!parts[r].empty())
      throw_input("stage (rank " + std::to_string(r) + "): " +
                  std::string(reinterpret_cast<const char*>(parts[r].data()), parts[r].size()));
}

template <typename T>
void put(std::vector<std::byte>& out, const T& v) {
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof v);
}
template <typename T>
T get(const std::vector<std::byte>& in, size_t at) {
  T v{};
  std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

// One piece of one file in an exchange round: header, then the bytes.
struct PieceHeader {
  int64_t file = -1;   // index in the listing
  int64_t offset = 0;  // of these bytes in the file
  int64_t total = 0;   // the file's size
  uint32_t crc = 0;    // the reader's CRC32C of the whole file (in the last piece)
  uint32_t last = 0;
};

// A file's record in a node's manifest exchange: index, size, staged bytes, checksum.
void put_record(std::vector<std::byte>& out, int64_t i, const StagedFile& f) {
  put(out, i);
  put(out, f.bytes);
  put(out, f.part_bytes);
  put(out, f.crc);
}
constexpr size_t kRecordBytes = 8 + 8 + 8 + 4;

// StageOptions::parts under several ranks: the node's ranks share its files (file i written by
// local rank i mod L), each reading its parts of them from the shared file system directly (the
// nodes' parts differ, so there is nothing to exchange), and the node's first rank writes its
// manifest.
StageResult stage_parts_on_nodes(const StageOptions& o, const std::vector<FileToStage>& all,
                                 Communicator& comm, std::ostream& log, StageResult r) {
  const std::unique_ptr<Communicator> node = comm.split(comm.node_id(), comm.rank());
  const auto writes = [&](size_t i) {
    return static_cast<int>(i % size_t(node->size())) == node->rank();
  };
  log << "stage: " << all.size() << " files from " << o.from << " to " << o.to
      << ", each node its ranks' parts (" << o.parts_text
      << "), read from the shared store directly\n";
  log.flush();
  std::vector<StagedFile> staged(all.size());
  std::string problem;
  std::vector<size_t> mine;
  for (size_t i = 0; i < all.size(); ++i)
    if (writes(i)) mine.push_back(i);
  Progress progress("stage", static_cast<int64_t>(mine.size()));
  const int threads = o.threads > 0 ? o.threads : 4;
  std::vector<std::vector<std::byte>> buffers(
      static_cast<size_t>(parallel_for_workers(mine.size(), threads)));
  try {
    parallel_for(mine.size(), threads, [&](size_t k, int worker) {
      std::vector<std::byte>& buf = buffers[static_cast<size_t>(worker)];
      buf.resize(kChunk);
      staged[mine[k]] = stage_file(o, all[mine[k]], buf);
      progress.advance(1, all[mine[k]].source_bytes);
    });
  } catch (const Error& e) {
    problem = e.what();
  }
  fail_together(comm, problem);
  std::vector<std::byte> records;
  for (size_t i : mine) {
    put_record(records, static_cast<int64_t>(i), staged[i]);
    r.bytes_read += staged[i].part_bytes >= 0 ? staged[i].part_bytes : staged[i].bytes;
    r.partial_files += staged[i].part_bytes >= 0 ? 1 : 0;
  }
  const std::vector<std::byte> node_records = node->allgatherv(records);
  for (size_t at = 0; at + kRecordBytes <= node_records.size(); at += kRecordBytes) {
    const auto i = static_cast<size_t>(get<int64_t>(node_records, at));
    staged[i] = {all[i].rel, all[i].source_bytes, get<int64_t>(node_records, at + 8),
                 get<uint32_t>(node_records, at + 24), get<int64_t>(node_records, at + 16)};
  }
  int64_t sums[2] = {r.bytes_read, r.partial_files};
  node->allreduce_sum(sums, 2);
  r.bytes_written = sums[0];
  r.partial_files = sums[1];
  int64_t job_read = r.bytes_read;
  comm.allreduce_sum(&job_read, 1);
  r.bytes_read_job = job_read;
  node->barrier();  // every file of the node is in place
  if (node->rank() == 0) write_manifest(o, comm.size(), staged);
  progress.finish();
  r.seconds = progress.elapsed_s();
  log << "staged " << r.files << " files on rank 0's node in " << r.seconds << " s, "
      << r.partial_files
      << " of them in part: " << human_bytes(static_cast<double>(r.bytes_written)) << " of "
      << human_bytes(static_cast<double>(total_bytes(all))) << "; "
      << human_bytes(static_cast<double>(r.bytes_read_job))
      << " read from the shared store across all nodes, every file verified\n";
  return r;
}

StageResult stage_distributed(const StageOptions& o, Communicator& comm, std::ostream& log) {
  const int rank = comm.rank(), size = comm.size();
  if (o.inflate)
    throw_usage(
        "stage --inflate runs in one process only for now; stage the GZIP files, or inflate before "
        "the job");
  std::string problem;
  std::vector<FileToStage> all;
  try {
    all = list_dataset(o);
  } catch (const Error& e) {
    problem = e.what();
  }
  fail_together(comm, problem);
  // Every rank must work from the same listing, or files would be skipped or read twice.
  {
    std::string listing;
    for (const auto& f : all) listing += f.rel + " " + std::to_string(f.source_bytes) + "\n";
    std::vector<std::byte> bytes(listing.size());
    std::memcpy(bytes.data(), listing.data(), listing.size());
    const auto parts = comm.allgather_parts(bytes);
    for (size_t r = 1; r < parts.size(); ++r)
      if (parts[r] != parts[0])
        throw_input("stage: rank " + std::to_string(r) + " sees a different listing of " + o.from +
                    " than rank 0 (files changing during staging, or a different --from)");
  }
  int64_t total = 0;
  for (const auto& f : all) total += f.source_bytes;

  StageResult r;
  r.files = static_cast<int64_t>(all.size());
  int64_t complete = existing_staging_matches(o, all) ? 1 : 0;
  comm.allreduce_sum(&complete, 1);
  if (complete == size) {
    r.reused = true;
    r.bytes_written = total;
    log << "stage: " << o.to << " already holds a verified staging of " << o.from
        << " on every node (" << r.files << " files, " << human_bytes(static_cast<double>(total))
        << "); reusing it\n";
    return r;
  }
  // Nothing is written until every rank has checked its destination (ranks of a node share it).
  std::error_code ec;
  if (fs::exists(o.to, ec) && !fs::is_empty(o.to, ec) && !o.overwrite) problem = not_reusable(o);
  fail_together(comm, problem);
  comm.barrier();
  if (comm.local_rank() == 0)
    fs::remove(fs::path(o.to) / kManifest, ec);  // incomplete until rewritten
  fs::create_directories(o.to, ec);
  if (ec) problem = o.to + ": cannot create: " + ec.message();
  fail_together(comm, problem);
  if (o.parts) return stage_parts_on_nodes(o, all, comm, log, r);

  // Node-aware exchange. On every node, file i is written by local rank i mod L. The ranks with
  // the same local rank, one per node, form a group that needs exactly the files with i mod L
  // equal to their local rank: they read those between them (the j-th by group member j mod
  // nodes) and allgather only within the group. So each byte is read once by the job, and each
  // rank receives its node's share from the other nodes (on one node: nothing at all), instead of
  // every rank receiving the whole dataset. Nodes with different rank counts fall back to one
  // group of all ranks (every rank receives everything and writes its node share).
  const int local_size = comm.local_size(), local_rank = comm.local_rank();
  const bool uniform = comm.allreduce_max(local_size) == -comm.allreduce_max(-local_size);
  std::unique_ptr<Communicator> node_peers;
  if (uniform) node_peers = comm.split(local_rank, rank);
  Communicator& group = uniform ? *node_peers : comm;
  const auto writes = [&](int64_t i) { return i % local_size == local_rank; };
  // The group's files in order, and the ones this rank reads.
  std::vector<int64_t> group_files, my_reads;
  for (int64_t i = 0; i < static_cast<int64_t>(all.size()); ++i)
    if (!uniform || writes(i)) group_files.push_back(i);
  for (size_t j = 0; j < group_files.size(); ++j)
    if (static_cast<int>(j % static_cast<size_t>(group.size())) == group.rank())
      my_reads.push_back(group_files[j]);
  int64_t group_bytes = 0;
  for (int64_t i : group_files) group_bytes += all[static_cast<size_t>(i)].source_bytes;

  const int nodes = uniform ? group.size() : 0;
  log << "stage: " << all.size() << " files (" << human_bytes(static_cast<double>(total))
      << ") from " << o.from << " to " << o.to << " on every node; ";
  if (uniform)
    log << nodes << (nodes == 1 ? " node" : " nodes") << " x " << local_size
        << " ranks: each rank reads 1/" << size
        << " and receives its node share from the other nodes\n";
  else
    log << size << " ranks (nodes with different rank counts) each read 1/" << size
        << " and exchange the rest\n";
  log.flush();
  // Rank 0 shows its group's files: 1/local_size of the dataset, in the same proportion.
  Progress progress("stage", static_cast<int64_t>(group_files.size()), 10.0, rank == 0);

  // Per round, every rank contributes at most `chunk` bytes: a round moves at most 1 GiB.
  const size_t chunk = std::clamp<size_t>((size_t{1} << 30) / static_cast<size_t>(group.size()),
                                          size_t{1} << 20, size_t{64} << 20);

  // Reader state: this rank's files are my_reads, in order.
  size_t next_read = 0;
  int64_t reading = -1, offset = 0;
  uint32_t read_crc = 0;
  std::unique_ptr<formats_io::InputFile> in;
  int64_t files_read = 0, bytes_read = 0;
  // Writer state, per file this rank writes.
  struct Out {
    std::unique_ptr<AtomicOutputFile> file;
    int64_t written = 0;
    uint32_t crc = 0;
  };
  std::map<int64_t, Out> open_outs;
  std::vector<StagedFile> staged(all.size());
  std::vector<std::byte> piece, data(chunk);
  for (;;) {
    piece.clear();
    if (!in && next_read < my_reads.size()) {
      reading = my_reads[next_read++];
      in = std::make_unique<formats_io::InputFile>(
          (fs::path(o.from) / all[static_cast<size_t>(reading)].rel).string());
      offset = 0;
      read_crc = 0;
      ++files_read;
    }
    if (in) {
      const FileToStage& f = all[static_cast<size_t>(reading)];
      size_t got = 0;
      // Fill the piece in cache-sized reads, checksumming each while it is hot.
      while (got < chunk) {
        const size_t n = in->read_some(data.data() + got, std::min(chunk - got, kChunk));
        if (n == 0) break;
        read_crc = crc32c(data.data() + got, n, read_crc);
        got += n;
      }
      PieceHeader h{reading, offset, f.source_bytes, read_crc, 0};
      offset += static_cast<int64_t>(got);
      bytes_read += static_cast<int64_t>(got);
      if (got < chunk) {  // end of file
        if (offset != f.source_bytes)
          throw_input((fs::path(o.from) / f.rel).string() + ": changed while staging (" +
                      std::to_string(f.source_bytes) + " bytes listed, " + std::to_string(offset) +
                      " read)");
        h.last = 1;
        in.reset();
      }
      put(piece, h);
      piece.insert(piece.end(), data.begin(), data.begin() + static_cast<std::ptrdiff_t>(got));
    }
    const auto parts = group.allgather_parts(piece);
    bool any = false;
    for (size_t from = 0; from < parts.size(); ++from) {
      const auto& p = parts[from];
      if (p.empty()) continue;
      any = true;
      if (static_cast<int>(from) != group.rank())
        r.bytes_exchanged += static_cast<int64_t>(p.size());
      const PieceHeader h = get<PieceHeader>(p, 0);
      if (h.last) progress.advance(1, h.total);
      if (!writes(h.file)) continue;
      const FileToStage& f = all.at(static_cast<size_t>(h.file));
      Out& w = open_outs[h.file];
      const std::string dst = (fs::path(o.to) / f.rel).string();
      if (!w.file) {
        fs::create_directories(fs::path(dst).parent_path(), ec);
        w.file = std::make_unique<AtomicOutputFile>(dst, CommitSync::rename_only);  // as stage_one
      }
      const size_t n = p.size() - sizeof(PieceHeader);
      if (h.offset != w.written) throw_runtime(dst + ": staging pieces arrived out of order");
      w.file->write(p.data() + sizeof(PieceHeader), n);
      w.crc = crc32c(p.data() + sizeof(PieceHeader), n, w.crc);
      w.written += static_cast<int64_t>(n);
      if (h.last) {
        w.file->close_descriptor();
        if (w.written != h.total || w.crc != h.crc)
          throw_input(dst + ": verification failed: received " + std::to_string(w.written) +
                      " bytes with CRC32C " + std::to_string(w.crc) + ", rank " +
                      std::to_string(from) + " read " + std::to_string(h.total) +
                      " bytes with CRC32C " + std::to_string(h.crc));
        std::error_code size_ec;
        if (static_cast<int64_t>(fs::file_size(w.file->temp_path(), size_ec)) != w.written ||
            size_ec)
          throw_input(dst + ": verification failed: the size on disk is not what was written");
        w.file->commit();
        staged[static_cast<size_t>(h.file)] = {f.rel, f.source_bytes, w.written, w.crc};
        r.bytes_written += w.written;
        open_outs.erase(h.file);
      }
    }
    if (!any) break;
  }
  if (!open_outs.empty()) throw_runtime(o.to + ": staging ended with files incomplete");
  // Job-wide counts: each file read exactly once, each byte of the source once.
  int64_t sums[2] = {files_read, bytes_read};
  comm.allreduce_sum(sums, 2);
  r.files_read_job = sums[0];
  r.bytes_read_job = sums[1];
  r.bytes_read = bytes_read;
  // The node's manifest: every file, checksums from the readers (all writers agreed with them).
  std::vector<std::byte> mine;
  for (size_t i = 0; i < staged.size(); ++i)
    if (writes(static_cast<int64_t>(i))) {
      put(mine, static_cast<int64_t>(i));
      put(mine, staged[i].bytes);
      put(mine, staged[i].crc);
    }
  const std::vector<std::byte> node =
      comm.allgatherv(mine);  // all ranks' records; one node's suffice
  for (size_t at = 0; at + 20 <= node.size(); at += 20) {
    const auto i = static_cast<size_t>(get<int64_t>(node, at));
    staged[i] = {all[i].rel, all[i].source_bytes, get<int64_t>(node, at + 8),
                 get<uint32_t>(node, at + 16)};
  }
  comm.barrier();  // every file of every node is in place
  if (comm.local_rank() == 0) write_manifest(o, size, staged);
  progress.finish();
  r.seconds = progress.elapsed_s();
  log << "staged " << r.files << " files (" << human_bytes(static_cast<double>(total))
      << ") on every node in " << r.seconds << " s: " << r.files_read_job << " file reads and "
      << human_bytes(static_cast<double>(r.bytes_read_job)) << " from the shared store across "
      << size << " ranks (each file once), "
      << static_cast<int64_t>(static_cast<double>(r.bytes_read_job) / 1e6 /
                              std::max(r.seconds, 1e-9))
      << " MB/s; rank 0 received " << human_bytes(static_cast<double>(r.bytes_exchanged))
      << " of its node share of " << human_bytes(static_cast<double>(group_bytes))
      << " from the others (" << static_cast<int64_t>(r.exchange_mb_s())
      << " MB/s), every file verified\n";
  return r;
}

}  // namespace

StageResult stage_dataset(const StageOptions& o, Communicator& comm, std::ostream& log) {
  if (o.from.empty() || o.to.empty()) throw_usage("stage: --from and --to are required");
  std::error_code ec;
  if (fs::exists(o.to, ec) && fs::equivalent(o.from, o.to, ec))
    throw_usage("stage: --from and --to are the same directory (" + o.to + ")");
  if (comm.size() > 1) return stage_distributed(o, comm, log);
  const std::vector<FileToStage> files = list_dataset(o);
  StageResult r;
  if (existing_staging_matches(o, files)) {
    r.reused = true;
    r.files = static_cast<int64_t>(files.size());
    for (const auto& f : files) r.bytes_written += fs::file_size(fs::path(o.to) / f.rel, ec);
    log << "stage: " << o.to << " already holds a verified staging of " << o.from << " (" << r.files
        << " files, " << human_bytes(static_cast<double>(r.bytes_written)) << "); reusing it\n";
    return r;
  }
  if (fs::exists(o.to, ec) && !fs::is_empty(o.to, ec)) {
    if (!o.overwrite) throw_input(not_reusable(o));
    fs::remove(fs::path(o.to) / kManifest, ec);  // incomplete until the new manifest lands
  }
  fs::create_directories(o.to, ec);
  if (ec) throw_input(o.to + ": cannot create: " + ec.message());

  int64_t total = 0;
  for (const auto& f : files) total += f.source_bytes;
  log << "stage: " << files.size() << " files (" << human_bytes(static_cast<double>(total))
      << ") from " << o.from << " to " << o.to << (o.inflate ? ", inflating GZIP TFRecords" : "")
      << (comm.size() > 1
              ? ", rank " + std::to_string(comm.rank()) + " of " + std::to_string(comm.size())
              : "")
      << "\n";
  log.flush();

  Progress progress("stage", static_cast<int64_t>(files.size()));
  std::vector<StagedFile> staged(files.size());
  std::atomic<int64_t> written{0};
  const int threads = o.threads > 0 ? o.threads : 4;
  std::vector<std::vector<std::byte>> buffers(
      static_cast<size_t>(parallel_for_workers(files.size(), threads)));
  parallel_for(files.size(), threads, [&](size_t i, int worker) {
    std::vector<std::byte>& buf = buffers[static_cast<size_t>(worker)];
    buf.resize(kChunk);
    staged[i] = stage_file(o, files[i], buf);
    written += staged[i].part_bytes >= 0 ? staged[i].part_bytes : staged[i].bytes;
    progress.advance(1, files[i].source_bytes);
  });

  write_manifest(o, 1, staged);
  progress.finish();
  r.files = static_cast<int64_t>(files.size());
  r.bytes_written = written.load();
  for (const StagedFile& f : staged) r.partial_files += f.part_bytes >= 0 ? 1 : 0;
  r.bytes_read = r.partial_files > 0 ? r.bytes_written : total;
  r.seconds = progress.elapsed_s();
  if (r.partial_files > 0)
    log << "staged " << r.partial_files << " files in part (" << o.parts_text << ")\n";
  log << "staged " << r.files << " files: read " << human_bytes(static_cast<double>(r.bytes_read))
      << ", wrote " << human_bytes(static_cast<double>(r.bytes_written)) << " in " << r.seconds
      << " s (" << static_cast<int64_t>(r.read_mb_s()) << " MB/s read), every file verified\n";
  return r;
}

}  // namespace crest
