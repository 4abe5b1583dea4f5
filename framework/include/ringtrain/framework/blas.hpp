// The one door to OpenBLAS. Every matrix product of the framework goes through gemm().
//
// Row-major throughout. gemm computes  C = alpha * op(A) * op(B) + beta * C  with
//   op(A): (m, k), op(B): (k, n), C: (m, n)
// and leading dimensions equal to the row lengths of the matrices as stored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace ringtrain::blas {

enum class Trans { kNo, kYes };

void gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
          const float* b, float beta, float* c);

// Which code runs the products. kOwn: ringtrain's own kernels (gemm_own.hpp: AVX-512, or AVX2
// on a CPU without it) for the products the AVX-512 ones were measured faster on in training,
// a Linear layer's products at batch sizes and feature sizes that own_kernels_take in blas.cpp
// lists; everything else still goes to OpenBLAS. With T BLAS threads (set_threads) the own kernels
// cut C into blocks of whole elements, one per thread, so their results are bitwise the same at any
// T; the rule is by shape alone for the same reason. The choice decides the bits of every result
// (another summation order), so runs compare bitwise only with the same choice.
enum class Kernels { kOpenBlas, kOwn };
// True on a CPU with AVX-512F, or with AVX2 and FMA.
bool own_kernels_supported();
// "auto" | "openblas" | "own" -> the choice for this CPU. auto is kOwn where bench_gemm
// measured the products it takes faster than OpenBLAS 0.3.21's best kernels
// (bench/README-gemm.md): an Intel CPU with AVX-512F and AMD Zen 5 (family 0x1A);
// kOpenBlas elsewhere, Zen 4 included (it runs 512-bit FMAs as two halves; not measured), and
// AVX2 CPUs, where OpenBLAS was faster (the AVX2 kernels are for the same bits at any thread
// count). Throws UsageError for another name, or "own" on a CPU that can run no own kernels.
Kernels resolve_kernels(const std::string& name);
// Process-wide, like the thread count: set once at start-up, before any product runs.
void set_kernels(Kernels kernels);
Kernels kernels();
// One line for start-up banners and the manifest: which code runs the products at the
// current thread count.
std::string kernels_report();
// One line for start-up banners when the choice and thread count are known to be slower on
// machines like this one (measured: bench/README-gemm.md) than an alternative, naming it; else
// empty.
std::string kernels_warning();
// True if this product (alpha = 1, beta 0 or 1) runs on the own kernels under kOwn, at any
// thread count: the rule above, by shape alone.
bool own_kernels_take(Trans trans_a, Trans trans_b, int m, int n, int k);

// The row-stable product for --reduction exact (train/exact_step.hpp): C = op(A)·op(B)
// (accumulate: C +=) on the own kernels whatever the shape and the kernel choice, blocks on
// the rank's threads. Each element of C is summed over k in an order fixed by k alone
// (gemm_own.hpp), so a row of C has the same bits in a product of any number of rows and at
// any thread count. Only where own_kernels_supported(); Error otherwise.
void gemm_row_stable(Trans trans_a, Trans trans_b, int m, int n, int k, const float* a,
                     const float* b, bool accumulate, float* c);

// Threads the BLAS may use in this process (cores per node / ranks per node): OpenBLAS's
// count, and the rank's threads that compute the own kernels' blocks and the parallel loops
// below (one pool, made here, kept for the process's life). processes_per_node: the job's
// processes on this node, which share its cores (0: as the last call said; 1 at first). The
// pool's threads watch for the next loop for a while before they sleep (ThreadPool) only when
// pool threads x processes fit the cores and the products run on the own kernels; under
// OpenBLAS its own workers need the cores between the loops.
void set_threads(int threads, int processes_per_node = 0);
int threads();
// Whether the pool's threads spin while they wait (the rule above), for banners and benches.
bool pool_spins();
// The pool's loops on more than one thread so far, and the calling thread's time spent
// waiting for the others to end their parts (ThreadPool::Counters); zeros without a pool.
struct PoolCounters {
  std::uint64_t loops = 0;
  double caller_wait_s = 0.0;
};
PoolCounters pool_counters();

// A parallel loop on the rank's threads: body(part) for part in [0, parts), part 0 on the
// caller, part p always on the same thread; returns when all have ended (an exception of a
// part comes back from here after they all did). parts may exceed parallel_threads() (a
// layer that lowered the BLAS count for its region with ScopedThreads) but not the threads
// set_threads made (UsageError). Not from inside a part of another loop.
std::size_t parallel_threads();  // threads a loop may take now: threads(), as far as made
using PartFn = void (*)(void* context, std::size_t part);
void parallel_parts(std::size_t parts, PartFn fn, void* context);
template <typename Body>
void parallel_parts(std::size_t parts, Body& body) {
  parallel_parts(
      parts, [](void* context, std::size_t part) { (*static_cast<Body*>(context))(part); }, &body);
}

// Elementwise loops on the same threads: body(begin, end) over [0, n) cut into contiguous
// ranges, at most threads() of them and none shorter than min_per_part elements (waking a
// thread costs microseconds), each beginning on a 64-byte line (of floats); the first range
// runs on the caller, and the call returns when all have ended. Only for loops whose every
// element is computed on its own, so that the cut changes no bit; not from inside a part of
// another parallel loop (the pool is not reentrant).
using RangeFn = void (*)(void* context, std::size_t begin, std::size_t end);
void parallel_ranges(std::size_t n, std::size_t min_per_part, RangeFn fn, void* context);
template <typename Body>
void parallel_ranges(std::size_t n, std::size_t min_per_part, Body& body) {
  parallel_ranges(
      n, min_per_part,
      [](void* context, std::size_t begin, std::size_t end) {
        (*static_cast<Body*>(context))(begin, end);
      },
      &body);
}

// Products inside a parallel loop (parallel_parts), for a layer that puts a pass's products
// and their elementwise work (bias, its sum) into one loop instead of a loop per product:
// part p of P computes the block of C that gemm() gives thread p of P threads (gemm_block),
// so the bits are gemm()'s. Only where products_in_loops(): under kOwn, where no product's
// bits depend on the thread count; a product the own kernels do not take is one block (part
// 0's), computed whole on OpenBLAS (single-threaded under kOwn) by whichever part the layer
// gives it.
bool products_in_loops();
// Rows [row0, row0 + rows) x columns [col0, col0 + cols) of C; empty when rows or cols is 0.
struct Block {
  int row0 = 0, rows = 0, col0 = 0, cols = 0;
  bool empty() const { return rows == 0 || cols == 0; }
};
Block gemm_block(int part, int parts, Trans trans_a, Trans trans_b, int m, int n, int k);
// That block of C = op(A)·op(B) (accumulate: C +=), on the calling thread.
void gemm_block_product(const Block& block, Trans trans_a, Trans trans_b, int m, int n, int k,
                        const float* a, const float* b, bool accumulate, float* c);

// Sets the thread budget (threads(); OpenBLAS's count under kOpenBlas) for the lifetime of
// the guard and restores the previous budget after. A layer that runs its own threads (one
// per part of the batch) holds
// ScopedThreads(1) around that parallel region, so each of its threads calls the BLAS
// single-threaded and the rank never runs more threads than its budget. The setting is
// process-wide: only valid while no other thread of the process is inside a BLAS call
// (the framework calls the BLAS from the training thread and from the layers' parts only).
// OpenBLAS 0.3.21 (pthreads build) takes concurrent calls from several user threads when
// its own thread count is 1: each call then runs on its caller, with buffers from its
// locked memory pool.
class ScopedThreads {
 public:
  explicit ScopedThreads(int threads);
  ~ScopedThreads();
  ScopedThreads(const ScopedThreads&) = delete;
  ScopedThreads& operator=(const ScopedThreads&) = delete;

 private:
  int previous_;
};
// OpenBLAS's own description: version, core type, threading model.
std::string config();

// Kernel choice. OpenBLAS picks its kernels once, when the library loads, from the CPU model
// number. A CPU newer than the library gets generic kernels: OpenBLAS 0.3.21 (bookworm) does
// not know family 6 model 207 (Xeon, Emerald Rapids) and runs it as "Prescott" (SSE3), far
// slower than the AVX-512 "SkylakeX" kernels (bench/README-gemm.md, "OpenBLAS
// kernels"). The only
// remedy is the environment variable OPENBLAS_CORETYPE, read when the library loads.
//
// The kernel family OpenBLAS loaded ("SkylakeX", "Haswell", "Prescott", ...).
std::string core_name();
// The OPENBLAS_CORETYPE that this CPU's instruction set supports ("SkylakeX" with AVX-512,
// "Haswell" with AVX2+FMA) when the loaded kernels are of a weaker family; else empty.
std::string better_core_type();
// Threads. OpenBLAS's workers spin for about 2^28 cycles after each product before they sleep;
// ringtrain has threads of its own (ThreadPool) that need those cores right after. ringtrain sets
// OPENBLAS_THREAD_TIMEOUT=4 (spin 2^4 cycles, then sleep), also read when the library loads.
//
// Call first in main, before MPI_Init and before any thread starts. When better_core_type()
// is not empty and OPENBLAS_CORETYPE is unset, or when OPENBLAS_THREAD_TIMEOUT is unset, sets
// them and re-executes the program in place (execv of /proc/self/exe: same pid, arguments,
// environment otherwise and open files, so mpiexec and srun see the same process), and
// OpenBLAS loads with them. Returns normally when nothing is to be done, in the re-executed
// program, or if exec fails. RINGTRAIN_BLAS_CORETYPE=keep keeps the kernels OpenBLAS chose;
// a value of OPENBLAS_CORETYPE or OPENBLAS_THREAD_TIMEOUT already set is kept.
void reexec_with_better_core(char** argv);
// One line for start-up banners: the core in use and, when ringtrain chose it, why.
std::string core_report();
// Cores this process may run on (sched_getaffinity), at least 1.
int available_cores();

}  // namespace ringtrain::blas
