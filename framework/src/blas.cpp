// The single file that talks to cblas (STYLE: each BLAS call wrapped once).
#include "ringtrain/framework/blas.hpp"

#include <cblas.h>
#include <sched.h>

namespace ringtrain::blas {

void gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
          const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  const int lda = trans_a == Trans::kNo ? k : m;
  const int ldb = trans_b == Trans::kNo ? n : k;
  cblas_sgemm(CblasRowMajor, trans_a == Trans::kNo ? CblasNoTrans : CblasTrans,
              trans_b == Trans::kNo ? CblasNoTrans : CblasTrans, m, n, k, alpha, a,
              lda > 0 ? lda : 1, b, ldb > 0 ? ldb : 1, beta, c, n);
}

void set_threads(int threads) { openblas_set_num_threads(threads < 1 ? 1 : threads); }
int threads() { return openblas_get_num_threads(); }

ScopedThreads::ScopedThreads(int threads) : previous_(openblas_get_num_threads()) {
  if (threads != previous_) set_threads(threads);
}
ScopedThreads::~ScopedThreads() {
  if (openblas_get_num_threads() != previous_) set_threads(previous_);
}
std::string config() { return openblas_get_config(); }

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  const int n = CPU_COUNT(&set);
  return n > 0 ? n : 1;
}

}  // namespace ringtrain::blas
