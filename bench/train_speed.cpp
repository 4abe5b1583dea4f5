// bench_train_speed: training samples/s of ringtrain's models next to PyTorch 1.13 on the
// same model, batch, optimizer (SGD momentum 0.9) and thread count, measured in the same
// invocation, and the fraction of the "sgemm limit":
//
//   limit (samples/s) = GFLOP/s of a 1024³ sgemm at the same thread count
//                       / training FLOPs per sample (3 × forward: forward, dW, dx)
//
// Prints one table row per (model, threads) with medians and the ratios; --json writes them.
// Usage: bench_train_speed [--models mlp,cnn] [--threads 1,2] [--batch 128] [--steps 20]
//                          [--repeats 5] [--peer bench/peers/torch_train_speed.py | none]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "ringtrain/framework/blas.hpp"
#include "ringtrain/framework/loss.hpp"
#include "ringtrain/framework/optim/optimizer.hpp"
#include "ringtrain/framework/random.hpp"
#include "ringtrain/models/registry.hpp"

namespace {

using namespace ringtrain;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// GFLOP/s of C = A·B with 1024×1024 matrices, median of `repeats` timed products.
double sgemm_gflops(int repeats) {
  constexpr int kN = 1024;
  std::vector<float> a(kN * kN, 0.5f), b(kN * kN, 0.25f), c(kN * kN);
  blas::gemm(blas::Trans::kNo, blas::Trans::kNo, kN, kN, kN, 1.0f, a.data(), b.data(), 0.0f, c.data());
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = now_s();
    blas::gemm(blas::Trans::kNo, blas::Trans::kNo, kN, kN, kN, 1.0f, a.data(), b.data(), 0.0f, c.data());
    rates.push_back(2.0 * kN * kN * kN / (now_s() - t0) / 1e9);
  }
  return median(rates);
}

struct Phases {
  double step_s, forward_s, backward_s, update_s;
};

// Median times of full training steps on random data (as the peer uses).
Phases time_training(const std::string& name, std::size_t batch, int warmup, int steps, int repeats) {
  auto model = models::make_model(name);
  model->plan(models::input_shape(), batch);
  model->initialize(0);
  OptimizerConfig config;  // sgd, momentum 0.9
  auto sgd = make_optimizer(config, model->parameters().num_elements());
  const std::size_t pixels = num_elements(models::input_shape());
  std::vector<float> x(batch * pixels), dlogits(batch * 10);
  std::vector<std::int32_t> y(batch);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = random::uniform01(random::hash({1, i}));
  for (std::size_t i = 0; i < batch; ++i) y[i] = std::int32_t(random::below(random::hash({2, i}), 10));
  std::vector<double> step, fwd, bwd, upd;
  for (int r = 0; r < repeats; ++r) {
    for (int s = -warmup; s < steps; ++s) {
      StepContext ctx;
      const double t0 = now_s();
      auto logits = model->forward(x, batch, ctx);
      softmax_cross_entropy(logits, y, batch, 10, 1.0f / float(batch), dlogits);
      const double t1 = now_s();
      model->backward(dlogits, batch, ctx);
      const double t2 = now_s();
      sgd->step(model->parameters().values(), model->parameters().grads(), 0.01f);
      const double t3 = now_s();
      if (s < 0) continue;
      step.push_back(t3 - t0);
      fwd.push_back(t1 - t0);
      bwd.push_back(t2 - t1);
      upd.push_back(t3 - t2);
    }
  }
  return {median(step), median(fwd), median(bwd), median(upd)};
}

// Runs the PyTorch peer; returns its samples/s (0 if unavailable).
double torch_samples_per_s(const std::string& script, const std::string& model, int threads,
                           std::size_t batch, int steps, int repeats) {
  if (script == "none") return 0.0;
  const std::string command = fmt::format(
      "/usr/bin/python3 {} --model {} --threads {} --batch {} --steps {} --repeats {} 2>/dev/null",
      script, model, threads, batch, steps, repeats);
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return 0.0;
  std::string output;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) output += buffer;
  if (pclose(pipe) != 0 || output.empty()) return 0.0;
  const auto line = output.substr(output.rfind('{'));
  return nlohmann::json::parse(line).value("samples_per_s_median", 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  // The right OpenBLAS kernels for this CPU, for us and (inherited environment) the peer.
  blas::reexec_with_better_core(argv);
  CLI::App app{"ringtrain training speed next to PyTorch and the sgemm limit"};
  std::string models_arg = "mlp,cnn", threads_arg = "1,2", peer = "bench/peers/torch_train_speed.py", json_path;
  std::size_t batch = 128;
  int steps = 20, repeats = 5, warmup = 5;
  app.add_option("--models", models_arg)->capture_default_str();
  app.add_option("--threads", threads_arg)->capture_default_str();
  app.add_option("--batch", batch)->capture_default_str();
  app.add_option("--steps", steps)->capture_default_str();
  app.add_option("--repeats", repeats)->capture_default_str();
  app.add_option("--peer", peer, "PyTorch peer script, or none")->capture_default_str();
  app.add_option("--json", json_path, "also write the rows as JSON");
  CLI11_PARSE(app, argc, argv);

  auto split = [](const std::string& s) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= s.size()) {
      const std::size_t comma = std::min(s.find(',', start), s.size());
      out.push_back(s.substr(start, comma - start));
      start = comma + 1;
    }
    return out;
  };
  std::printf("batch %zu, SGD momentum 0.9, random data; medians of %d repeats x %d steps\n", batch,
              repeats, steps);
  auto env = [](const char* name) { return std::getenv(name) ? std::getenv(name) : "(unset)"; };
  std::printf("%s; the PyTorch peer inherits OPENBLAS_CORETYPE=%s, OPENBLAS_THREAD_TIMEOUT=%s\n",
              blas::core_report().c_str(), env("OPENBLAS_CORETYPE"), env("OPENBLAS_THREAD_TIMEOUT"));
  std::printf("%-5s %3s %10s %10s %7s %9s %11s %8s  %s\n", "model", "thr", "ours/s", "torch/s",
              "ratio", "sgemm GF", "limit/s", "of limit", "fwd / bwd / update ms");
  nlohmann::json rows = nlohmann::json::array();
  for (const std::string& name : split(models_arg)) {
    auto probe = models::make_model(name);
    probe->plan(models::input_shape(), 1);
    const double train_flops = 3.0 * probe->forward_flops_per_sample();
    for (const std::string& t : split(threads_arg)) {
      const int threads = std::stoi(t);
      blas::set_threads(threads);
      const double gflops = sgemm_gflops(repeats * 2);
      const Phases ours = time_training(name, batch, warmup, steps, repeats);
      const double ours_rate = double(batch) / ours.step_s;
      const double torch_rate = torch_samples_per_s(peer, name, threads, batch, steps, repeats);
      const double limit = gflops * 1e9 / train_flops;
      std::printf("%-5s %3d %10.0f %10.0f %7.2f %9.1f %11.0f %7.1f%%  %.2f / %.2f / %.2f\n",
                  name.c_str(), threads, ours_rate, torch_rate,
                  torch_rate > 0 ? ours_rate / torch_rate : 0.0, gflops, limit,
                  100.0 * ours_rate / limit, ours.forward_s * 1e3, ours.backward_s * 1e3,
                  ours.update_s * 1e3);
      std::fflush(stdout);
      rows.push_back({{"model", name}, {"threads", threads}, {"batch", batch},
                      {"ours_samples_per_s", ours_rate}, {"torch_samples_per_s", torch_rate},
                      {"ratio_vs_torch", torch_rate > 0 ? ours_rate / torch_rate : 0.0},
                      {"sgemm_gflops", gflops}, {"train_flops_per_sample", train_flops},
                      {"sgemm_limit_samples_per_s", limit}, {"fraction_of_limit", ours_rate / limit},
                      {"forward_s", ours.forward_s}, {"backward_s", ours.backward_s},
                      {"update_s", ours.update_s}});
    }
  }
  if (!json_path.empty()) std::ofstream(json_path) << rows.dump(2) << "\n";
  return 0;
}
