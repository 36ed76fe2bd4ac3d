// Where a decode step makes the host wait for the GPU (label "gpu"; "skipped: no GPU"
// elsewhere). Issue 21 asks for no per-layer host synchronisation: a wait in the middle of a
// step leaves the GPU idle until the host has launched the next kernels.
#include <gtest/gtest.h>

#include <torch/cuda.h>

#include <iostream>

#include "engine/device.h"
#include "tests/methods/device_compare.h"

namespace kvb {
namespace {


TEST(Gpu, DeviceSyncCounterCountsReadsOfTheDeviceOnly) {
  KVB_REQUIRE_GPU();
  const at::Device gpu(at::kCUDA, 0);
  const at::Tensor x = at::ones({1024}, at::TensorOptions(gpu));
  const DeviceSyncCounter syncs(gpu);
  ASSERT_TRUE(syncs.counting());
  const at::Tensor y = x * 2 + 1;  // launches only
  EXPECT_EQ(syncs.count(), 0);
  EXPECT_EQ(y.sum().item<float>(), 3072.f);  // a read of a device value
  EXPECT_EQ(syncs.count(), 1);
  EXPECT_EQ(y.cpu().size(0), 1024);  // a copy to the host
  EXPECT_EQ(syncs.count(), 2);
}

// A HostCopy queues its copy without a wait; wait() gives the device's values.
TEST(Gpu, HostCopyQueuesTheCopyWithoutWaitingAndLandsTheValues) {
  KVB_REQUIRE_GPU();
  const at::Device gpu(at::kCUDA, 0);
  const at::Tensor x = at::arange(1 << 22, at::TensorOptions(gpu).dtype(at::kInt));  // [4 Mi]
  const DeviceSyncCounter syncs(gpu);
  ASSERT_TRUE(syncs.counting());
  at::Tensor y = x * 3;
  for (int i = 0; i < 20; ++i) y = y + 1;  // work queued ahead of the copy
  const HostCopy copy(y);
  EXPECT_EQ(syncs.count(), 0);
  const at::Tensor& host = copy.wait();
  ASSERT_TRUE(host.device().is_cpu());
  const int32_t* p = host.data_ptr<int32_t>();
  for (const int64_t i : {int64_t(0), int64_t(12345), (int64_t(1) << 22) - 1})
    EXPECT_EQ(p[i], int32_t(3 * i + 20)) << i;
  EXPECT_EQ(syncs.count(), 0);  // an event's wait, not a read of the device
}

// A SideStream's work runs after the current stream's work queued before it (x is written at
// the end of a long queue; the side stream reads it), and the current stream's work after
// join runs after the side stream's; neither makes the host wait.
TEST(Gpu, SideStreamRunsAfterTheQueuedWorkAndJoinsBeforeTheNext) {
  KVB_REQUIRE_GPU();
  const at::Device gpu(at::kCUDA, 0);
  const c10::InferenceMode inference;  // as in a session
  at::Tensor a = at::randn({2048, 2048}, at::TensorOptions(gpu));
  at::Tensor x = at::zeros({1 << 24}, at::TensorOptions(gpu));
  SideStream side(gpu);
  const DeviceSyncCounter syncs(gpu);
  ASSERT_TRUE(syncs.counting());
  for (int i = 0; i < 30; ++i) a = at::matmul(a, a).div_(2048.0);  // milliseconds queued
  x.fill_(1.f);
  at::Tensor y;
  side.run({x}, [&] { y = x * 2; });
  side.join({y});
  const at::Tensor z = y + 1;
  EXPECT_EQ(syncs.count(), 0);
  EXPECT_EQ(z.min().item<float>(), 3.f);  // not 1: the side stream did not read x's zeros
  EXPECT_EQ(z.max().item<float>(), 3.f);
}

// ClusterKV's build: overlap adds no host wait to the prefill (build: inline waits for each
// Lloyd step's labels), and decodes as build: inline does (fp32 logits within 1e-3: the
// clusters are the same but for the mean update's float atomics). clusterkv:efficiency in
// bf16 (the tensor-core assignment on the side stream) adds none either.
TEST(Gpu, ClusterkvOverlapBuildPrefillsWithoutWaitingAndDecodesAsInline) {
  KVB_REQUIRE_GPU();
  auto model = LlamaModel::from_reference("random-tiny")->to(at::Device(at::kCUDA, 0), at::kFloat);
  const std::vector<int> prompt = test::parity_prompt(300);
  const MethodInfo& info = method_registry().get("clusterkv", "test");
  struct Run {
    int64_t prefill_syncs = 0;
    std::vector<at::Tensor> logits;
  };
  auto run = [&](const std::string& build) {
    std::unique_ptr<Method> method =
        info.create(info.normalise_config({{"build", build}}, "clusterkv"));
    Session session(*model, *method, SessionOptions{.budget = 64});
    Run r;
    {
      const DeviceSyncCounter syncs(at::Device(at::kCUDA, 0));
      r.logits.push_back(session.prefill(prompt));
      r.prefill_syncs = syncs.count();
    }
    r.logits.back() = r.logits.back().to(at::kCPU);
    for (int t = 0; t < 12; ++t) r.logits.push_back(session.decode(5 + (t * 11) % 200).to(at::kCPU));
    return r;
  };
  const MethodInfo& full_info = method_registry().get("full", "test");
  std::unique_ptr<Method> full = full_info.create(full_info.normalise_config(json::object(), "full"));
  Session full_session(*model, *full, SessionOptions{});
  int64_t full_syncs = 0;
  {
    const DeviceSyncCounter syncs(at::Device(at::kCUDA, 0));
    full_session.prefill(prompt);
    full_syncs = syncs.count();
  }
  const Run inline_run = run("inline"), overlap_run = run("overlap");
  std::cout << "  prefill syncs: full " << full_syncs << ", clusterkv inline "
            << inline_run.prefill_syncs << ", overlap " << overlap_run.prefill_syncs << "\n";
  EXPECT_EQ(overlap_run.prefill_syncs, full_syncs);
  EXPECT_GT(inline_run.prefill_syncs, full_syncs);
  for (size_t i = 0; i < inline_run.logits.size(); ++i) {
    const double scale = inline_run.logits[i].abs().max().item<double>();
    EXPECT_LT((overlap_run.logits[i] - inline_run.logits[i]).abs().max().item<double>() / scale,
              1e-3) << "step " << i;
  }
  // The efficiency code's settings in bf16: the tensor-core assignment beside the prefill,
  // still no wait, finite logits.
  auto bf16_model = LlamaModel::from_reference("random-tiny")->to(at::Device(at::kCUDA, 0), at::kBFloat16);
  const MethodChoice efficiency = resolve_method("clusterkv:efficiency", json::object(), "t", "t.c");
  std::unique_ptr<Method> method = efficiency.info->create(efficiency.config);
  std::unique_ptr<Method> bf16_full = full_info.create(full_info.normalise_config(json::object(), "full"));
  Session full_bf16(*bf16_model, *bf16_full, SessionOptions{});
  Session session(*bf16_model, *method, SessionOptions{.budget = 64});
  int64_t full_bf16_syncs = 0, efficiency_syncs = 0;
  {
    const DeviceSyncCounter syncs(at::Device(at::kCUDA, 0));
    full_bf16.prefill(prompt);
    full_bf16_syncs = syncs.count();
  }
  {
    const DeviceSyncCounter syncs(at::Device(at::kCUDA, 0));
    session.prefill(prompt);
    efficiency_syncs = syncs.count();
  }
  EXPECT_EQ(efficiency_syncs, full_bf16_syncs);
  for (int t = 0; t < 6; ++t)
    EXPECT_TRUE(session.decode(5 + t).to(at::kCPU, at::kFloat).isfinite().all().item<bool>()) << t;
}

// No decode step waits for the device (its token's read is the caller's, after the step), but
// H2O's, once per step: its victims, read when the next step begins. PQCache's cache
// accounting copies its fetched blocks every 32 steps without a wait (its thread waits):
// 40 steps cover one. Each method's count is printed, per decode step.
TEST(Gpu, DecodeStepsWaitForTheDeviceNowhereButH2osVictims) {
  KVB_REQUIRE_GPU();
  auto model = LlamaModel::from_reference("random-tiny")->to(at::Device(at::kCUDA, 0), at::kBFloat16);
  const std::vector<int> prompt = test::parity_prompt(200);
  constexpr int kSteps = 40;
  for (const MethodInfo* m : method_registry().all()) {
    std::unique_ptr<Method> method = m->create(m->normalise_config(json::object(), m->name));
    Session session(*model, *method, SessionOptions{.budget = m->uses_budget ? 64 : 0});
    session.prefill(prompt);
    for (int t = 0; t < kSteps; ++t) session.decode(5 + (t * 11) % 200);
    const SessionTimings& timings = session.timings();
    ASSERT_TRUE(timings.syncs_counted) << m->name;
    std::cout << "  " << m->name << ": " << double(timings.decode_syncs) / kSteps
              << " device syncs per decode step (" << model->config.num_hidden_layers
              << " layers)\n";
    if (m->name == "h2o") {
      EXPECT_LE(timings.decode_syncs, kSteps) << m->name;
    } else {
      EXPECT_EQ(timings.decode_syncs, 0) << m->name;
    }
  }
}

}  // namespace
}  // namespace kvb
