// errno_text and throw_io: the one way crest turns a failed system call into a message.
#include <gtest/gtest.h>

#include <cerrno>
#include <string>

#include "crest/core/error.hpp"

namespace crest {
namespace {

TEST(ErrnoText, SystemTextWithHints) {
  EXPECT_EQ(errno_text(ENOENT), "No such file or directory");
  EXPECT_EQ(errno_text(ENOSPC), "No space left on device (the disk is full)");
  EXPECT_EQ(errno_text(EDQUOT), "Disk quota exceeded");
  EXPECT_FALSE(errno_text(123456).empty());  // unknown values still say something
}

TEST(ErrnoText, ThrowIoNamesPathAndCauseAsAnInputError) {
  try {
    throw_io("/data/a.npy", "cannot open", EACCES);
    FAIL() << "throw_io returned";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::input);
    EXPECT_EQ(e.exit_code(), 2);
    EXPECT_EQ(std::string(e.what()), "/data/a.npy: cannot open: Permission denied");
  }
}

}  // namespace
}  // namespace crest
