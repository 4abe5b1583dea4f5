// Is OpenBLAS (one thread) bitwise the same for a block of C computed alone as for the same
// elements inside the whole product? If it were, the products that stay on OpenBLAS under
// --gemm own could be cut over the rank's threads like the own kernels' (blas.cpp) without
// changing a bit. Prints, per shape and cut, how many elements of C differ:
//   build/bench/bench_openblas_split_bits
#include <cblas.h>

#include <cstddef>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {

struct Product {
  CBLAS_TRANSPOSE ta, tb;
  int m, n, k;
};

// C = op(A)·op(B) whole, then as two blocks cut at row or column `cut`; elements that differ.
int differing(const Product& p, bool by_rows, int cut) {
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<float> a(std::size_t(p.m) * p.k), b(std::size_t(p.k) * p.n);
  std::vector<float> whole(std::size_t(p.m) * p.n), cut_up(whole.size());
  for (float& v : a) v = normal(rng);
  for (float& v : b) v = normal(rng);
  const int lda = p.ta == CblasNoTrans ? p.k : p.m, ldb = p.tb == CblasNoTrans ? p.n : p.k;
  cblas_sgemm(CblasRowMajor, p.ta, p.tb, p.m, p.n, p.k, 1, a.data(), lda, b.data(), ldb, 0,
              whole.data(), p.n);
  const int extent = by_rows ? p.m : p.n;
  for (int part = 0; part < 2; ++part) {
    const int begin = part == 0 ? 0 : cut, end = part == 0 ? cut : extent;
    // Where the block's first row (of A) or column (of B) starts as stored.
    const std::size_t a_at = !by_rows ? 0 : p.ta == CblasNoTrans ? std::size_t(begin) * p.k : begin;
    const std::size_t b_at = by_rows ? 0 : p.tb == CblasNoTrans ? begin : std::size_t(begin) * p.k;
    const std::size_t c_at = by_rows ? std::size_t(begin) * p.n : begin;
    cblas_sgemm(CblasRowMajor, p.ta, p.tb, by_rows ? end - begin : p.m, by_rows ? p.n : end - begin,
                p.k, 1, a.data() + a_at, lda, b.data() + b_at, ldb, 0, cut_up.data() + c_at, p.n);
  }
  int differ = 0;
  for (std::size_t i = 0; i < whole.size(); ++i)
    differ += std::memcmp(&whole[i], &cut_up[i], sizeof(float)) != 0;
  return differ;
}

}  // namespace

int main() {
  openblas_set_num_threads(1);
  const Product fc1_dx{CblasNoTrans, CblasNoTrans, 128, 3136, 1024};  // the cnn's dx = dy·W
  const Product fc1_dw{CblasTrans, CblasNoTrans, 1024, 3136, 128};    // its dW = dyᵀ·x
  const Product fc1_y{CblasNoTrans, CblasTrans, 128, 1024, 3136};     // its y = x·Wᵀ
  const Product classes{CblasNoTrans, CblasTrans, 128, 10, 1024};     // the 10-class layer
  struct Case {
    const char* name;
    Product p;
    bool by_rows;
    int cut;
  };
  const Case cases[] = {{"cnn fc1 dx", fc1_dx, false, 1568}, {"cnn fc1 dx", fc1_dx, false, 1536},
                        {"cnn fc1 dx", fc1_dx, true, 64},    {"cnn fc1 dW", fc1_dw, true, 512},
                        {"cnn fc1 dW", fc1_dw, false, 1568}, {"cnn fc1 y", fc1_y, false, 512},
                        {"cnn fc1 y", fc1_y, true, 64},      {"10 classes y", classes, true, 64}};
  for (const Case& c : cases) {
    const int n = c.p.m * c.p.n;
    std::printf("%-13s %4d x %4d x %4d, cut at %s %4d: %6d of %6d elements differ\n", c.name, c.p.m,
                c.p.n, c.p.k, c.by_rows ? "row   " : "column", c.cut,
                differing(c.p, c.by_rows, c.cut), n);
  }
}
