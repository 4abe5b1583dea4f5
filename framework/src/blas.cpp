// The single file that talks to cblas (STYLE: each BLAS call wrapped once).
#include "ringtrain/framework/blas.hpp"

#include <cblas.h>
#include <cpuid.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/gemm_own.hpp"
#include "ringtrain/framework/thread_pool.hpp"

namespace ringtrain::blas {

namespace {

// The choice of kernels; written once at start-up (set_kernels), read by every product.
std::atomic<Kernels> g_kernels{Kernels::kOpenBlas};

// The rank's threads for the own kernels' blocks (see own_gemm). Process-wide like OpenBLAS's
// thread count, which decides how many of them a product uses; made by set_threads when the
// count first exceeds what it has, and never shrunk (ScopedThreads lowers the count for a
// parallel region of a layer and raises it again after).
std::unique_ptr<ThreadPool> g_pool;

// Scratch of the own kernels, per calling thread (Conv2d's parts call gemm concurrently, and
// each pool thread computes its own block).
struct OwnScratch {
  std::vector<float> a_pack, b_pack, tile;
};
thread_local OwnScratch own_scratch;

using own::Op;

// A block of C: rows [row0, row0 + rows), columns [col0, col0 + cols).
struct Block {
  int row0, rows, col0, cols;
};

// How C is cut into the blocks of the threads: along rows or columns, in units of `unit`
// (the drivers' tile sizes, so that no thread gets a ragged tile inside its block). C's
// elements are each computed whole by one thread, and each is summed over k in the order the
// driver fixes whatever the block (gemm_own.hpp), so the cut changes no bit.
//   y = x·Wᵀ  (A·Bᵀ): on AVX-512, by 64-sample row blocks while there are as many as threads
//             (each thread reads all of W once and packs only its own samples), else by
//             columns of 48 (W's rows split; each thread packs all the samples). On AVX2 by
//             columns of 48: its driver packs W, so each thread then packs only its part.
//   dW = dyᵀ·x (Aᵀ·B): by rows of 8 (the output features of dW).
//   dx = dy·W  (A·B): by columns of 48 (each thread streams its columns of W).
struct Cut {
  bool by_rows;
  int unit, extent;
  int units() const { return (extent + unit - 1) / unit; }
};

Cut cut_of(Op op, int m, int n, int threads) {
  constexpr int kSampleBlock = 64, kRowUnit = 8, kColumnUnit = 48;
  if (op == Op::kAtB) return {true, kRowUnit, m};
  if (op == Op::kABt && own::isa() == own::Isa::kAvx512 &&
      (m + kSampleBlock - 1) / kSampleBlock >= threads)
    return {true, kSampleBlock, m};
  return {false, kColumnUnit, n};
}

// Work that pays for a product's thread (waking one costs microseconds).
constexpr double kMinFlopsPerPart = 4e6;

// Threads an m x n x k product has work for: one per kMinFlopsPerPart, at least one.
int threads_for_work(int m, int n, int k) {
  const double flops = 2.0 * m * n * k;
  return static_cast<int>(std::clamp(flops / kMinFlopsPerPart, 1.0, 1024.0));
}

// Threads a product takes on the own kernels: at most `threads`, one unit each, and no more
// than it has work for.
int parts_of(const Cut& cut, int m, int n, int k, int threads) {
  return std::max(1, std::min({threads, cut.units(), threads_for_work(m, n, k)}));
}

Block block_of(const Cut& cut, int part, int parts, int m, int n) {
  const long units = cut.units();
  const int begin = static_cast<int>(part * units / parts) * cut.unit;
  const int end = std::min(cut.extent, static_cast<int>((part + 1) * units / parts) * cut.unit);
  return cut.by_rows ? Block{begin, end - begin, 0, n} : Block{0, m, begin, end - begin};
}

// One block of C = op(A, B) on the own kernels, on the calling thread.
void own_block(Op op, int m, int n, int k, const float* a, const float* b, float* c,
               bool accumulate, const Block& blk) {
  // Rows of A, B and C as stored, and where the block starts in each.
  const own::Strides ld = own::natural_strides(op, m, n, k);
  const long a_offset = op == Op::kAtB ? blk.row0 : static_cast<long>(blk.row0) * k;
  const long b_offset = op == Op::kABt ? static_cast<long>(blk.col0) * k : blk.col0;
  const long c_offset = static_cast<long>(blk.row0) * n + blk.col0;
  const own::WorkspaceSize size = own::workspace_size(op, blk.rows, blk.cols, k);
  OwnScratch& s = own_scratch;
  if (s.a_pack.size() < size.a_pack) s.a_pack.resize(size.a_pack);
  if (s.b_pack.size() < size.b_pack) s.b_pack.resize(size.b_pack);
  if (s.tile.size() < size.tile) s.tile.resize(size.tile);
  own::gemm(op, blk.rows, blk.cols, k, a + a_offset, b + b_offset, c + c_offset, ld, accumulate,
            {s.a_pack.data(), s.b_pack.data(), s.tile.data()});
}

// Threads a parallel loop may take now: OpenBLAS's count, as far as the pool has them.
int pool_threads() {
  return g_pool
             ? std::min<int>(openblas_get_num_threads(), static_cast<int>(g_pool->participants()))
             : 1;
}

// C = op(A, B) on the own kernels, its blocks on the rank's threads (part 0 on the caller).
void own_gemm(Op op, int m, int n, int k, const float* a, const float* b, float* c,
              bool accumulate) {
  const int threads = pool_threads();
  const Cut cut = cut_of(op, m, n, threads);
  const int parts = parts_of(cut, m, n, k, threads);
  if (parts == 1) {
    own_block(op, m, n, k, a, b, c, accumulate, {0, m, 0, n});
    return;
  }
  auto body = [&](std::size_t part) {
    own_block(op, m, n, k, a, b, c, accumulate, block_of(cut, static_cast<int>(part), parts, m, n));
  };
  g_pool->run(static_cast<std::size_t>(parts), body);
}

}  // namespace

void gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
          const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  const bool own = g_kernels.load(std::memory_order_relaxed) == Kernels::kOwn;
  if (own && alpha == 1.0f && (beta == 0.0f || beta == 1.0f) &&
      own_kernels_take(trans_a, trans_b, m, n, k)) {
    const Op op = trans_b == Trans::kYes ? Op::kABt : trans_a == Trans::kYes ? Op::kAtB : Op::kAB;
    own_gemm(op, m, n, k, a, b, c, beta == 1.0f);
    return;
  }
  // Under kOwn the rest runs on OpenBLAS single-threaded: its threaded products are not
  // bitwise those of one thread (dx = dy·W at 128 x 1024 x 1024 differs), and under kOwn no
  // bit depends on the thread count. Otherwise OpenBLAS takes no more threads than the
  // product has work for: on the mlp's 10-class layer, two were slower than one
  // (bench/README-gemm.md, "Small products on one thread").
  const int useful = own ? 1 : threads_for_work(m, n, k);
  std::optional<ScopedThreads> fewer;
  if (useful < threads()) fewer.emplace(useful);
  const int lda = trans_a == Trans::kNo ? k : m;
  const int ldb = trans_b == Trans::kNo ? n : k;
  cblas_sgemm(CblasRowMajor, trans_a == Trans::kNo ? CblasNoTrans : CblasTrans,
              trans_b == Trans::kNo ? CblasNoTrans : CblasTrans, m, n, k, alpha, a,
              lda > 0 ? lda : 1, b, ldb > 0 ? ldb : 1, beta, c, n);
}

void gemm_row_stable(Trans trans_a, Trans trans_b, int m, int n, int k, const float* a,
                     const float* b, bool accumulate, float* c) {
  if (!own_kernels_supported())
    throw Error("gemm_row_stable: this CPU has neither AVX-512F nor AVX2 and FMA");
  if (m == 0 || n == 0) return;
  const Op op = trans_b == Trans::kYes ? Op::kABt : trans_a == Trans::kYes ? Op::kAtB : Op::kAB;
  own_gemm(op, m, n, k, a, b, c, accumulate);
}

void set_threads(int threads) {
  threads = std::max(1, threads);
  openblas_set_num_threads(threads);
  if (threads > 1 && (!g_pool || static_cast<int>(g_pool->participants()) < threads))
    g_pool = std::make_unique<ThreadPool>(static_cast<std::size_t>(threads));
}
int threads() {
  return openblas_get_num_threads();
}

void parallel_ranges(std::size_t n, std::size_t min_per_part, RangeFn fn, void* context) {
  constexpr std::size_t kLine = 16;  // floats per 64-byte cache line
  const auto budget = static_cast<std::size_t>(pool_threads());
  const std::size_t parts =
      std::max<std::size_t>(1, std::min(budget, n / std::max<std::size_t>(1, min_per_part)));
  if (parts == 1) {
    fn(context, 0, n);
    return;
  }
  auto begin_of = [&](std::size_t part) {
    return part == parts ? n : part * n / parts / kLine * kLine;
  };
  auto body = [&](std::size_t part) { fn(context, begin_of(part), begin_of(part + 1)); };
  g_pool->run(parts, body);
}

ScopedThreads::ScopedThreads(int threads) : previous_(openblas_get_num_threads()) {
  if (threads != previous_) set_threads(threads);
}
ScopedThreads::~ScopedThreads() {
  if (openblas_get_num_threads() != previous_) set_threads(previous_);
}
std::string config() {
  return openblas_get_config();
}

// The products the own kernels were measured faster on (bench/README-gemm.md, "Where the own
// kernels are taken"), on a Linear layer with both feature sizes >= 64 and a batch of at
// least 48 samples:
// * y = x·Wᵀ (A·Bᵀ) up to 256 samples, so the evaluation's chunks of 256 take them too; by
//   512 samples OpenBLAS draws level.
// * dW = dyᵀ·x (Aᵀ·B) up to 128 samples: above, OpenBLAS's blocking wins.
// * dx = dy·W (A·B) while dx itself is at most 128 x 1024 floats (512 KB): the B-streaming
//   driver keeps all of its block of dx in a scratch tile, which must stay in L2; wider or
//   taller dx, with W out of cache, is faster on OpenBLAS.
// Winograd's products (32 channels) and the small-channel convolutions stay with OpenBLAS,
// which was faster there; so does the 10-class output layer.
bool own_kernels_take(Trans trans_a, Trans trans_b, int m, int n, int k) {
  constexpr int kMinBatch = 48, kMaxBatchAtB = 128, kMaxBatchABt = 256, kMinFeatures = 64;
  constexpr long kMaxStreamedC = 128 * 1024;  // A·B: elements of C the scratch tile holds
  if (trans_a == Trans::kYes && trans_b == Trans::kYes) return false;
  if (trans_a == Trans::kYes)  // Aᵀ·B: the batch is k
    return k >= kMinBatch && k <= kMaxBatchAtB && m >= kMinFeatures && n >= kMinFeatures;
  if (trans_b == Trans::kNo)  // A·B: the batch is m
    return m >= kMinBatch && long(m) * n <= kMaxStreamedC && n >= kMinFeatures && k >= kMinFeatures;
  return m >= kMinBatch && m <= kMaxBatchABt && n >= kMinFeatures && k >= kMinFeatures;
}

namespace {

constexpr unsigned kZen5Family = 0x1A;

// The CPU family as AMD counts it (base family + extended family), 0 if cpuid says nothing.
unsigned amd_family() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return 0;
  const unsigned base = (eax >> 8) & 0xF;
  return base == 0xF ? base + ((eax >> 20) & 0xFF) : base;
}

}  // namespace

bool own_kernels_supported() {
  return own::isa() != own::Isa::kNone;
}

Kernels resolve_kernels(const std::string& name) {
  if (name == "openblas") return Kernels::kOpenBlas;
  if (name == "own") {
    if (!own_kernels_supported())
      throw UsageError(
          "--gemm own needs a CPU with AVX-512F, or AVX2 and FMA; this one has neither: use "
          "--gemm openblas");
    return Kernels::kOwn;
  }
  if (name == "auto") {
    if (own::isa() != own::Isa::kAvx512) return Kernels::kOpenBlas;  // AVX2: OpenBLAS was faster
    __builtin_cpu_init();
    if (__builtin_cpu_is("intel")) return Kernels::kOwn;
    return __builtin_cpu_is("amd") && amd_family() >= kZen5Family ? Kernels::kOwn
                                                                  : Kernels::kOpenBlas;
  }
  throw UsageError("--gemm must be auto, openblas or own, got '" + name + "'");
}

void set_kernels(Kernels kernels) {
  if (kernels == Kernels::kOwn && !own_kernels_supported())
    throw UsageError("ringtrain's own GEMM kernels need a CPU with AVX-512F, or AVX2 and FMA");
  g_kernels.store(kernels, std::memory_order_relaxed);
}

Kernels kernels() {
  return g_kernels.load(std::memory_order_relaxed);
}

std::string kernels_report() {
  const int t = threads();
  const std::string on = t == 1 ? "one thread" : std::to_string(t) + " threads";
  if (kernels() == Kernels::kOpenBlas)
    return "products: OpenBLAS on " + on +
           (t == 1 ? ""
                   : ", a product on at most one per " +
                         std::to_string(static_cast<int>(kMinFlopsPerPart / 1e6)) +
                         " MFLOP of its work");
  return std::string("products: ringtrain's ") + own::isa_name() + " kernels on " + on +
         " for Linear layers' y = x·Wᵀ (48-256 samples per rank), dW = dyᵀ·x (48-128) and "
         "dx = dy·W (dx up to 128 x 1024 floats), the same bits at any thread count; "
         "OpenBLAS on one thread for the rest";
}

// OpenBLAS on several threads per rank was measured slower than the own kernels and than as
// many single-thread ranks on an AVX-512 CPU (Zen 5), and faster than those ranks on an AVX2
// CPU (Zen 3), where the own AVX2 kernels were slower than OpenBLAS: each warning is given
// where it was measured true.
std::string kernels_warning() {
  if (kernels() == Kernels::kOwn && own::isa() == own::Isa::kAvx2)
    return "note: ringtrain's AVX2 kernels were measured slower than OpenBLAS on an AVX2 CPU; "
           "they give the same bits at any --blas-threads, --gemm openblas runs faster "
           "(bench/README-gemm.md, \"The own kernels on AVX2\")";
  if (threads() <= 1 || kernels() != Kernels::kOpenBlas || own::isa() != own::Isa::kAvx512)
    return "";
  const std::string t = std::to_string(threads());
  return "warning: OpenBLAS on " + t + " threads per rank was measured slower on AVX-512 CPUs " +
         "than --gemm own, or " + t + " times as many ranks with --blas-threads 1 on the same " +
         "cores (bench/README-gemm.md, \"Threads\")";
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
