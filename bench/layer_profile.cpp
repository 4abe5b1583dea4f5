// bench_layer_profile: where the time of one training step goes, layer by layer.
//
// Plans a model for batch B, then times each layer's forward and backward on its own
// (median of `repeats` calls, after a warm-up), the loss, and the SGD-momentum update,
// and prints one row per stage with its share of the step and, for layers with FLOPs,
// the GFLOP/s reached (forward: forward FLOPs; backward: 2 x forward, or 1 x for the first
// layer, whose input gradient is not computed). Inputs are random; the numbers say which
// kernel to work on, bench_train_speed says how fast the whole step is.
//   bench_layer_profile [--model cnn] [--threads 1] [--batch 128] [--repeats 20]
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/loss.hpp"
#include "ringtrain/framework/optim/optimizer.hpp"
#include "ringtrain/framework/random.hpp"
#include "ringtrain/models/registry.hpp"

namespace {

using namespace ringtrain;

template <typename Body>
double median_ms(int repeats, Body&& body) {
  body();  // warm-up
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    body();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

std::vector<float> random_values(std::size_t count, std::uint64_t stream) {
  std::vector<float> v(count);
  for (std::size_t i = 0; i < count; ++i)
    v[i] = random::uniform01(random::hash({stream, i})) - 0.5f;
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  blas::reexec_with_better_core(argv);
  CLI::App app{"time of each layer's forward and backward in one training step"};
  std::string name = "cnn";
  int threads = 1, repeats = 20;
  std::size_t batch = 128;
  app.add_option("--model", name)->capture_default_str();
  app.add_option("--threads", threads)->capture_default_str();
  app.add_option("--batch", batch)->capture_default_str();
  app.add_option("--repeats", repeats)->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  blas::set_threads(threads);
  auto model = models::make_model(name);
  model->plan(models::input_shape(), batch);
  model->initialize(0);
  const std::size_t layers = model->num_layers();
  // acts[i] = input of layer i (acts[0] = the images), grads[i] = gradient w.r.t. it.
  std::vector<std::vector<float>> acts, grads;
  acts.push_back(random_values(batch * num_elements(models::input_shape()), 1));
  for (std::size_t i = 0; i < layers; ++i) {
    const std::size_t size = batch * num_elements(model->layer_output_shape(i));
    acts.push_back(std::vector<float>(size));
    grads.push_back(std::vector<float>(
        batch * num_elements(i == 0 ? models::input_shape() : model->layer_output_shape(i - 1))));
  }
  grads.push_back(random_values(acts.back().size(), 2));  // dlogits
  StepContext ctx;
  for (std::size_t i = 0; i < layers; ++i)
    model->layer(i).forward(acts[i], acts[i + 1], batch, ctx);

  struct Row {
    std::string stage;
    double ms, gflop;
  };
  std::vector<Row> rows;
  for (std::size_t i = 0; i < layers; ++i) {
    Layer& layer = model->layer(i);
    const double flop = layer.forward_flops_per_sample() * double(batch) / 1e9;
    const std::string label = "layers." + std::to_string(i) + "." + layer.kind();
    rows.push_back({label + " fwd",
                    median_ms(repeats, [&] { layer.forward(acts[i], acts[i + 1], batch, ctx); }),
                    flop});
  }
  std::vector<std::int32_t> labels(batch);
  for (std::size_t i = 0; i < batch; ++i) labels[i] = std::int32_t(i % 10);
  std::vector<float> dlogits(acts.back().size());
  rows.push_back({"loss",
                  median_ms(repeats,
                            [&] {
                              softmax_cross_entropy(acts.back(), labels, batch, 10,
                                                    1.0f / float(batch), dlogits);
                            }),
                  0.0});
  for (std::size_t i = layers; i-- > 0;) {
    Layer& layer = model->layer(i);
    const double flop =
        layer.forward_flops_per_sample() * double(batch) / 1e9 * (i == 0 ? 1.0 : 2.0);
    std::span<float> dx = i == 0 ? std::span<float>() : std::span<float>(grads[i]);
    const std::string label = "layers." + std::to_string(i) + "." + layer.kind();
    rows.push_back(
        {label + " bwd",
         median_ms(repeats,
                   [&] { layer.backward(acts[i], acts[i + 1], grads[i + 1], dx, batch, ctx); }),
         flop});
  }
  OptimizerConfig config;  // sgd, momentum 0.9
  auto sgd = make_optimizer(config, model->parameters().num_elements());
  rows.push_back(
      {"sgd update",
       median_ms(
           repeats,
           [&] { sgd->step(model->parameters().values(), model->parameters().grads(), 1e-3f); }),
       0.0});

  double total = 0.0;
  for (const Row& r : rows) total += r.ms;
  std::printf("%s, batch %zu, %d BLAS thread(s), %s; medians of %d\n", name.c_str(), batch, threads,
              blas::core_name().c_str(), repeats);
  std::printf("%-24s %9s %7s %9s\n", "stage", "ms", "share", "GFLOP/s");
  for (const Row& r : rows) {
    std::printf("%-24s %9.3f %6.1f%%", r.stage.c_str(), r.ms, 100.0 * r.ms / total);
    if (r.gflop > 0.0) std::printf(" %9.1f", r.gflop / (r.ms / 1e3));
    std::printf("\n");
  }
  std::printf("%-24s %9.3f  (%.0f samples/s)\n", "sum", total, double(batch) / (total / 1e3));
  return 0;
}
