// The oneDNN CPU backend. Everything that calls oneDNN lives in this folder, so moving to a newer
// oneDNN (3.x changed the descriptor API) touches nothing else in crest.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "crest/backends/kernels.hpp"
#include "onednn/context.hpp"

namespace crest {

std::unique_ptr<Backend> make_onednn_backend();

namespace onednn {
// The engine and stream of a oneDNN backend, for the kernels it registers with
// CREST_REGISTER_KERNEL (their makers receive only the Backend). Throws crest::Error (usage)
// when `backend` is not the onednn backend.
ContextPtr backend_context(Backend& backend);
// Whether this backend computes in `dtype` on this CPU, and why not (dtype_support.cpp).
Support dtype_support(DType dtype);

// oneDNN's effective instruction set ("AVX2", "AVX-512 BF16", ...: ONEDNN_MAX_CPU_ISA caps it).
std::string isa_name(dnnl::cpu_isa isa);
// oneDNN's level for one of its ONEDNN_MAX_CPU_ISA spellings (case-insensitive), or nullopt.
std::optional<dnnl::cpu_isa> isa_named(const std::string& name);
// Caps oneDNN at CREST_MAX_CPU_ISA where that is set (once per process, before any primitive),
// so one variable caps oneDNN's kernels and crest's own loops (widest_vectors.hpp); validates the
// capping variable in effect. Every onednn backend calls it when created.
void apply_isa_cap();
// Whether oneDNN runs bf16 products on AMX tiles here (the effective instruction set, after any
// cap): they outrun float32 arithmetic several times over.
bool amx_bf16_kernels();
// What this process dispatches to: "oneDNN AVX2, crest loops AVX-512" (bench peak, run logs).
std::string instruction_sets();
}  // namespace onednn

}  // namespace crest
