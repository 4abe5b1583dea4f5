// The single file that talks to cblas (STYLE: each BLAS call wrapped once).
#include "ringtrain/framework/blas.hpp"

#include <cblas.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

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

namespace {

// Instruction-set level of a kernel family or of the CPU: 3 AVX-512, 2 AVX2+FMA, 1 older.
int level_of_core(std::string name) {
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  for (const char* avx512 : {"skylakex", "cooperlake", "sapphirerapids"})
    if (name == avx512) return 3;
  for (const char* avx2 : {"haswell", "zen", "skylake"})
    if (name == avx2) return 2;
  return 1;
}

int level_of_cpu() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return 3;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return 2;
  return 1;
}

constexpr const char* kChosenMarker = "RINGTRAIN_BLAS_CORETYPE_CHOSEN";

}  // namespace

std::string core_name() {
  const char* name = openblas_get_corename();
  return name ? name : "unknown";
}

std::string better_core_type() {
  const int cpu = level_of_cpu();
  if (cpu <= level_of_core(core_name())) return "";
  return cpu == 3 ? "SkylakeX" : "Haswell";
}

void reexec_with_better_core(char** argv) {
  const char* policy = std::getenv("RINGTRAIN_BLAS_CORETYPE");
  if (policy && std::string(policy) == "keep") return;
  if (std::getenv("OPENBLAS_CORETYPE") || std::getenv(kChosenMarker)) return;
  const std::string better = better_core_type();
  if (better.empty()) return;
  const std::string fallback = core_name();
  if (setenv("OPENBLAS_CORETYPE", better.c_str(), 1) != 0 ||
      setenv(kChosenMarker, fallback.c_str(), 1) != 0)
    return;
  execv("/proc/self/exe", argv);
  // exec failed: carry on with the kernels we have (core_report says so).
  unsetenv("OPENBLAS_CORETYPE");
}

std::string core_report() {
  std::string report = "OpenBLAS kernels " + core_name();
  if (const char* fallback = std::getenv(kChosenMarker))
    report += std::string(" (OPENBLAS_CORETYPE set by ringtrain: OpenBLAS took this CPU for ") +
              fallback + "; RINGTRAIN_BLAS_CORETYPE=keep turns this off)";
  else if (const std::string better = better_core_type(); !better.empty())
    report += " (slow: this CPU supports " + better + "; set OPENBLAS_CORETYPE=" + better + ")";
  return report;
}

int available_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  const int n = CPU_COUNT(&set);
  return n > 0 ? n : 1;
}

}  // namespace ringtrain::blas
