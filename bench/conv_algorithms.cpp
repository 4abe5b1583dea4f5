// bench_conv_algorithms: Conv2d by im2col + GEMM against Winograd F(4x4, 5x5), same layer,
// same data, same invocation.
//
// For each thread count and each shape (default: the cnn's second layer, 32 -> 64, 5x5,
// padding 2 on 14x14, batch 128), times forward and backward (dW, db and dx) of both
// algorithms, alternating im2col / Winograd repeat by repeat so that a change of machine
// speed hits both alike, and prints the medians, the ratio im2col / Winograd and the
// largest difference between the two outputs relative to the largest output.
//   bench_conv_algorithms [--threads 1,2] [--batch 128] [--repeats 15]
//                         [--shapes CxOxHxP,...]   (in channels x out channels x side x padding)
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/layers/conv2d.hpp"
#include "ringtrain/framework/random.hpp"
#include "ringtrain/framework/size_list.hpp"

namespace {

using namespace ringtrain;

struct Shape4 {
  std::size_t in_c, out_c, side, pad;
};

std::vector<Shape4> parse_shapes(const std::string& text) {
  std::vector<Shape4> shapes;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find(',', start), text.size());
    Shape4 s{};
    if (std::sscanf(text.substr(start, end - start).c_str(), "%zux%zux%zux%zu", &s.in_c, &s.out_c,
                    &s.side, &s.pad) != 4)
      throw UsageError("--shapes: '" + text.substr(start, end - start) +
                       "' is not CxOxHxP (e.g. 32x64x14x2)");
    shapes.push_back(s);
    start = end + 1;
  }
  return shapes;
}

std::vector<float> random_values(std::size_t count, std::uint64_t stream) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i)
    v[i] = random::uniform01(random::hash({stream, i})) - 0.5f;
  return v;
}

// One planned layer with its own parameters and gradients.
struct Rig {
  Conv2d layer;
  std::vector<float> weight, bias, grad_weight, grad_bias;
  Rig(const Shape4& s, std::size_t batch, Conv2d::Algorithm algorithm)
      : layer(s.in_c, s.out_c, 5, 1, s.pad, algorithm),
        weight(random_values(s.out_c * s.in_c * 25, 3)),
        bias(random_values(s.out_c, 4)),
        grad_weight(weight.size()),
        grad_bias(bias.size()) {
    layer.plan({s.in_c, s.side, s.side}, batch);
    LayerBinding binding;
    binding.params = {weight, bias};
    binding.grads = {grad_weight, grad_bias};
    layer.bind(binding);
  }
};

double elapsed_ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since)
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, double(std::abs(a[i] - b[i])));
    scale = std::max(scale, double(std::abs(a[i])));
  }
  return diff / std::max(scale, 1e-30);
}

}  // namespace

int main(int argc, char** argv) {
  blas::reexec_with_better_core(argv);
  CLI::App app{"Conv2d: im2col + GEMM against Winograd F(4x4, 5x5) in one invocation"};
  std::string threads_text = "1,2", shapes_text = "32x64x14x2";
  std::size_t batch = 128;
  int repeats = 15;
  app.add_option("--threads", threads_text)->capture_default_str();
  app.add_option("--batch", batch)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--repeats", repeats)->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--shapes", shapes_text, "CxOxHxP: channels in x out x side x padding")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  std::vector<Shape4> shapes;
  std::vector<int> thread_counts;
  try {
    shapes = parse_shapes(shapes_text);
    for (const std::size_t t : parse_size_list(threads_text, "--threads"))
      thread_counts.push_back(int(t));
  } catch (const Error& e) {
    std::fprintf(stderr, "bench_conv_algorithms: %s\n", e.what());
    return 2;
  }

  std::printf("batch %zu, 5x5 stride 1, %s; medians of %d alternating repeats\n", batch,
              blas::core_report().c_str(), repeats);
  std::printf("%-14s %3s %-4s %11s %11s %7s %10s\n", "shape", "thr", "pass", "im2col ms",
              "winograd ms", "ratio", "max diff");
  for (const int threads : thread_counts)
    for (const Shape4& s : shapes) {
      blas::set_threads(threads);
      Rig im2col(s, batch, Conv2d::Algorithm::kIm2col);
      Rig winograd(s, batch, Conv2d::Algorithm::kWinograd);
      const std::size_t out_side = s.side + 2 * s.pad - 4;
      const std::vector<float> x = random_values(batch * s.in_c * s.side * s.side, 1);
      const std::vector<float> dy = random_values(batch * s.out_c * out_side * out_side, 2);
      std::vector<float> y_i(dy.size()), y_w(dy.size()), dx_i(x.size()), dx_w(x.size());
      std::vector<double> fwd_i, fwd_w, bwd_i, bwd_w;
      for (int r = -1; r < repeats; ++r) {  // r = -1: warm-up
        auto t = std::chrono::steady_clock::now();
        im2col.layer.forward(x, y_i, batch, {});
        const double fi = elapsed_ms(t);
        t = std::chrono::steady_clock::now();
        im2col.layer.backward(x, y_i, dy, dx_i, batch, {});
        const double bi = elapsed_ms(t);
        t = std::chrono::steady_clock::now();
        winograd.layer.forward(x, y_w, batch, {});
        const double fw = elapsed_ms(t);
        t = std::chrono::steady_clock::now();
        winograd.layer.backward(x, y_w, dy, dx_w, batch, {});
        const double bw = elapsed_ms(t);
        if (r < 0) continue;
        fwd_i.push_back(fi);
        bwd_i.push_back(bi);
        fwd_w.push_back(fw);
        bwd_w.push_back(bw);
      }
      char label[64];
      std::snprintf(label, sizeof label, "%zux%zux%zux%zu", s.in_c, s.out_c, s.side, s.pad);
      const double f_i = median(fwd_i), f_w = median(fwd_w), b_i = median(bwd_i),
                   b_w = median(bwd_w);
      std::printf("%-14s %3d %-4s %11.2f %11.2f %6.2fx %10.2g\n", label, threads, "fwd", f_i, f_w,
                  f_i / f_w, max_difference(y_i, y_w));
      std::printf("%-14s %3d %-4s %11.2f %11.2f %6.2fx %10.2g  (dx; dW %.2g)\n", label, threads,
                  "bwd", b_i, b_w, b_i / b_w, max_difference(dx_i, dx_w),
                  max_difference(im2col.grad_weight, winograd.grad_weight));
      std::printf("%-14s %3d %-4s %11.2f %11.2f %6.2fx\n", label, threads, "step", f_i + b_i,
                  f_w + b_w, (f_i + b_i) / (f_w + b_w));
    }
  return 0;
}
