// Mixed precision end to end (docs/precision.md): a whole CosmoFlow step in bf16 and fp16 against
// float32 on every backend that runs it, the memory it saves, the 16-bit data input
// (CompileOptions::half_inputs), training and resuming bit for bit in bf16, and the refusal where
// the CPU lacks the instructions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "crest/core/bf16.hpp"
#include "crest/core/fp16.hpp"
#include "crest/graph/executor.hpp"
#include "crest/train/trainer.hpp"
#include "support/cli_util.hpp"
#include "support/host_backends.hpp"
#include "support/test_util.hpp"
#include "support/tiny_run.hpp"

namespace crest {
namespace {

BuiltModel small_cosmoflow() {
  ModelConfig mc;
  mc.name = "cosmoflow";
  mc.attrs.set("input_shape", std::vector<int64_t>{16, 16, 16, 4});
  mc.attrs.set("conv_size", int64_t{8});
  mc.attrs.set("n_conv_layers", int64_t{3});
  mc.attrs.set("dropout", 0.0);
  return build_model(mc);
}

// O(1) inputs and targets in (-1, 1), the same for every executor; a 16-bit input
// (half_inputs) gets them rounded to nearest even, as the float32 program's reorder rounds them.
void fill_batch(Executor& ex, const BuiltModel& m) {
  for (const std::string& name : {m.sample_input, m.target_input}) {
    const TensorView t = ex.input(name);
    for (int64_t i = 0; i < t.numel(); ++i) {
      const auto v = static_cast<float>(std::sin(0.37 * static_cast<double>(i) + 1.0));
      if (t.dtype() == DType::bf16)
        t.as<uint16_t>()[i] = float_to_bf16(v);
      else if (t.dtype() == DType::f16)
        t.as<uint16_t>()[i] = float_to_fp16(v);
      else
        t.as<float>()[i] = v;
    }
  }
}

// The bytes of every tensor block of a plan (activations, gradients, workspaces), without reuse
// and without kernel scratch.
double tensor_bytes(const MemoryPlan& plan) {
  double sum = 0;
  for (const PlanBlock& b : plan.blocks)
    if (b.what.find("scratch") == std::string::npos) sum += static_cast<double>(b.bytes);
  return sum;
}

struct Step {
  double loss;
  std::unique_ptr<Executor> ex;
};

Step one_step(const BuiltModel& m, Backend& backend, std::optional<DType> half,
              bool half_inputs = false) {
  CompileOptions o;
  o.batch = 4;
  o.seed = 3;
  o.half = half;
  o.half_inputs = half_inputs;
  Step s{0, std::make_unique<Executor>(m.graph, backend, o)};
  fill_batch(*s.ex, m);
  s.loss = s.ex->forward();
  s.ex->backward();
  return s;
}

TEST(MixedPrecision, WholeCosmoFlowStepAgreesWithFloat32AndNeedsLessMemory) {
  const BuiltModel m = small_cosmoflow();
  auto reference = make_backend("reference");
  const Step f32 = one_step(m, *reference, std::nullopt);
  int checked = 0;
  for (const DType t : {DType::bf16, DType::f16}) {
    for (const std::string& name : crest::test::host_backend_names()) {
      auto backend = make_backend(name);
      if (!backend->supports_dtype(t)) continue;
      const Step half = one_step(m, *backend, t);
      const std::string what = name + " " + dtype_name(t);
      // The bound for bf16 is 1e-2 relative; fp16 has 3 more mantissa bits.
      const double bound = t == DType::bf16 ? 1e-2 : 2e-3;
      EXPECT_NEAR(half.loss, f32.loss, bound * std::abs(f32.loss)) << what;
      for (size_t s = 0; s < f32.ex->params().slots().size(); ++s)
        EXPECT_LT(test::rel_distance(half.ex->params().grad(s), f32.ex->params().grad(s)), 0.05)
            << what << " " << f32.ex->params().slots()[s].name;
      // Activations in 16 bits: the tensors the plan holds shrink against the same backend's
      // float32 plan (the float32 input and its converted copy keep them above half). Kernel
      // scratch is left out: at these small shapes oneDNN's bf16 kernels ask for more of it.
      const Step same_backend_f32 = one_step(m, *backend, std::nullopt);
      EXPECT_LT(tensor_bytes(half.ex->plan()), 0.8 * tensor_bytes(same_backend_f32.ex->plan()))
          << what;
      ++checked;
    }
  }
  EXPECT_GE(checked, 2) << "the reference backend emulates both 16-bit types";
}

// The plan block of the value named `what` (a graph input's block bears its name).
const PlanBlock* block_named(const MemoryPlan& plan, const std::string& what) {
  for (const PlanBlock& b : plan.blocks)
    if (b.what == what) return &b;
  return nullptr;
}

// half_inputs moves the conversion of the data batch from the first reorder to the caller, with
// the same rounding: loss and gradients are bit-identical, and the plan no longer holds the
// float32 batch (one block of the batch in 16 bits where there were the float32 batch and its
// converted copy).
TEST(MixedPrecision, A16BitDataInputDropsTheFloat32BatchAndChangesNoBit) {
  const BuiltModel m = small_cosmoflow();
  int checked = 0;
  for (const DType t : {DType::bf16, DType::f16}) {
    for (const std::string& name : crest::test::host_backend_names()) {
      auto backend = make_backend(name);
      if (!backend->supports_dtype(t)) continue;
      const std::string what = name + " " + dtype_name(t);
      const Step converted = one_step(m, *backend, t);
      const Step narrowed = one_step(m, *backend, t, /*half_inputs=*/true);
      ASSERT_EQ(narrowed.ex->input(m.sample_input).dtype(), t) << what;
      EXPECT_EQ(narrowed.loss, converted.loss) << what;
      const ParamStore& a = converted.ex->params();
      const ParamStore& b = narrowed.ex->params();
      for (size_t s = 0; s < a.slots().size(); ++s)
        EXPECT_EQ(std::memcmp(a.grad(s).data(), b.grad(s).data(), a.grad(s).bytes()), 0)
            << what << " " << a.slots()[s].name;
      const auto batch = static_cast<size_t>(converted.ex->input(m.sample_input).numel());
      const PlanBlock* x32 = block_named(converted.ex->plan(), m.sample_input);
      const PlanBlock* x16 = block_named(narrowed.ex->plan(), m.sample_input);
      ASSERT_TRUE(x32 && x16) << what;
      EXPECT_EQ(x32->bytes, batch * 4) << what;
      EXPECT_EQ(x16->bytes, batch * 2) << what;
      // Gone: the float32 batch, and the converting reorder's 16-bit copy unless conv1 wants
      // another layout (the reference backend: plain; oneDNN reads channels-last as it is).
      const PlanBlock* relaid = block_named(narrowed.ex->plan(), m.sample_input + ">reorder");
      const size_t copy = relaid ? relaid->bytes : 0;
      EXPECT_EQ(tensor_bytes(converted.ex->plan()) - tensor_bytes(narrowed.ex->plan()),
                static_cast<double>(batch * 4 - copy))
          << what;
      if (name == "onednn") {
        EXPECT_EQ(copy, 0u) << what;
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 2) << "the reference backend emulates both 16-bit types";
}

TEST(MixedPrecision, Bf16TrainingResumesBitIdentically) {
  test::TempDir d;
  const std::string args =
      test::tiny_cosmoflow_args() + " --precision bf16 crest.backend=reference";
  const test::CliRun straight =
      test::run_crest("train " + args + " data.n_epochs=2 output_dir=" + d.file("straight") +
                      " --save-weights " + d.file("straight.safetensors"));
  ASSERT_EQ(straight.code, 0) << straight.out;
  const test::CliRun first =
      test::run_crest("train " + args + " data.n_epochs=1 output_dir=" + d.file("split"));
  ASSERT_EQ(first.code, 0) << first.out;
  const test::CliRun resumed =
      test::run_crest("train --resume " + d.file("split") + " data.n_epochs=2 --save-weights " +
                      d.file("resumed.safetensors"));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  test::expect_same_tensors(d.file("straight.safetensors"), d.file("resumed.safetensors"));
}

// CREST_MAX_CPU_ISA caps what oneDNN (and crest's loops) use, so the refusal is tested the same on
// every machine; the caps of the instruction-set matrix (ONEDNN_MAX_CPU_ISA) are taken away so
// that this one decides.
TEST(MixedPrecision, RefusedNamingTheInstructionsTheCpuLacks) {
  const auto names = crest::test::host_backend_names();
  if (std::find(names.begin(), names.end(), "onednn") == names.end())
    GTEST_SKIP() << "built without the onednn backend";
  const std::string dry =
      " train " + test::tiny_cosmoflow_args() + " crest.backend=onednn --dry-run";
  const test::CliRun bf16 =
      test::run_shell("env -u ONEDNN_MAX_CPU_ISA -u DNNL_MAX_CPU_ISA CREST_MAX_CPU_ISA=AVX2 " +
                      std::string(CREST_BINARY) + dry + " --precision bf16 2>&1");
  EXPECT_EQ(bf16.code, 2) << bf16.out;
  EXPECT_NE(bf16.out.find("crest.precision"), std::string::npos) << bf16.out;
  EXPECT_NE(bf16.out.find("AVX512_BF16"), std::string::npos) << bf16.out;
  const test::CliRun fp16 = test::run_shell(
      "env -u ONEDNN_MAX_CPU_ISA -u DNNL_MAX_CPU_ISA CREST_MAX_CPU_ISA=AVX512_CORE_BF16 " +
      std::string(CREST_BINARY) + dry + " --precision fp16 2>&1");
  EXPECT_EQ(fp16.code, 2) << fp16.out;
  EXPECT_NE(fp16.out.find("AVX512_FP16"), std::string::npos) << fp16.out;
}

}  // namespace
}  // namespace crest
