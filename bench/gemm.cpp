// bench_gemm: ringtrain's own products (AVX-512, or AVX2) against OpenBLAS on the products of the
// models' Linear layers, the same inputs, in the same run, at `--threads T` BLAS threads
// (default 1): OpenBLAS with T threads against the own kernels' blocks on T threads.
//
// For each product of a training step (forward y = x·Wᵀ, dx = dy·W, dW = dyᵀ·x) of the mlp
// (784-1024-1024-10) and of the cnn's big layer (3136 -> 1024), at the samples per rank
// given (default 64 and 128), each round times `calls` products with OpenBLAS and then with
// the own kernels (the order alternates from round to round); the table prints GFLOP/s of
// the median round and the median over rounds of the per-round ratio OpenBLAS time / own
// time, with its min-max. Products the own kernels do not take (blas.hpp: Kernels) are
// listed as such: both columns are then OpenBLAS.
//
// --cold evicts the caches before every product (it writes a 64 MiB buffer, twice the L3 of
// the machines measured here) and times the product alone: in a training step the weights,
// gradients and activations of one layer have left the caches by the time the layer runs
// again, so the warm figures flatter both sides.
//
// --untaken times the own kernels on every product, also those the routing rule
// (blas::own_kernels_take) sends to OpenBLAS: the evidence for moving that rule.
// (--untaken calls them on one thread.)
//   bench_gemm [--samples 64,128] [--rounds 15] [--calls 20] [--cold] [--untaken] [--threads T]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/gemm_own.hpp"
#include "ringtrain/framework/random.hpp"

namespace {

using namespace ringtrain;
using blas::Trans;

struct Product {
  std::string name;
  Trans ta, tb;
  int m, n, k;
};

// The three products of Linear(in -> out) at `samples` samples (linear.cpp).
std::vector<Product> linear_products(const std::string& layer, int in, int out, int samples,
                                     bool first_layer) {
  std::vector<Product> p = {
      {layer + " y=x·Wᵀ", Trans::kNo, Trans::kYes, samples, out, in},
      {layer + " dW=dyᵀ·x", Trans::kYes, Trans::kNo, out, in, samples},
  };
  if (!first_layer) p.push_back({layer + " dx=dy·W", Trans::kNo, Trans::kNo, samples, in, out});
  return p;
}

std::vector<float> random_values(std::size_t count, std::uint64_t stream) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i)
    v[i] = random::uniform01(random::hash({stream, i})) - 0.5f;
  return v;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  blas::reexec_with_better_core(argv);
  CLI::App app{"ringtrain's own products (AVX-512, or AVX2) against OpenBLAS, one thread"};
  std::vector<int> samples_list = {64, 128};
  int rounds = 15, calls = 20, threads = 1;
  bool cold = false, untaken = false;
  app.add_option("--samples", samples_list, "samples per rank")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--rounds", rounds)->capture_default_str();
  app.add_option("--calls", calls, "products per timed round")->capture_default_str();
  app.add_flag("--cold", cold, "evict the caches before every product (64 MiB written)");
  app.add_flag("--untaken", untaken,
               "time the own kernels also on the products the routing rule gives OpenBLAS");
  app.add_option("--threads", threads, "BLAS threads of both sides")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (!blas::own_kernels_supported()) {
    std::printf(
        "bench_gemm: this CPU has neither AVX-512F nor AVX2 and FMA; ringtrain's own kernels "
        "cannot run\n");
    return 77;
  }
  if (rounds < 1 || calls < 1 || threads < 1) {
    std::fprintf(stderr, "bench_gemm: --rounds, --calls and --threads must be >= 1\n");
    return 2;
  }
  blas::set_threads(threads);
  std::printf(
      "bench_gemm: %s; %d thread(s); %d rounds of %d products per side, order alternating; %s\n",
      blas::core_report().c_str(), threads, rounds, calls,
      cold ? "caches evicted before every product (--cold)" : "warm caches");
  std::vector<float> evict(cold ? std::size_t{16} << 20 : 0);
  std::printf("%-24s %5s %5s %5s  %9s %9s  %s\n", "product", "m", "n", "k", "OpenBLAS", "own",
              "OpenBLAS/own time [min-max], GFLOP/s of the median round");

  std::vector<double> all_ratios;
  for (int samples : samples_list) {
    std::vector<Product> products;
    for (auto& p : linear_products("mlp.0 784>1024", 784, 1024, samples, true))
      products.push_back(p);
    for (auto& p : linear_products("mlp.2 1024>1024", 1024, 1024, samples, false))
      products.push_back(p);
    for (auto& p : linear_products("mlp.4 1024>10", 1024, 10, samples, false))
      products.push_back(p);
    for (auto& p : linear_products("cnn.7 3136>1024", 3136, 1024, samples, false))
      products.push_back(p);
    for (const Product& p : products) {
      const std::vector<float> a = random_values(std::size_t(p.m) * p.k, 1);
      const std::vector<float> b = random_values(std::size_t(p.k) * p.n, 2);
      std::vector<float> c(std::size_t(p.m) * p.n);
      const bool taken = blas::own_kernels_take(p.ta, p.tb, p.m, p.n, p.k);
      // --untaken: the own kernels called directly, past the routing rule.
      using blas::own::Op;
      const Op op = p.tb == Trans::kYes ? Op::kABt : p.ta == Trans::kYes ? Op::kAtB : Op::kAB;
      const blas::own::WorkspaceSize size = blas::own::workspace_size(op, p.m, p.n, p.k);
      std::vector<float> a_pack(size.a_pack), b_pack(size.b_pack), tile(size.tile);
      const bool direct = untaken && !taken;
      auto product = [&](blas::Kernels kernels) {
        if (direct && kernels == blas::Kernels::kOwn)
          blas::own::gemm(op, p.m, p.n, p.k, a.data(), b.data(), c.data(), false,
                          {a_pack.data(), b_pack.data(), tile.data()});
        else
          blas::gemm(p.ta, p.tb, p.m, p.n, p.k, 1.0f, a.data(), b.data(), 0.0f, c.data());
      };
      auto timed = [&](blas::Kernels kernels) {
        blas::set_kernels(kernels);
        product(kernels);  // warm
        double total = 0.0;
        for (int i = 0; i < calls; ++i) {
          for (float& v : evict) v += 1.0f;
          const auto t0 = std::chrono::steady_clock::now();
          product(kernels);
          total += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        }
        return total / calls;
      };
      std::vector<double> t_openblas, t_own, ratio;
      for (int r = 0; r < rounds; ++r) {
        double to = 0, tw = 0;
        if (r % 2 == 0) {
          to = timed(blas::Kernels::kOpenBlas);
          tw = timed(blas::Kernels::kOwn);
        } else {
          tw = timed(blas::Kernels::kOwn);
          to = timed(blas::Kernels::kOpenBlas);
        }
        t_openblas.push_back(to);
        t_own.push_back(tw);
        ratio.push_back(to / tw);
      }
      const double flops = 2.0 * p.m * p.n * p.k;
      std::printf("%-24s %5d %5d %5d  %9.1f %9.1f  %5.2fx [%4.2f-%4.2f]%s\n", p.name.c_str(), p.m,
                  p.n, p.k, flops / median(t_openblas) / 1e9, flops / median(t_own) / 1e9,
                  median(ratio), *std::min_element(ratio.begin(), ratio.end()),
                  *std::max_element(ratio.begin(), ratio.end()),
                  taken    ? ""
                  : direct ? "  (not taken in training; own kernels called directly)"
                           : "  (not taken: OpenBLAS on both sides)");
      if (taken) all_ratios.push_back(median(ratio));
    }
  }
  if (!all_ratios.empty())
    std::printf("median over the products the own kernels take: %.2fx (min %.2fx, max %.2fx)\n",
                median(all_ratios), *std::min_element(all_ratios.begin(), all_ratios.end()),
                *std::max_element(all_ratios.begin(), all_ratios.end()));
  return 0;
}
