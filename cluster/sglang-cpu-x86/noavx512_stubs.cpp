// SGLang's CPU kernels on an x86 CPU without AVX-512/AMX (e.g. AMD EPYC Zen 3): built like the Arm64
// bootstrap (SGLANG_CPU_ARM64_SKIP_X86_ONLY_OPS, -march=native), the int8 GEMM and fused-MoE kernels,
// which exist only as AVX-512/AMX code on x86, are left out. These stubs keep the library loadable;
// a model that needs them (int8 or MoE weights) fails with this message instead of at import.
#if defined(SGLANG_CPU_ARM64_SKIP_X86_ONLY_OPS)
#include <ATen/ATen.h>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#define SWEEP_NOT_BUILT(name) \
  TORCH_CHECK(false, name " is not built on this CPU (no AVX-512/AMX): bf16/fp16 dense models only")

std::tuple<at::Tensor, at::Tensor> per_token_quant_int8_cpu(at::Tensor& A) { SWEEP_NOT_BUILT("per_token_quant_int8_cpu"); }

at::Tensor int8_scaled_mm_cpu(at::Tensor& mat1, at::Tensor& mat2, at::Tensor& scales1, at::Tensor& scales2,
                              const std::optional<at::Tensor>& bias, at::ScalarType out_dtype, bool is_vnni) {
  SWEEP_NOT_BUILT("int8_scaled_mm_cpu");
}

at::Tensor int8_scaled_mm_with_quant(at::Tensor& mat1, at::Tensor& mat2, at::Tensor& scales2,
                                     const std::optional<at::Tensor>& bias, at::ScalarType out_dtype, bool is_vnni) {
  SWEEP_NOT_BUILT("int8_scaled_mm_with_quant");
}

at::Tensor fused_experts_cpu(at::Tensor& hidden_states, at::Tensor& w1, at::Tensor& w2, at::Tensor& topk_weights,
                             at::Tensor& topk_ids, bool inplace, int64_t moe_comp_method,
                             const std::optional<at::Tensor>& w1_scale, const std::optional<at::Tensor>& w2_scale,
                             const std::optional<at::Tensor>& w1_zero, const std::optional<at::Tensor>& w2_zero,
                             const std::optional<std::vector<int64_t>> block_size,
                             const std::optional<at::Tensor>& w1_bias, const std::optional<at::Tensor>& w2_bias,
                             const std::optional<double>& alpha, const std::optional<double>& limit, bool is_vnni,
                             const std::optional<std::string>& activation) {
  SWEEP_NOT_BUILT("fused_experts_cpu");
}
#endif
