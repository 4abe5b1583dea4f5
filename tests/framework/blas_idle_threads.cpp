// Do OpenBLAS's worker threads sleep after a product, or spin? (blas.hpp, "Threads")
//
//   blas_idle_threads --expect sleep|spin
//
// Calls blas::reexec_with_better_core as ringtrain's main does, runs a two-thread 1024³
// sgemm, then sleeps 200 ms and measures the CPU time the whole process used meanwhile
// (getrusage: all threads). A worker that spins burns its core for OpenBLAS's timeout
// (2^28 cycles, ~0.1 s, by default); one that sleeps burns next to nothing.
//   sleep: ringtrain's setting (OPENBLAS_THREAD_TIMEOUT unset before start): < 10 ms.
//   spin:  the control, OPENBLAS_THREAD_TIMEOUT=28 given: > 30 ms, which shows that the
//          measurement sees a spinning worker.
// Exit 0 when the expectation holds, 1 with the measured figures when it does not, 77 (ctest:
// skipped) where OpenBLAS gives the process one thread only and nothing can spin.
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "ringtrain/framework/blas.hpp"

namespace {

double cpu_s() {
  rusage use{};
  getrusage(RUSAGE_SELF, &use);
  return double(use.ru_utime.tv_sec + use.ru_stime.tv_sec) +
         1e-6 * double(use.ru_utime.tv_usec + use.ru_stime.tv_usec);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ringtrain;
  blas::reexec_with_better_core(argv);
  const std::string expect = argc == 3 && std::string(argv[1]) == "--expect" ? argv[2] : "";
  if (expect != "sleep" && expect != "spin") {
    std::fprintf(stderr, "usage: blas_idle_threads --expect sleep|spin\n");
    return 2;
  }
  const char* timeout = std::getenv("OPENBLAS_THREAD_TIMEOUT");
  std::printf("%s; OPENBLAS_THREAD_TIMEOUT=%s\n", blas::core_report().c_str(),
              timeout ? timeout : "(unset)");
  blas::set_threads(2);
  if (blas::threads() < 2) {
    std::printf("OpenBLAS gives this process %d thread(s): nothing can spin here (skipped)\n",
                blas::threads());
    return 77;
  }
  constexpr int kN = 1024;
  std::vector<float> a(kN * kN, 0.5f), b(kN * kN, 0.25f), c(kN * kN);
  for (int i = 0; i < 3; ++i)
    blas::gemm(blas::Trans::kNo, blas::Trans::kNo, kN, kN, kN, 1.0f, a.data(), b.data(), 0.0f,
               c.data());
  const double before = cpu_s();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const double idle_ms = 1e3 * (cpu_s() - before);
  std::printf("CPU time while the caller slept 200 ms after the products: %.1f ms\n", idle_ms);
  const bool ok = expect == "sleep" ? idle_ms < 10.0 : idle_ms > 30.0;
  std::printf("%s: expected the workers to %s (%s)\n", ok ? "ok" : "FAIL", expect.c_str(),
              expect == "sleep" ? "< 10 ms" : "> 30 ms");
  return ok ? 0 : 1;
}
