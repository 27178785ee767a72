// Default thread counts follow the CPUs a rank may run on, not the node's online CPUs
// (crest/core/cpus.hpp).
#include "crest/core/cpus.hpp"

#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <string>
#include <thread>

#include "crest/core/error.hpp"

namespace crest {
namespace {

TEST(Cpus, UnboundRanksShareTheNodesCpus) {
  EXPECT_EQ(threads_per_rank(1, 128, 128), 128);
  EXPECT_EQ(threads_per_rank(4, 128, 128), 32);
  EXPECT_EQ(threads_per_rank(3, 128, 128), 42);
  EXPECT_EQ(threads_per_rank(4, 2, 2), 1);  // more ranks than CPUs: one thread each
}

TEST(Cpus, RanksBoundToCpusOfTheirOwnTakeThem) {
  EXPECT_EQ(threads_per_rank(4, 8, 128), 8);   // srun -n 4 -c 8 on a 128-CPU node
  EXPECT_EQ(threads_per_rank(2, 1, 2), 1);     // mpirun -np 2 --bind-to core on 2 CPUs
  EXPECT_EQ(threads_per_rank(1, 4, 64), 4);    // taskset -c 0-3
  EXPECT_EQ(threads_per_rank(32, 8, 256), 8);  // a whole node of bound ranks
}

TEST(Cpus, RanksBoundToASocketShareIt) {
  EXPECT_EQ(threads_per_rank(8, 64, 128), 16);  // mpirun -np 8 --bind-to socket, 2 sockets
  EXPECT_EQ(threads_per_rank(4, 2, 2), 1);      // oversubscribed: 4 ranks on one 2-CPU socket
}

TEST(Cpus, NeverMoreThanTheNodeDividedByItsRanksAndAtLeastOne) {
  for (int online : {1, 2, 3, 16, 128})
    for (int usable = 1; usable <= online; ++usable)
      for (int ranks : {1, 2, 3, 7, 64, 300}) {
        const int t = threads_per_rank(ranks, usable, online);
        EXPECT_GE(t, 1);
        EXPECT_LE(t, usable);
        EXPECT_LE(t, std::max(1, online / ranks))
            << ranks << " ranks, " << usable << " of " << online;
      }
}

// A thread confined to one CPU (as srun or taskset confine a rank) counts that one CPU, and the
// process's other threads keep their own masks.
TEST(Cpus, ATaskConfinedToOneCpuCountsOne) {
  const int all = usable_cpus();
  ASSERT_GE(all, 1);
  EXPECT_LE(all, online_cpus());
  int confined = 0, confined_threads = 0;
  std::thread t([&] {
    cpu_set_t one;
    CPU_ZERO(&one);
    cpu_set_t mine;
    ASSERT_EQ(sched_getaffinity(0, sizeof mine, &mine), 0);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &mine)) {
        CPU_SET(c, &one);
        break;
      }
    ASSERT_EQ(sched_setaffinity(0, sizeof one, &one), 0);
    confined = usable_cpus();
    confined_threads = threads_per_rank(1);
  });
  t.join();
  EXPECT_EQ(confined, 1);
  EXPECT_EQ(confined_threads, 1);
  EXPECT_EQ(usable_cpus(), all);
}

// OMP_NUM_THREADS as OpenMP reads it: the outermost level of a list, blanks around it allowed.
TEST(Cpus, OmpNumThreadsGivesItsFirstEntry) {
  EXPECT_EQ(parse_omp_num_threads(nullptr), 0);
  EXPECT_EQ(parse_omp_num_threads(""), 0);
  EXPECT_EQ(parse_omp_num_threads("  "), 0);
  EXPECT_EQ(parse_omp_num_threads("8"), 8);
  EXPECT_EQ(parse_omp_num_threads(" 16 "), 16);
  EXPECT_EQ(parse_omp_num_threads("4,2"), 4);
  EXPECT_EQ(parse_omp_num_threads("3 ,1"), 3);
}

TEST(Cpus, AnOmpNumThreadsThatIsNoCountIsRefusedNamingTheVariable) {
  for (const char* bad : {"0", "-2", "abc", "4x", "2.5", ",4", "99999999999"}) {
    try {
      parse_omp_num_threads(bad);
      ADD_FAILURE() << "accepted OMP_NUM_THREADS='" << bad << "'";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::usage) << bad;
      const std::string what = e.what();
      EXPECT_NE(what.find(std::string("OMP_NUM_THREADS='") + bad + "'"), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace crest
