// bench_train_speed: training samples/s of ringtrain's models next to PyTorch 1.13 on the
// same model, batch, optimizer (SGD momentum 0.9) and thread count, measured in the same
// invocation, and the fraction of the "sgemm limit":
//
//   limit (samples/s) = GFLOP/s of a 1024³ sgemm at the same thread count
//                       / training FLOPs per sample (3 × forward: forward, dW, dx)
//
// Each repeat pairs the two sides in time: `steps` of our training between two sgemm probes
// (the mean of their medians of 5 products is the repeat's GFLOP/s), and the peer's `steps`
// in a fresh process right after (repeats 1, 3, ...) or before (2, 4, ...). A repeat's step time
// is its mean (the peer's rule: the steps' total over their number). The ratio and the
// fraction of the limit are computed per repeat, and the row prints their medians with their
// range: this VM's speed drifts by up to 50 % within minutes, so only measurements seconds
// apart are compared. One table row per (model, threads); --json writes the rows, with the
// per-repeat values.
//
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

// One model training on random data (as the peer uses), kept across repeats: timing a
// repeat runs `steps` full training steps and returns their mean step and median phases.
class OurTraining {
 public:
  OurTraining(const std::string& name, std::size_t batch) : batch_(batch) {
    model_ = models::make_model(name);
    model_->plan(models::input_shape(), batch);
    model_->initialize(0);
    OptimizerConfig config;  // sgd, momentum 0.9
    sgd_ = make_optimizer(config, model_->parameters().num_elements());
    const std::size_t pixels = num_elements(models::input_shape());
    x_.resize(batch * pixels);
    dlogits_.resize(batch * 10);
    y_.resize(batch);
    for (std::size_t i = 0; i < x_.size(); ++i) x_[i] = random::uniform01(random::hash({1, i}));
    for (std::size_t i = 0; i < batch; ++i)
      y_[i] = std::int32_t(random::below(random::hash({2, i}), 10));
  }

  Phases time(int warmup, int steps) {
    std::vector<double> fwd, bwd, upd;
    double total_s = 0.0;
    for (int s = -warmup; s < steps; ++s) {
      StepContext ctx;
      const double t0 = now_s();
      auto logits = model_->forward(x_, batch_, ctx);
      softmax_cross_entropy(logits, y_, batch_, 10, 1.0f / float(batch_), dlogits_);
      const double t1 = now_s();
      model_->backward(dlogits_, batch_, ctx);
      const double t2 = now_s();
      sgd_->step(model_->parameters().values(), model_->parameters().grads(), 0.01f);
      const double t3 = now_s();
      if (s < 0) continue;
      total_s += t3 - t0;
      fwd.push_back(t1 - t0);
      bwd.push_back(t2 - t1);
      upd.push_back(t3 - t2);
    }
    if (steps <= 0) return {};
    return {total_s / steps, median(fwd), median(bwd), median(upd)};
  }

 private:
  std::size_t batch_;
  std::unique_ptr<Sequential> model_;
  std::unique_ptr<Optimizer> sgd_;
  std::vector<float> x_, dlogits_;
  std::vector<std::int32_t> y_;
};

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
  std::printf(
      "batch %zu, SGD momentum 0.9, random data; %d repeats x %d steps, each repeat pairs ours, "
      "an sgemm probe and the peer; medians over repeats (range)\n",
      batch, repeats, steps);
  auto env = [](const char* name) { return std::getenv(name) ? std::getenv(name) : "(unset)"; };
  std::printf("%s; the PyTorch peer inherits OPENBLAS_CORETYPE=%s, OPENBLAS_THREAD_TIMEOUT=%s\n",
              blas::core_report().c_str(), env("OPENBLAS_CORETYPE"), env("OPENBLAS_THREAD_TIMEOUT"));
  std::printf("%-5s %3s %10s %10s %7s %13s %9s %11s %8s %15s  %s\n", "model", "thr", "ours/s",
              "torch/s", "ratio", "(min-max)", "sgemm GF", "limit/s", "of limit", "(min-max)",
              "fwd / bwd / update ms");
  nlohmann::json rows = nlohmann::json::array();
  for (const std::string& name : split(models_arg)) {
    auto probe = models::make_model(name);
    probe->plan(models::input_shape(), 1);
    const double train_flops = 3.0 * probe->forward_flops_per_sample();
    for (const std::string& t : split(threads_arg)) {
      const int threads = std::stoi(t);
      blas::set_threads(threads);
      OurTraining ours(name, batch);
      ours.time(warmup, 0);
      // Repeat by repeat: sgemm probes right before and after our steps, and the peer's
      // steps next to them (peer first when r is odd), so each ratio compares measurements
      // a few seconds apart.
      std::vector<double> ours_rate, torch_rate, gflops, ratio, fraction, fwd, bwd, upd;
      for (int r = 0; r < repeats; ++r) {
        double torch_r = 0.0;
        if (r % 2 == 1) torch_r = torch_samples_per_s(peer, name, threads, batch, steps, 1);
        const double gflops_before = sgemm_gflops(5);
        const Phases phases = ours.time(0, steps);
        const double gflops_r = 0.5 * (gflops_before + sgemm_gflops(5));
        if (r % 2 == 0) torch_r = torch_samples_per_s(peer, name, threads, batch, steps, 1);
        const double ours_r = double(batch) / phases.step_s;
        ours_rate.push_back(ours_r);
        gflops.push_back(gflops_r);
        fraction.push_back(ours_r / (gflops_r * 1e9 / train_flops));
        fwd.push_back(phases.forward_s);
        bwd.push_back(phases.backward_s);
        upd.push_back(phases.update_s);
        if (torch_r > 0) {
          torch_rate.push_back(torch_r);
          ratio.push_back(ours_r / torch_r);
        }
      }
      auto low = [](const std::vector<double>& v) {
        return v.empty() ? 0.0 : *std::min_element(v.begin(), v.end());
      };
      auto high = [](const std::vector<double>& v) {
        return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
      };
      auto med = [](const std::vector<double>& v) { return v.empty() ? 0.0 : median(v); };
      const double limit = med(gflops) * 1e9 / train_flops;
      std::printf(
          "%-5s %3d %10.0f %10.0f %7.2f %13s %9.1f %11.0f %7.1f%% %15s  %.2f / %.2f / %.2f\n",
          name.c_str(), threads, med(ours_rate), med(torch_rate), med(ratio),
          fmt::format("({:.2f}-{:.2f})", low(ratio), high(ratio)).c_str(), med(gflops), limit,
          100.0 * med(fraction),
          fmt::format("({:.1f}-{:.1f}%)", 100.0 * low(fraction), 100.0 * high(fraction)).c_str(),
          med(fwd) * 1e3, med(bwd) * 1e3, med(upd) * 1e3);
      std::fflush(stdout);
      rows.push_back({{"model", name},
                      {"threads", threads},
                      {"batch", batch},
                      {"ours_samples_per_s", med(ours_rate)},
                      {"torch_samples_per_s", med(torch_rate)},
                      {"ratio_vs_torch", med(ratio)},
                      {"sgemm_gflops", med(gflops)},
                      {"train_flops_per_sample", train_flops},
                      {"sgemm_limit_samples_per_s", limit},
                      {"fraction_of_limit", med(fraction)},
                      {"forward_s", med(fwd)},
                      {"backward_s", med(bwd)},
                      {"update_s", med(upd)},
                      {"per_repeat",
                       {{"ours_samples_per_s", ours_rate},
                        {"torch_samples_per_s", torch_rate},
                        {"ratio_vs_torch", ratio},
                        {"sgemm_gflops", gflops},
                        {"fraction_of_limit", fraction}}}});
    }
  }
  if (!json_path.empty()) std::ofstream(json_path) << rows.dump(2) << "\n";
  return 0;
}
