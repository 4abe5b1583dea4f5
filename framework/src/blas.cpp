// The BLAS door (blas.hpp): the products, routed to the own kernels or to OpenBLAS, the
// rank's threads and their parallel loops, the choice of kernels. With blas_core.cpp the only
// files that talk to cblas (STYLE: each BLAS call wrapped once); that one holds OpenBLAS's
// kernel family and threads' environment.
#include "ringtrain/framework/blas.hpp"

#include <cblas.h>
#include <cpuid.h>

#include <algorithm>
#include <atomic>
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

// The rank's threads: the own kernels' blocks (see own_gemm) and every parallel loop of the
// layers and the optimizer (parallel_parts, parallel_ranges), one pool so that the thread a
// loop wakes is the one still watching after the last loop. Process-wide like OpenBLAS's
// thread count, which decides how many of them a loop uses; made by set_threads when the
// count first exceeds what it has, and never shrunk (ScopedThreads lowers the count for a
// parallel region of a layer and raises it again after).
std::unique_ptr<ThreadPool> g_pool;
// The rank's thread budget (set_threads, ScopedThreads): the own kernels' blocks, the parallel
// loops and, under kOpenBlas, OpenBLAS's threads. Under kOwn OpenBLAS stays on one thread (the
// products it runs there must not depend on the thread count), whatever the budget.
std::atomic<int> g_threads{1};
// Processes of the job on this node (set_threads), which share its cores.
std::atomic<int> g_processes_per_node{1};
// How long the pool's threads watch for the next loop before they sleep, when they may spin
// (spin_allowed): longer than the gaps between the loops of a step (the serial work between
// two products), short enough that an idle rank gives its cores back soon.
constexpr double kSpinS = 1e-3;

// Scratch of the own kernels, per calling thread (Conv2d's parts call gemm concurrently, and
// each pool thread computes its own block).
struct OwnScratch {
  std::vector<float> a_pack, b_pack, tile;
};
thread_local OwnScratch own_scratch;

using own::Op;

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

Op op_of(Trans trans_a, Trans trans_b) {
  return trans_b == Trans::kYes ? Op::kABt : trans_a == Trans::kYes ? Op::kAtB : Op::kAB;
}

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
  return g_pool ? std::min<int>(g_threads.load(std::memory_order_relaxed),
                                static_cast<int>(g_pool->participants()))
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
    own_gemm(op_of(trans_a, trans_b), m, n, k, a, b, c, beta == 1.0f);
    return;
  }
  // Under kOwn the rest runs on OpenBLAS single-threaded (its count stays 1 there,
  // apply_openblas_threads): its threaded products are not bitwise those of one thread (dx =
  // dy·W at 128 x 1024 x 1024 differs), and under kOwn no bit depends on the thread count.
  // Otherwise OpenBLAS takes no more threads than the product has work for: on the mlp's
  // 10-class layer, two were slower than one (bench/README-gemm.md, "Small products on one
  // thread").
  std::optional<ScopedThreads> fewer;
  if (!own && threads_for_work(m, n, k) < threads()) fewer.emplace(threads_for_work(m, n, k));
  const int lda = trans_a == Trans::kNo ? k : m;
  const int ldb = trans_b == Trans::kNo ? n : k;
  cblas_sgemm(CblasRowMajor, trans_a == Trans::kNo ? CblasNoTrans : CblasTrans,
              trans_b == Trans::kNo ? CblasNoTrans : CblasTrans, m, n, k, alpha, a,
              lda > 0 ? lda : 1, b, ldb > 0 ? ldb : 1, beta, c, n);
}

bool products_in_loops() {
  return kernels() == Kernels::kOwn;
}

Block gemm_block(int part, int parts, Trans trans_a, Trans trans_b, int m, int n, int k) {
  if (m <= 0 || n <= 0 || part < 0 || part >= parts) return {};
  if (!products_in_loops() || !own_kernels_take(trans_a, trans_b, m, n, k))
    return part == 0 ? Block{0, m, 0, n} : Block{};
  const Op op = op_of(trans_a, trans_b);
  const Cut cut = cut_of(op, m, n, parts);
  const int taken = parts_of(cut, m, n, k, parts);
  return part < taken ? block_of(cut, part, taken, m, n) : Block{};
}

void gemm_block_product(const Block& block, Trans trans_a, Trans trans_b, int m, int n, int k,
                        const float* a, const float* b, bool accumulate, float* c) {
  if (block.empty()) return;
  if (!products_in_loops())
    throw Error("blas::gemm_block_product: products in loops need the own kernels (kOwn)");
  if (own_kernels_take(trans_a, trans_b, m, n, k))
    return own_block(op_of(trans_a, trans_b), m, n, k, a, b, c, accumulate, block);
  if (block.row0 != 0 || block.rows != m || block.col0 != 0 || block.cols != n)
    throw Error("blas::gemm_block_product: a product on OpenBLAS goes whole to one part");
  gemm(trans_a, trans_b, m, n, k, 1.0f, a, b, accumulate ? 1.0f : 0.0f, c);
}

void gemm_row_stable(Trans trans_a, Trans trans_b, int m, int n, int k, const float* a,
                     const float* b, bool accumulate, float* c) {
  if (!own_kernels_supported())
    throw Error("gemm_row_stable: this CPU has neither AVX-512F nor AVX2 and FMA");
  if (m == 0 || n == 0) return;
  own_gemm(op_of(trans_a, trans_b), m, n, k, a, b, c, accumulate);
}

namespace {

// The pool's threads spin while they wait (ThreadPool::set_spin_s) only where they take no
// core from anybody of the job: every process's threads fit the node's cores, and the products
// run on the own kernels (under OpenBLAS its own workers need the cores between our loops).
void update_spin() {
  if (!g_pool) return;
  const long threads = static_cast<long>(g_pool->participants()) * g_processes_per_node.load();
  const bool spin = kernels() == Kernels::kOwn && threads <= available_cores();
  g_pool->set_spin_s(spin ? kSpinS : 0.0);
}

// OpenBLAS's own thread count: the budget under kOpenBlas, one under kOwn.
void apply_openblas_threads() {
  const int count = kernels() == Kernels::kOwn ? 1 : g_threads.load();
  if (openblas_get_num_threads() != count) openblas_set_num_threads(count);
}

}  // namespace

void set_threads(int threads, int processes_per_node) {
  threads = std::max(1, threads);
  if (processes_per_node > 0) g_processes_per_node.store(processes_per_node);
  g_threads.store(threads);
  apply_openblas_threads();
  if (threads > 1 && (!g_pool || static_cast<int>(g_pool->participants()) < threads))
    g_pool = std::make_unique<ThreadPool>(static_cast<std::size_t>(threads));
  update_spin();
}
int threads() {
  return g_threads.load(std::memory_order_relaxed);
}
bool pool_spins() {
  return g_pool && g_pool->spin_s() > 0.0;
}
PoolCounters pool_counters() {
  if (!g_pool) return {};
  const ThreadPool::Counters c = g_pool->counters();
  return {c.loops, c.caller_wait_s};
}

std::size_t parallel_threads() {
  return static_cast<std::size_t>(pool_threads());
}

void parallel_parts(std::size_t parts, PartFn fn, void* context) {
  if (parts <= 1) {
    if (parts == 1) fn(context, 0);
    return;
  }
  if (!g_pool || parts > g_pool->participants())
    throw UsageError("blas::parallel_parts: " + std::to_string(parts) + " parts but the rank has " +
                     std::to_string(g_pool ? g_pool->participants() : 1) + " threads");
  auto body = [&](std::size_t part) { fn(context, part); };
  g_pool->run(parts, body);
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

ScopedThreads::ScopedThreads(int threads) : previous_(blas::threads()) {
  if (threads != previous_) set_threads(threads);
}
ScopedThreads::~ScopedThreads() {
  if (blas::threads() != previous_) set_threads(previous_);
}

// The products the own kernels were measured faster on (bench/README-gemm.md, "Where the own
// kernels are taken", and for AVX-512 "Small batches on the own kernels"), on a Linear layer
// with both feature sizes >= 64 and a batch of at least kMinBatch samples (on AVX-512, whose
// A·Bᵀ driver sizes a batch's last block to the samples in it, of at least 8):
// * y = x·Wᵀ (A·Bᵀ) up to 256 samples, so the evaluation's chunks of 256 take them too; by
//   512 samples OpenBLAS draws level.
// * dW = dyᵀ·x (Aᵀ·B) up to 128 samples: above, OpenBLAS's blocking wins. On AVX-512 below
//   32 samples only where dW has at most 1024 columns: wider, OpenBLAS was faster there.
// * dx = dy·W (A·B) while dx itself is at most 128 x 1024 floats (512 KB): the B-streaming
//   driver keeps all of its block of dx in a scratch tile, which must stay in L2; wider or
//   taller dx, with W out of cache, is faster on OpenBLAS. On AVX-512 a wider dx of up to
//   128 samples runs on the packed driver with the same bits ("A wide dx on the packed
//   driver, with the streaming driver's bits").
// Winograd's products (32 channels) and the small-channel convolutions stay with OpenBLAS,
// which was faster there; so does the 10-class output layer.
bool own_kernels_take(Trans trans_a, Trans trans_b, int m, int n, int k) {
  constexpr int kMaxBatchAtB = 128, kMaxBatchABt = 256, kMinFeatures = 64;
  constexpr int kSmallBatch = 8, kSmallAtB = 32, kMaxSmallAtBColumns = 1024;
  const bool avx512 = own::isa() == own::Isa::kAvx512;
  const int min_batch = avx512 ? kSmallBatch : 48;
  if (trans_a == Trans::kYes && trans_b == Trans::kYes) return false;
  if (trans_a == Trans::kYes) {  // Aᵀ·B: the batch is k
    const int min_atb = avx512 && n > kMaxSmallAtBColumns ? kSmallAtB : min_batch;
    return k >= min_atb && k <= kMaxBatchAtB && m >= kMinFeatures && n >= kMinFeatures;
  }
  if (trans_b == Trans::kNo)  // A·B: the batch is m
    return m >= min_batch &&
           (long(m) * n <= blas::avx512::kMaxStreamedC || (avx512 && m <= kMaxBatchAtB)) &&
           n >= kMinFeatures && k >= kMinFeatures;
  return m >= min_batch && m <= kMaxBatchABt && n >= kMinFeatures && k >= kMinFeatures;
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
  apply_openblas_threads();
  update_spin();
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

}  // namespace ringtrain::blas
