// OpenBLAS's side of the BLAS door (blas.hpp): which kernel family the library loaded, a
// better one for this CPU chosen by re-executing the program with OPENBLAS_CORETYPE set, idle
// OpenBLAS threads that sleep (OPENBLAS_THREAD_TIMEOUT), and the cores this process may use.
#include <cblas.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <string>

#include "ringtrain/framework/blas.hpp"

namespace ringtrain::blas {

std::string config() {
  return openblas_get_config();
}

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
constexpr const char* kTimeoutMarker = "RINGTRAIN_BLAS_THREAD_TIMEOUT_SET";
constexpr const char* kReexecMarker = "RINGTRAIN_BLAS_REEXECUTED";
// 2^4 cycles, OpenBLAS's least: a worker whose product has ended sleeps at once instead of
// spinning for 2^28 cycles (~0.1 s, the default) on a core that the framework's own
// ThreadPool parts (Conv2d, the optimizer) need next, which makes the SGD update markedly
// faster at 2 threads (bench/README-gemm.md, "Idle OpenBLAS threads"). A product now wakes
// its workers (a futex wake, microseconds).
constexpr const char* kThreadTimeout = "4";

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
  if (std::getenv(kReexecMarker)) return;  // this is the re-executed program
  const char* policy = std::getenv("RINGTRAIN_BLAS_CORETYPE");
  const bool keep_core = policy && std::string(policy) == "keep";
  const std::string better =
      keep_core || std::getenv("OPENBLAS_CORETYPE") ? std::string() : better_core_type();
  const bool set_timeout = std::getenv("OPENBLAS_THREAD_TIMEOUT") == nullptr;
  if (better.empty() && !set_timeout) return;
  const std::string fallback = core_name();
  bool ok = setenv(kReexecMarker, "1", 1) == 0;
  if (ok && !better.empty())
    ok = setenv("OPENBLAS_CORETYPE", better.c_str(), 1) == 0 &&
         setenv(kChosenMarker, fallback.c_str(), 1) == 0;
  if (ok && set_timeout)
    ok = setenv("OPENBLAS_THREAD_TIMEOUT", kThreadTimeout, 1) == 0 &&
         setenv(kTimeoutMarker, "1", 1) == 0;
  if (ok) execv("/proc/self/exe", argv);
  // setenv or exec failed: carry on with what the library loaded (core_report says so).
  for (const char* name : {kReexecMarker, kChosenMarker, kTimeoutMarker}) unsetenv(name);
  if (!better.empty()) unsetenv("OPENBLAS_CORETYPE");
  if (set_timeout) unsetenv("OPENBLAS_THREAD_TIMEOUT");
}

std::string core_report() {
  std::string report = "OpenBLAS kernels " + core_name();
  if (const char* fallback = std::getenv(kChosenMarker))
    report += std::string(" (OPENBLAS_CORETYPE set by ringtrain: OpenBLAS took this CPU for ") +
              fallback + "; RINGTRAIN_BLAS_CORETYPE=keep turns this off)";
  else if (const std::string better = better_core_type(); !better.empty()) {
    report += " (slow: this CPU supports " + better;
    if (const char* pinned = std::getenv("OPENBLAS_CORETYPE"))
      report += std::string("; OPENBLAS_CORETYPE=") + pinned +
                " in the environment chose these: unset it, or set it to " + better + ")";
    else
      report += "; set OPENBLAS_CORETYPE=" + better + ")";
  }
  // OpenBLAS sizes some blocks from this: worth a line when a machine pins it (its effect:
  // bench/README-dp.md, "OpenBLAS pins in the environment").
  if (const char* l2 = std::getenv("OPENBLAS_L2_SIZE"))
    report += std::string("; OPENBLAS_L2_SIZE=") + l2 + " in the environment";
  const char* timeout = std::getenv("OPENBLAS_THREAD_TIMEOUT");
  if (std::getenv(kTimeoutMarker) && timeout)
    report += std::string("; idle OpenBLAS threads sleep: OPENBLAS_THREAD_TIMEOUT=") + timeout;
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
