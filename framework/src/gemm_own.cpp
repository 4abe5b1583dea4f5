// The own kernels of this CPU (gemm_own.hpp): AVX-512 where the CPU has AVX-512F, else AVX2.
#include "ringtrain/framework/gemm_own.hpp"

namespace ringtrain::blas::own {

Isa isa() {
  static const Isa found = [] {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return Isa::kAvx512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return Isa::kAvx2;
    return Isa::kNone;
  }();
  return found;
}

const char* isa_name() {
  return isa() == Isa::kAvx512 ? "AVX-512" : "AVX2";
}

Strides natural_strides(Op op, int m, int n, int k) {
  return {op == Op::kAtB ? m : k, op == Op::kABt ? k : n, n};
}

WorkspaceSize workspace_size(Op op, int m, int n, int k) {
  return isa() == Isa::kAvx512 ? avx512::workspace_size(op, m, n, k)
                               : avx2::workspace_size(op, m, n, k);
}

void gemm(Op op, int m, int n, int k, const float* a, const float* b, float* c, const Strides& ld,
          bool accumulate, const Workspace& ws) {
  if (isa() == Isa::kAvx512)
    avx512::gemm(op, m, n, k, a, b, c, ld, accumulate, ws);
  else
    avx2::gemm(op, m, n, k, a, b, c, ld, accumulate, ws);
}

void gemm(Op op, int m, int n, int k, const float* a, const float* b, float* c, bool accumulate,
          const Workspace& ws) {
  own::gemm(op, m, n, k, a, b, c, natural_strides(op, m, n, k), accumulate, ws);
}

}  // namespace ringtrain::blas::own
