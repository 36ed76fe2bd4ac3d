// engine/op_profile.h on the CPU: host operators only (the device's kernels: on a GPU, through
// `kvbench generate --profile`).
#include "engine/op_profile.h"

#include <gtest/gtest.h>

#include <set>

#include "engine/session.h"
#include "methods/method.h"

namespace kvb {
namespace {

double sum_us(const std::vector<ProfileRow>& rows, const std::string& phase) {
  double us = 0;
  for (const ProfileRow& r : rows)
    if (r.kind == "op" && (phase.empty() ? r.phase != "none" : r.phase == phase)) us += r.us;
  return us;
}

// The operators' self times and the scopes' own code add up to the host time of the decode
// steps recorded (the session's own clock), and each phase has its share.
TEST(OpProfile, RowsAccountForTheHostTimeOfEveryStepRecorded) {
  auto model = LlamaModel::from_reference("random-tiny");
  std::unique_ptr<Method> quest =
      method_registry().get("quest", "test").create(json{{"page_size", 4}});
  Session session(*model, *quest, SessionOptions{.budget = 8});
  std::vector<int> prompt;
  for (int i = 0; i < 40; ++i) prompt.push_back(3 + i % 50);
  session.prefill(prompt);
  for (int i = 0; i < 2; ++i) session.decode(5);  // warm-up
  const double host_before = session.timings().decode_host_s;
  const int steps = 6;
  OpProfile profile(/*device_kernels=*/false);
  for (int i = 0; i < steps; ++i) session.decode(7 + i);
  std::string note = "unchanged";
  const std::vector<ProfileRow> rows = profile.finish(steps, "", &note);
  EXPECT_EQ(note, "");  // no trace asked for

  const double step_us = 1e6 * (session.timings().decode_host_s - host_before) / steps;
  EXPECT_NEAR(sum_us(rows, ""), step_us, 0.15 * step_us);
  std::set<std::string> kinds, phases;
  for (const ProfileRow& r : rows) kinds.insert(r.kind), phases.insert(r.phase);
  EXPECT_EQ(kinds, std::set<std::string>{"op"});  // no kernels, no CUDA calls on the CPU
  for (const std::string phase : {"decode", "select", "attention"}) {
    EXPECT_TRUE(phases.count(phase)) << phase;
    EXPECT_GT(sum_us(rows, phase), 0.0) << phase;
  }
  // Quest widens its last page's summary on every append of a sparse layer: in its phase.
  bool widened = false;
  for (const ProfileRow& r : rows)
    widened |= r.name == "aten::minimum" && r.phase == "select" && r.calls >= 1;
  EXPECT_TRUE(widened);
  EXPECT_THROW(profile.finish(steps, "", nullptr), std::logic_error);
}

TEST(OpProfile, TsvHasAHeaderAndALinePerRow) {
  const std::vector<ProfileRow> rows = {{"select", "kernel", "quest_kernel", 30, 12.5},
                                        {"decode", "op", "aten::mm", 2, 1.25}};
  EXPECT_EQ(profile_tsv(rows),
            "phase\tkind\tname\tcalls_per_step\tus_per_step\n"
            "select\tkernel\tquest_kernel\t30.00\t12.50\n"
            "decode\top\taten::mm\t2.00\t1.25\n");
  const std::string summary = profile_summary(rows, 1);
  EXPECT_NE(summary.find("device time of kernels per step: 12.5 us; select 12.5 (100.0%)"),
            std::string::npos)
      << summary;
  EXPECT_NE(summary.find("quest_kernel"), std::string::npos) << summary;
}

}  // namespace
}  // namespace kvb
