// ringtrain's own products on this CPU (gemm_own.hpp: the AVX-512 kernels, or the AVX2 ones on a
// CPU without AVX-512F) against a double-precision reference, over sizes that hit every edge of
// the blocking: for AVX-512, tails of the 8-row and 48-column tiles and of the 6-row /
// 64-sample tiles, several k blocks (64, 128 and 4096 deep), several row blocks (64) and column
// blocks (1056); for AVX2, tails of the 6 x 16 tile, k blocks of 256, row blocks of 96 and
// column blocks of 256. Then the routing in blas::gemm (which products go to the own
// kernels), and a Linear layer's gradients through them.
//
// Its own main (gemm_main.cpp): on a CPU with neither AVX-512F nor AVX2 and FMA nothing here
// can run, and the binary exits 77, which ctest reports as skipped (not as passed).
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "layer_rig.hpp"
#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/gemm_own.hpp"
#include "ringtrain/framework/layers/linear.hpp"

using namespace ringtrain;
using ringtrain::blas::own::Op;

namespace {

struct Product {
  std::vector<float> a, b, c;  // c: the initial C (accumulate) or garbage (overwrite)
};

// A (m x k) or its transpose stored (k x m); B (k x n) or stored (n x k), as `op` says.
Product random_product(Op op, int m, int n, int k, std::mt19937& rng) {
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  Product p{std::vector<float>(std::size_t(m) * k), std::vector<float>(std::size_t(k) * n),
            std::vector<float>(std::size_t(m) * n)};
  for (float& v : p.a) v = u(rng);
  for (float& v : p.b) v = u(rng);
  for (float& v : p.c) v = u(rng);
  (void)op;
  return p;
}

// C[i][j] (+)= Σ_k A(i, k) B(k, j) in double.
std::vector<double> reference(Op op, int m, int n, int k, const Product& p, bool accumulate) {
  std::vector<double> c(std::size_t(m) * n);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double s = accumulate ? p.c[std::size_t(i) * n + j] : 0.0;
      for (int l = 0; l < k; ++l) {
        const double a = op == Op::kAtB ? p.a[std::size_t(l) * m + i] : p.a[std::size_t(i) * k + l];
        const double b = op == Op::kABt ? p.b[std::size_t(j) * k + l] : p.b[std::size_t(l) * n + j];
        s += a * b;
      }
      c[std::size_t(i) * n + j] = s;
    }
  return c;
}

std::vector<float> run_own(Op op, int m, int n, int k, const Product& p, bool accumulate) {
  const blas::own::WorkspaceSize size = blas::own::workspace_size(op, m, n, k);
  std::vector<float> a_pack(size.a_pack), b_pack(size.b_pack), tile(size.tile);
  std::vector<float> c = p.c;
  blas::own::gemm(op, m, n, k, p.a.data(), p.b.data(), c.data(), accumulate,
                  {a_pack.data(), b_pack.data(), tile.data()});
  return c;
}

// Largest |own - reference| relative to k (each term is at most 1 in size): float sums of k
// terms are off by ~k·2⁻²⁴ at worst; a wrong element is off by ~1.
double worst_error(const std::vector<float>& got, const std::vector<double>& want, int k) {
  double worst = 0.0;
  for (std::size_t i = 0; i < got.size(); ++i)
    worst = std::max(worst, std::fabs(double(got[i]) - want[i]) / std::max(1, k));
  return worst;
}

const char* name_of(Op op) {
  return op == Op::kAB ? "A·B" : op == Op::kAtB ? "Aᵀ·B" : "A·Bᵀ";
}

// Restores the process-wide kernel choice after a test changes it.
struct KernelsGuard {
  blas::Kernels saved = blas::kernels();
  ~KernelsGuard() { blas::set_kernels(saved); }
};

}  // namespace

TEST_CASE("own kernels: every product matches a double-precision reference", "[gemm]") {
  std::mt19937 rng(7);
  // 1, tails of 8 / 6 / 16 / 48 / 64, exact multiples, and more than one block of 64
  // rows, 128 deep and 1056 columns.
  const std::vector<int> sizes = {1, 5, 8, 17, 48, 49, 64, 65, 130};
  for (Op op : {Op::kAB, Op::kAtB, Op::kABt})
    for (int m : sizes)
      for (int n : sizes)
        for (int k : {1, 7, 64, 65, 129, 300})
          for (bool accumulate : {false, true}) {
            const Product p = random_product(op, m, n, k, rng);
            const double err = worst_error(run_own(op, m, n, k, p, accumulate),
                                           reference(op, m, n, k, p, accumulate), k);
            INFO(name_of(op) << " m=" << m << " n=" << n << " k=" << k
                             << " accumulate=" << accumulate << ": error " << err);
            REQUIRE(err < 1e-6);
          }
}

TEST_CASE("own kernels: wide and tall products cross the column and row blocks", "[gemm]") {
  std::mt19937 rng(8);
  struct Size {
    int m, n, k;
  };
  // 1100 columns: two column blocks of the packed driver (1056 each), 6-row tails in A·Bᵀ;
  // 200 rows: four row blocks (64) and four 64-sample panels of A·Bᵀ; 4100 deep: two k
  // blocks of A·Bᵀ (4096).
  for (Op op : {Op::kAB, Op::kAtB, Op::kABt})
    for (Size s : {Size{3, 1100, 70}, Size{200, 1100, 40}, Size{200, 50, 260}, Size{70, 13, 4100}})
      for (bool accumulate : {false, true}) {
        const Product p = random_product(op, s.m, s.n, s.k, rng);
        const double err = worst_error(run_own(op, s.m, s.n, s.k, p, accumulate),
                                       reference(op, s.m, s.n, s.k, p, accumulate), s.k);
        INFO(name_of(op) << " m=" << s.m << " n=" << s.n << " k=" << s.k
                         << " accumulate=" << accumulate << ": error " << err);
        REQUIRE(err < 1e-6);
      }
}

TEST_CASE("own kernels: the sum over k does not depend on the other sizes", "[gemm]") {
  // What the header promises, and what makes a row of y = x·Wᵀ the same bits whether its
  // sample sits in a batch of 64 or of 130: the first rows of a 130-row product equal the
  // product of those rows alone, bitwise, and so do its last 2 rows (a block of 2 samples).
  // In A·Bᵀ the sizes take each width of the samples' block (1 to 4 vectors of 16).
  std::mt19937 rng(9);
  const int n = 100, k = 300, m = 130;
  for (Op op : {Op::kAB, Op::kABt}) {
    const Product big = random_product(op, m, n, k, rng);
    const std::vector<float> c_big = run_own(op, m, n, k, big, false);
    for (int first : {0, 128})
      for (int rows : {2, 5, 17, 33, 49, 64}) {
        if (first + rows > m) continue;
        Product part{std::vector<float>(big.a.begin() + std::size_t(first) * k,
                                        big.a.begin() + std::size_t(first + rows) * k),
                     big.b, std::vector<float>(std::size_t(rows) * n)};
        const std::vector<float> c_part = run_own(op, rows, n, k, part, false);
        INFO(name_of(op) << " rows " << first << ".." << first + rows);
        const bool same_bits =
            std::equal(c_part.begin(), c_part.end(), c_big.begin() + std::size_t(first) * n);
        REQUIRE(same_bits);
      }
  }
}

TEST_CASE("own kernels: a wide A·B has the bits of its narrow column blocks", "[gemm]") {
  // On AVX-512 an A·B whose C is too large for the B-streaming driver's tile runs on the
  // packed driver, which continues each element's running sum over its k blocks; a thread's
  // column block narrow enough for the tile runs on the streaming driver. Both must give
  // the same bits (the thread count may not change a bit), and the right sums: 300 deep is
  // three k blocks of the packed driver.
  std::mt19937 rng(14);
  const int m = 100, n = 3000, k = 300, width = 960;  // 100 x 960 fits the tile
  const Product p = random_product(Op::kAB, m, n, k, rng);
  const std::vector<float> whole = run_own(Op::kAB, m, n, k, p, false);
  REQUIRE(worst_error(whole, reference(Op::kAB, m, n, k, p, false), k) < 1e-6);
  std::vector<float> blocks(whole.size());
  for (int j0 = 0; j0 < n; j0 += width) {
    const int w = std::min(width, n - j0);
    const blas::own::WorkspaceSize size = blas::own::workspace_size(Op::kAB, m, w, k);
    std::vector<float> a_pack(size.a_pack), b_pack(size.b_pack), tile(size.tile);
    blas::own::gemm(Op::kAB, m, w, k, p.a.data(), p.b.data() + j0, blocks.data() + j0, {k, n, n},
                    false, {a_pack.data(), b_pack.data(), tile.data()});
  }
  const bool same_bits = blocks == whole;
  REQUIRE(same_bits);
}

TEST_CASE("blas::gemm sends a Linear layer's products to the own kernels, others to OpenBLAS",
          "[gemm]") {
  KernelsGuard guard;
  blas::ScopedThreads one(1);
  std::mt19937 rng(10);
  using blas::Trans;
  struct Call {
    Op op;
    Trans ta, tb;
    int m, n, k;
    bool own;  // expected route
  };
  const bool avx512 = blas::own::isa() == blas::own::Isa::kAvx512;
  const std::vector<Call> calls = {
      {Op::kABt, Trans::kNo, Trans::kYes, 64, 1024, 784, true},  // mlp forward, 64 samples
      {Op::kAB, Trans::kNo, Trans::kNo, 64, 1024, 1024, true},   // dx = dy·W: own
      // dx up to 128 x 1024 floats (the B-streaming driver's tile): own; above, OpenBLAS.
      {Op::kAB, Trans::kNo, Trans::kNo, 128, 1024, 1024, true},
      {Op::kAB, Trans::kNo, Trans::kNo, 192, 1024, 1024, false},
      // A wider dx: on AVX-512 the packed driver up to 128 samples; on AVX2 OpenBLAS.
      {Op::kAB, Trans::kNo, Trans::kNo, 64, 3136, 1024, avx512},
      {Op::kAB, Trans::kNo, Trans::kNo, 192, 3136, 1024, false},
      // dW = dyᵀ·x at 128 samples: own.
      {Op::kAtB, Trans::kYes, Trans::kNo, 1024, 784, 128, true},
      // Above 128 samples OpenBLAS was measured faster for dW (blas.cpp): dW at 200. y = x·Wᵀ
      // stays own up to an evaluation chunk of 256, and goes to OpenBLAS above.
      {Op::kAtB, Trans::kYes, Trans::kNo, 1024, 784, 200, false},
      {Op::kABt, Trans::kNo, Trans::kYes, 256, 1024, 784, true},
      {Op::kABt, Trans::kNo, Trans::kYes, 320, 1024, 784, false},
      {Op::kABt, Trans::kNo, Trans::kYes, 128, 1024, 784, true},
      // Small batches: on AVX-512 (whose A·Bᵀ driver sizes the last block to its samples)
      // from 8 samples, but dW of a layer wider than 1024 inputs only from 32; on AVX2 from 48.
      {Op::kABt, Trans::kNo, Trans::kYes, 32, 1024, 784, avx512},
      {Op::kABt, Trans::kNo, Trans::kYes, 8, 1024, 1024, avx512},
      {Op::kABt, Trans::kNo, Trans::kYes, 4, 1024, 784, false},
      {Op::kAB, Trans::kNo, Trans::kNo, 16, 1024, 1024, avx512},
      {Op::kAtB, Trans::kYes, Trans::kNo, 1024, 784, 16, avx512},
      {Op::kAtB, Trans::kYes, Trans::kNo, 1024, 3136, 16, false},
      {Op::kAtB, Trans::kYes, Trans::kNo, 1024, 3136, 32, avx512},
      {Op::kABt, Trans::kNo, Trans::kYes, 64, 10, 1024, false},  // 10 outputs: OpenBLAS
      {Op::kAB, Trans::kNo, Trans::kNo, 64, 196, 32, false},     // Winograd-like: OpenBLAS
  };
  std::pair<int, int> routes_seen{0, 0};  // calls of each route whose bits showed the route
  for (const Call& call : calls) {
    const Product p = random_product(call.op, call.m, call.n, call.k, rng);
    const std::vector<float> own = run_own(call.op, call.m, call.n, call.k, p, false);
    std::vector<float> openblas(p.c.size()), routed(p.c.size());
    blas::set_kernels(blas::Kernels::kOpenBlas);
    blas::gemm(call.ta, call.tb, call.m, call.n, call.k, 1.0f, p.a.data(), p.b.data(), 0.0f,
               openblas.data());
    blas::set_kernels(blas::Kernels::kOwn);
    blas::gemm(call.ta, call.tb, call.m, call.n, call.k, 1.0f, p.a.data(), p.b.data(), 0.0f,
               routed.data());
    INFO(name_of(call.op) << " m=" << call.m << " n=" << call.n << " k=" << call.k);
    const bool rule_says_own = blas::own_kernels_take(call.ta, call.tb, call.m, call.n, call.k);
    REQUIRE(rule_says_own == call.own);
    // Where the two implementations differ in some bits, the route shows in the result. On
    // some CPUs OpenBLAS sums a shape in the own kernels' order: there the bits cannot tell.
    if (own == openblas) continue;
    const bool routed_as_expected = routed == (call.own ? own : openblas);
    REQUIRE(routed_as_expected);
    ++(call.own ? routes_seen.first : routes_seen.second);
  }
  INFO("products whose route showed in the bits: " << routes_seen.first << " own, "
                                                   << routes_seen.second << " OpenBLAS");
  REQUIRE(routes_seen.first >= 3);
  REQUIRE(routes_seen.second >= 3);
}

using blas::Trans;

// Products cut over threads: odd sizes, so blocks end inside tiles; y = x·Wᵀ at 130 samples
// is cut by sample blocks (3 of 64), at 70 samples by columns at 3 threads and by samples at
// 2; dW by rows of 8, dx by columns of 48.
struct ThreadedCall {
  Op op;
  Trans ta, tb;
  int m, n, k;
};
std::vector<ThreadedCall> threaded_calls() {
  return {{Op::kABt, Trans::kNo, Trans::kYes, 130, 1001, 777},
          {Op::kABt, Trans::kNo, Trans::kYes, 70, 1001, 777},
          {Op::kAtB, Trans::kYes, Trans::kNo, 1001, 777, 97},
          {Op::kAB, Trans::kNo, Trans::kNo, 61, 1001, 333}};
}

TEST_CASE("blas::gemm: the own kernels give the same bits at 1, 2 and 3 threads", "[gemm]") {
  // Each thread computes a block of whole elements of C, so the bits cannot depend on the
  // thread count.
  KernelsGuard guard;
  blas::set_kernels(blas::Kernels::kOwn);
  std::mt19937 rng(13);
  for (const ThreadedCall& call : threaded_calls())
    for (bool accumulate : {false, true}) {
      INFO(name_of(call.op) << " m=" << call.m << " n=" << call.n << " k=" << call.k
                            << " accumulate=" << accumulate);
      REQUIRE(blas::own_kernels_take(call.ta, call.tb, call.m, call.n, call.k));
      const Product p = random_product(call.op, call.m, call.n, call.k, rng);
      const std::vector<float> whole = run_own(call.op, call.m, call.n, call.k, p, accumulate);
      for (int threads : {1, 2, 3}) {
        blas::ScopedThreads scoped(threads);
        INFO(threads << " threads (OpenBLAS reports " << blas::threads() << ")");
        REQUIRE(blas::threads() == threads);
        std::vector<float> c = p.c;
        blas::gemm(call.ta, call.tb, call.m, call.n, call.k, 1.0f, p.a.data(), p.b.data(),
                   accumulate ? 1.0f : 0.0f, c.data());
        const bool same_bits = c == whole;
        REQUIRE(same_bits);
      }
    }
}

TEST_CASE("blas::gemm_block: the parts of a loop cover C once and give gemm's bits", "[gemm]") {
  // A layer's products inside one parallel loop (linear.cpp): part p of P computes
  // gemm_block(p, P) with gemm_block_product. The blocks tile C exactly, and the result is
  // blas::gemm's at any P, also for a product the own kernels do not take (part 0, whole).
  KernelsGuard guard;
  blas::set_kernels(blas::Kernels::kOwn);
  std::mt19937 rng(14);
  std::vector<ThreadedCall> calls = threaded_calls();
  calls.push_back({Op::kABt, Trans::kNo, Trans::kYes, 64, 10, 1024});  // OpenBLAS: part 0 whole
  calls.push_back({Op::kAB, Trans::kNo, Trans::kNo, 50, 64, 10});      // work for one part only
  for (const ThreadedCall& call : calls)
    for (bool accumulate : {false, true}) {
      const Product p = random_product(call.op, call.m, call.n, call.k, rng);
      std::vector<float> want = p.c;
      blas::gemm(call.ta, call.tb, call.m, call.n, call.k, 1.0f, p.a.data(), p.b.data(),
                 accumulate ? 1.0f : 0.0f, want.data());
      for (int parts = 1; parts <= 3; ++parts) {
        INFO(name_of(call.op) << " m=" << call.m << " n=" << call.n << " k=" << call.k
                              << " accumulate=" << accumulate << ", " << parts << " parts");
        std::vector<int> covered(p.c.size(), 0);
        std::vector<float> c = p.c;
        for (int part = 0; part < parts; ++part) {
          const blas::Block b =
              blas::gemm_block(part, parts, call.ta, call.tb, call.m, call.n, call.k);
          for (int i = b.row0; i < b.row0 + b.rows; ++i)
            for (int j = b.col0; j < b.col0 + b.cols; ++j) ++covered[std::size_t(i) * call.n + j];
          blas::gemm_block_product(b, call.ta, call.tb, call.m, call.n, call.k, p.a.data(),
                                   p.b.data(), accumulate, c.data());
        }
        REQUIRE(std::all_of(covered.begin(), covered.end(), [](int k) { return k == 1; }));
        const bool same_bits = c == want;
        REQUIRE(same_bits);
      }
    }
}

TEST_CASE("Linear gradients through the own kernels match finite differences", "[gemm]") {
  KernelsGuard guard;
  blas::ScopedThreads one(1);
  blas::set_kernels(blas::Kernels::kOwn);
  std::mt19937 rng(12);
  Linear layer(70, 66);  // 48 samples, features >= 64 with tails: all three products are own
  testing::LayerRig rig(layer, {70}, 48, rng);
  const auto results = testing::check_layer_gradients(
      rig, testing::random_normal(rig.in_size(48), rng), 48, {}, 1e-2f, rng);
  REQUIRE(results.size() == 3);  // input, weight, bias
  for (const testing::GradientComparison& c : results) {
    INFO(c.what << ": " << c.checked << " coordinates, norm error " << c.norm_error);
    CHECK(c.passes(1e-3));
  }
}
