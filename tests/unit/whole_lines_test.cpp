// WholeLines (crest/core/whole_lines.hpp): the target stream receives whole lines, each in one
// write, however the text was put together; a carriage return ends a (progress) line too, a flush
// hands over what is kept, and the rest arrives when the stream is destroyed.
#include "crest/core/whole_lines.hpp"

#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "support/recorded_writes.hpp"

namespace crest {
namespace {

TEST(WholeLines, TheTargetReceivesEachLineInOneWrite) {
  test::RecordedWrites writes;
  std::ostream target(&writes);
  {
    WholeLines out(target);
    out << "staged " << 12 << " files in " << 0.5 << " s\n"
        << "stage: 3/6\r";
    EXPECT_EQ(writes.seen,
              (std::vector<std::string>{"staged 12 files in 0.5 s\n", "stage: 3/6\r"}));
    out << "no newline yet";
    EXPECT_EQ(writes.seen.size(), 2u) << "a line without its end was written";
    out << std::flush;
    EXPECT_EQ(writes.seen.back(), "no newline yet");
    out << "the rest";
  }
  EXPECT_EQ(writes.seen.back(), "the rest") << "destroying the stream lost its last text";
  EXPECT_EQ(writes.seen.size(), 4u);
}

}  // namespace
}  // namespace crest
