// A neighbour that never answers a halo exchange (a rank that died or hangs) is an error naming
// the layer and dist.timeout_s once the communicator's deadline passes, never a silent hang. Run
// by the ctest entry spatial.timeout (2 ranks, a 2 s deadline); skipped in the other runs.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "crest/core/error.hpp"
#include "crest/spatial/halo_exchange.hpp"
#include "world.hpp"

namespace crest {
namespace {

TEST(HaloTimeout, ANeighbourThatNeverAnswersIsAnErrorNamingTheLayer) {
  Communicator& world = test::world();
  if (world.size() != 2 || !std::getenv("CREST_SPATIAL_TEST_TIMEOUT_S"))
    GTEST_SKIP() << "runs as the ctest entry spatial.timeout (2 ranks, a short deadline)";
  // 8 rows of a 3-wide 'same' window over 2 parts: each part needs one row of the other's.
  const WindowAxis w{.in_extent = 8, .out_extent = 8, .kernel = 3, .pad_lo = 1};
  const AxisPlan plan = plan_axis(w, 2, world.rank(), "stalled", "width");
  HaloExchange halo(world, SpatialGrid{{2}}, {1, 1, plan.owned_in.size()}, {{2, plan}}, DType::f32,
                    "layer 'stalled'");
  std::vector<float> owned(static_cast<size_t>(plan.owned_in.size()), 1.f);
  std::vector<float> window(static_cast<size_t>(plan.window.size()));
  if (world.rank() == 0) {
    try {
      halo.gather(owned.data(), window.data());
      ADD_FAILURE() << "the exchange completed without its neighbour";
    } catch (const Error& e) {
      EXPECT_EQ(e.exit_code(), 1);
      const std::string m = e.what();
      EXPECT_NE(m.find("layer 'stalled': halo exchange"), std::string::npos) << m;
      EXPECT_NE(m.find("dist.timeout_s"), std::string::npos) << m;
    }
  }
  // Rank 1 never exchanged: it waits for rank 0 to be done (a polled receive with its own
  // deadline; a collective would itself time out while rank 0 sits in the exchange).
  constexpr int kDone = 77;
  if (world.rank() == 0)
    world.send(1, kDone, std::vector<std::byte>(1));
  else
    world.receive(0, kDone, 120, "the end of rank 0's stalled exchange");
}

}  // namespace
}  // namespace crest
