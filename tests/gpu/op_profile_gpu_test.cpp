// engine/op_profile.h on a GPU (label "gpu"; "skipped: no GPU" elsewhere): kernels are recorded
// with their device time, each in the phase whose code launched it, kvbench's own kernels (no
// ATen operator around their launch) included.
#include "engine/op_profile.h"

#include <gtest/gtest.h>

#include <set>

#include "tests/methods/device_compare.h"

namespace kvb {
namespace {

TEST(Gpu, ProfileGivesEachKernelThePhaseThatLaunchedIt) {
  KVB_REQUIRE_GPU();
  auto model = LlamaModel::from_reference("random-tiny")->to(at::Device(at::kCUDA, 0), at::kFloat);
  std::unique_ptr<Method> quest =
      method_registry().get("quest", "test").create(json{{"page_size", 4}});
  Session session(*model, *quest, SessionOptions{.budget = 8});
  session.prefill(test::parity_prompt(40));
  for (int i = 0; i < 2; ++i) session.decode(5);  // warm-up
  const int steps = 6;
  OpProfile profile(/*device_kernels=*/true);
  for (int i = 0; i < steps; ++i) session.decode(7 + i);
  const std::vector<ProfileRow> rows = profile.finish(steps, "", nullptr);

  // The phases of the kernel rows whose name holds `part` (kernel names come demangled).
  auto phases_of = [&](const std::string& part) {
    std::set<std::string> phases;
    for (const ProfileRow& r : rows)
      if (r.kind == "kernel" && r.name.find(part) != std::string::npos) phases.insert(r.phase);
    return phases;
  };
  double device_us = 0;
  for (const ProfileRow& r : rows)
    if (r.kind == "kernel") device_us += r.us;
  EXPECT_GT(device_us, 0.0) << "no kernel recorded (a LibTorch without Kineto or CUPTI?)";
  // Quest's page scores in its 2 sparse layers of 4 (quest_kernel or, for 16-byte-aligned rows,
  // quest_vector_kernel: "quest_" names no other kernel); the decode attention in every layer.
  EXPECT_EQ(phases_of("quest_"), std::set<std::string>{"select"});
  EXPECT_EQ(phases_of("split_kernel"), std::set<std::string>{"attention"});
  EXPECT_TRUE(phases_of("kvbench::").empty()) << "a scope's device span counted as a kernel";
  for (const ProfileRow& r : rows) {
    if (r.kind == "kernel" && r.name.find("quest_") != std::string::npos) {
      EXPECT_DOUBLE_EQ(r.calls, 2.0) << r.name;
    }
  }
}

}  // namespace
}  // namespace kvb
