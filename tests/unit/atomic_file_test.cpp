// AtomicOutputFile: the writer behind every whole-file output (temp file beside the target,
// rename over it on commit, nothing left behind on failure, errors naming the target).
#include "crest/core/atomic_file.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "crest/core/error.hpp"
#include "support/file_size_limit.hpp"
#include "support/test_util.hpp"
#include "unit/data_formats_test_util.hpp"

namespace crest {
namespace {

using test::expect_input_error;
using test::ScratchDir;

using test::slurp;

TEST(AtomicOutputFile, CommitReplacesTheTargetInOneStep) {
  ScratchDir dir;
  const std::string path = dir.file("out.txt");
  write_file_atomically(path, "old contents");
  {
    AtomicOutputFile out(path);
    EXPECT_EQ(out.path(), path);
    EXPECT_EQ(out.temp_path().rfind(path + ".tmp-", 0), 0u) << out.temp_path();
    out.write("new ");
    out.write(std::string("contents"));
    // Until commit the target keeps its old contents; the new ones sit in the temporary file.
    EXPECT_EQ(slurp(path), "old contents");
    EXPECT_EQ(dir.listing().size(), 2u);
    out.commit();
    EXPECT_EQ(slurp(path), "new contents");
    EXPECT_EQ(dir.listing().size(), 1u);
  }
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"out.txt"});
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);  // not mkstemp's 0600
}

TEST(AtomicOutputFile, NoCommitLeavesTheOldFileAndNoTemporary) {
  ScratchDir dir;
  const std::string path = dir.file("out.txt");
  write_file_atomically(path, "old");
  {
    AtomicOutputFile out(path);
    out.write("half of the new");
  }  // an exception on the way would do the same
  EXPECT_EQ(slurp(path), "old");
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"out.txt"});

  AtomicOutputFile out(path);
  out.abandon();
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"out.txt"});
  EXPECT_THROW(out.commit(), Error);  // a bug in the caller, not a silent no-op
}

TEST(AtomicOutputFile, RenameOnlyAndWritersByName) {
  ScratchDir dir;
  const std::string a = dir.file("a.bin"), b = dir.file("b.bin");
  {
    AtomicOutputFile out(a, CommitSync::rename_only);
    out.write("staged");
    out.commit();
  }
  EXPECT_EQ(slurp(a), "staged");
  {
    // A library that writes by name (HDF5): our descriptor is closed, the file written by name,
    // and commit reopens it to fsync.
    AtomicOutputFile out(b);
    out.close_descriptor();
    std::ofstream(out.temp_path(), std::ios::binary) << "by name";
    out.commit();
  }
  EXPECT_EQ(slurp(b), "by name");
  EXPECT_EQ(dir.listing(), (std::vector<std::string>{"a.bin", "b.bin"}));
}

TEST(AtomicOutputFile, ErrorsNameTheTargetAndTheCause) {
  ScratchDir dir;
  const std::string missing = dir.file("no/such/dir/out.txt");
  expect_input_error(
      [&] { AtomicOutputFile out(missing); },
      {missing, "cannot create a temporary file next to it", "No such file or directory"});
  expect_input_error([&] { write_file_atomically(missing, "x"); }, {missing});

  // A full disk: the write fails naming the target, and the temporary file goes away.
  const std::string path = dir.file("big.bin");
  write_file_atomically(path, "old");
  {
    test::FileSizeLimit limit(1000);
    ASSERT_TRUE(limit.ok());
    expect_input_error([&] { write_file_atomically(path, std::string(5000, 'x')); },
                       {path + ": write failed: File too large"});
  }
  EXPECT_EQ(slurp(path), "old");
  EXPECT_EQ(dir.listing(), std::vector<std::string>{"big.bin"});
}

}  // namespace
}  // namespace crest
