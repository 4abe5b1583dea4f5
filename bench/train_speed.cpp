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
// apart are compared. Within a repeat every thread count of a model runs (the order rotates
// from repeat to repeat), so "scaling" (samples/s at T threads over the first thread count)
// is also a median of per-repeat ratios. One table row per (model, threads); --json writes
// the rows, with the per-repeat values.
//
// --ranks BIN (the ringtrain executable): per repeat, also `BIN train` as one rank with T
// threads and as T ranks (mpiexec.mpich) of one thread each, same model, global batch, steps
// and --gemm, in either order; the ratio of their samples/s (manifest.json) is the cost of
// threads against ranks on the same cores.
//
// Usage: bench_train_speed [--models mlp,cnn] [--threads 1,2] [--batch 128] [--steps 20]
//                          [--repeats 5] [--peer bench/peers/torch_train_speed.py | none]
//                          [--gemm auto|openblas|own] [--ranks BIN] [--rank-steps 200]
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

// Why the PyTorch peer cannot run here, or empty when it can (or is "none").
std::string peer_problem(const std::string& script) {
  if (script == "none") return "";
  if (!std::ifstream(script)) return "no peer script " + script + " (run from the checkout's top)";
  if (std::system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0)
    return "/usr/bin/python3 cannot import torch (apt-get install python3-torch)";
  return "";
}

// Runs the PyTorch peer; returns its samples/s (0 if a run fails).
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

// samples/s of `ringtrain train` with `ranks` ranks of `threads` BLAS threads (0 on failure).
double ringtrain_samples_per_s(const std::string& binary, int ranks, int threads,
                               const std::string& model, std::size_t batch, int steps,
                               const std::string& gemm) {
  char pattern[] = "/tmp/bench-train-speed-XXXXXX";
  const char* dir = mkdtemp(pattern);
  if (dir == nullptr) return 0.0;
  const std::string run_dir = std::string(dir) + "/run";
  const std::string command = fmt::format(
      "mpiexec.mpich -n {} {} train --model {} --global-batch {} --steps {} --no-eval --quiet "
      "--log-every {} --blas-threads {} --gemm {} --run-dir {} >/dev/null 2>&1",
      ranks, binary, model, batch, steps, steps, threads, gemm, run_dir);
  double rate = 0.0;
  if (std::system(command.c_str()) == 0) {
    std::ifstream manifest(run_dir + "/manifest.json");
    const nlohmann::json m = nlohmann::json::parse(manifest, nullptr, false);
    if (!m.is_discarded()) rate = m["results"].value("samples_per_s", 0.0);
  }
  std::system(fmt::format("rm -rf {}", dir).c_str());
  return rate;
}

double median_or_zero(const std::vector<double>& v) {
  return v.empty() ? 0.0 : median(v);
}
std::string range_of(const std::vector<double>& v) {
  if (v.empty()) return "(-)";
  return fmt::format("({:.2f}-{:.2f})", *std::min_element(v.begin(), v.end()),
                     *std::max_element(v.begin(), v.end()));
}

// Per-repeat values of one (model, threads) row.
struct Row {
  int threads = 1;
  std::unique_ptr<OurTraining> ours;
  std::vector<double> ours_rate, torch_rate, gflops, ratio, fraction, fwd, bwd, upd, scaling;
};

// One repeat of one row: sgemm probes around our steps, the peer before (odd r) or after.
void measure_repeat(Row& row, const std::string& name, const std::string& peer,
                    std::size_t batch, int steps, int r, double train_flops) {
  blas::set_threads(row.threads);
  double torch_r = 0.0;
  if (r % 2 == 1) torch_r = torch_samples_per_s(peer, name, row.threads, batch, steps, 1);
  const double gflops_before = sgemm_gflops(5);
  const Phases phases = row.ours->time(0, steps);
  const double gflops_r = 0.5 * (gflops_before + sgemm_gflops(5));
  if (r % 2 == 0) torch_r = torch_samples_per_s(peer, name, row.threads, batch, steps, 1);
  const double ours_r = double(batch) / phases.step_s;
  row.ours_rate.push_back(ours_r);
  row.gflops.push_back(gflops_r);
  row.fraction.push_back(ours_r / (gflops_r * 1e9 / train_flops));
  row.fwd.push_back(phases.forward_s);
  row.bwd.push_back(phases.backward_s);
  row.upd.push_back(phases.update_s);
  if (torch_r > 0) {
    row.torch_rate.push_back(torch_r);
    row.ratio.push_back(ours_r / torch_r);
  }
}

nlohmann::json print_row(const Row& row, const std::string& name, std::size_t batch,
                         double train_flops) {
  const double limit = median_or_zero(row.gflops) * 1e9 / train_flops;
  std::vector<double> percent;
  for (double f : row.fraction) percent.push_back(100.0 * f);
  std::printf("%-5s %3d %10.0f %10.0f %7.2f %13s %9.1f %11.0f %7.1f%% %15s  %.2f / %.2f / %.2f\n",
              name.c_str(), row.threads, median_or_zero(row.ours_rate),
              median_or_zero(row.torch_rate), median_or_zero(row.ratio), range_of(row.ratio).c_str(),
              median_or_zero(row.gflops), limit, median_or_zero(percent), range_of(percent).c_str(),
              median_or_zero(row.fwd) * 1e3, median_or_zero(row.bwd) * 1e3,
              median_or_zero(row.upd) * 1e3);
  std::fflush(stdout);
  return {{"model", name},
          {"threads", row.threads},
          {"batch", batch},
          {"ours_samples_per_s", median_or_zero(row.ours_rate)},
          {"torch_samples_per_s", median_or_zero(row.torch_rate)},
          {"ratio_vs_torch", median_or_zero(row.ratio)},
          {"scaling", median_or_zero(row.scaling)},
          {"sgemm_gflops", median_or_zero(row.gflops)},
          {"train_flops_per_sample", train_flops},
          {"sgemm_limit_samples_per_s", limit},
          {"fraction_of_limit", median_or_zero(row.fraction)},
          {"forward_s", median_or_zero(row.fwd)},
          {"backward_s", median_or_zero(row.bwd)},
          {"update_s", median_or_zero(row.upd)},
          {"per_repeat",
           {{"ours_samples_per_s", row.ours_rate},
            {"torch_samples_per_s", row.torch_rate},
            {"ratio_vs_torch", row.ratio},
            {"scaling", row.scaling},
            {"sgemm_gflops", row.gflops},
            {"fraction_of_limit", row.fraction}}}};
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    const std::size_t comma = std::min(s.find(',', start), s.size());
    out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

}  // namespace

// All rows of one model, repeat by repeat (thread counts in rotating order), then the
// scaling over the first thread count and, with --ranks, threads against ranks.
nlohmann::json run_model(const std::string& name, const std::vector<int>& threads_list,
                         const std::string& peer, std::size_t batch, int steps, int repeats,
                         int warmup) {
  auto probe = models::make_model(name);
  probe->plan(models::input_shape(), 1);
  const double train_flops = 3.0 * probe->forward_flops_per_sample();
  std::vector<Row> rows(threads_list.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    rows[i].threads = threads_list[i];
    blas::set_threads(rows[i].threads);  // the layers plan their threads now
    rows[i].ours = std::make_unique<OurTraining>(name, batch);
    rows[i].ours->time(warmup, 0);
  }
  for (int r = 0; r < repeats; ++r) {
    for (std::size_t j = 0; j < rows.size(); ++j)
      measure_repeat(rows[(j + r) % rows.size()], name, peer, batch, steps, r, train_flops);
    for (Row& row : rows) row.scaling.push_back(row.ours_rate.back() / rows[0].ours_rate.back());
  }
  nlohmann::json out = nlohmann::json::array();
  for (const Row& row : rows) out.push_back(print_row(row, name, batch, train_flops));
  for (std::size_t i = 1; i < rows.size(); ++i)
    std::printf("%-5s scaling: %d threads over %d: %.2fx %s (median of per-repeat ratios)\n",
                name.c_str(), rows[i].threads, rows[0].threads, median_or_zero(rows[i].scaling),
                range_of(rows[i].scaling).c_str());
  return out;
}

// --ranks: one rank with T threads against T ranks of one thread, `repeats` pairs.
nlohmann::json run_ranks(const std::string& binary, const std::string& name, int threads,
                         std::size_t batch, int steps, int repeats, const std::string& gemm) {
  std::vector<double> one_rank, many_ranks, ratio;
  for (int r = 0; r < repeats; ++r) {
    double threaded = 0.0, ranked = 0.0;
    if (r % 2 == 0) threaded = ringtrain_samples_per_s(binary, 1, threads, name, batch, steps, gemm);
    ranked = ringtrain_samples_per_s(binary, threads, 1, name, batch, steps, gemm);
    if (r % 2 == 1) threaded = ringtrain_samples_per_s(binary, 1, threads, name, batch, steps, gemm);
    if (threaded <= 0 || ranked <= 0) continue;
    one_rank.push_back(threaded);
    many_ranks.push_back(ranked);
    ratio.push_back(threaded / ranked);
  }
  std::printf("%-5s 1 rank x %d threads: %.0f/s, %d ranks x 1 thread: %.0f/s, ratio %.2fx %s "
              "(ringtrain train, %d steps, median of %zu pairs)\n",
              name.c_str(), threads, median_or_zero(one_rank), threads, median_or_zero(many_ranks),
              median_or_zero(ratio), range_of(ratio).c_str(), steps, ratio.size());
  std::fflush(stdout);
  return {{"model", name},        {"threads", threads},
          {"one_rank_samples_per_s", one_rank}, {"ranks_samples_per_s", many_ranks},
          {"ratio", ratio},       {"ratio_median", median_or_zero(ratio)}};
}

int main(int argc, char** argv) {
  // The right OpenBLAS kernels for this CPU, for us and (inherited environment) the peer.
  blas::reexec_with_better_core(argv);
  CLI::App app{"ringtrain training speed next to PyTorch and the sgemm limit"};
  std::string models_arg = "mlp,cnn", threads_arg = "1,2", peer = "bench/peers/torch_train_speed.py", json_path;
  std::string gemm = "auto", ranks_binary;
  std::size_t batch = 128;
  int steps = 20, repeats = 5, warmup = 5, rank_steps = 200;
  app.add_option("--models", models_arg)->capture_default_str();
  app.add_option("--threads", threads_arg)->capture_default_str();
  app.add_option("--batch", batch)->capture_default_str();
  app.add_option("--steps", steps)->capture_default_str();
  app.add_option("--repeats", repeats)->capture_default_str();
  app.add_option("--peer", peer, "PyTorch peer script, or none")->capture_default_str();
  app.add_option("--json", json_path, "also write the rows as JSON");
  app.add_option("--gemm", gemm, "auto | openblas | own, as ringtrain train")->capture_default_str();
  app.add_option("--ranks", ranks_binary, "ringtrain executable: threads against ranks");
  app.add_option("--rank-steps", rank_steps, "steps of each --ranks run")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  blas::set_kernels(blas::resolve_kernels(gemm));
  if (const std::string problem = peer_problem(peer); !problem.empty()) {
    std::fprintf(stderr,
                 "bench_train_speed: the PyTorch peer cannot run: %s; or pass --peer none\n",
                 problem.c_str());
    return 2;
  }
  std::vector<int> threads_list;
  for (const std::string& t : split_list(threads_arg)) threads_list.push_back(std::stoi(t));

  std::printf(
      "batch %zu, SGD momentum 0.9, random data; %d repeats x %d steps, each repeat pairs ours, "
      "an sgemm probe and the peer; medians over repeats (range); %s\n",
      batch, repeats, steps, blas::kernels_report().c_str());
  auto env = [](const char* name) { return std::getenv(name) ? std::getenv(name) : "(unset)"; };
  std::printf("%s; the PyTorch peer inherits OPENBLAS_CORETYPE=%s, OPENBLAS_THREAD_TIMEOUT=%s\n",
              blas::core_report().c_str(), env("OPENBLAS_CORETYPE"), env("OPENBLAS_THREAD_TIMEOUT"));
  std::printf("%-5s %3s %10s %10s %7s %13s %9s %11s %8s %15s  %s\n", "model", "thr", "ours/s",
              "torch/s", "ratio", "(min-max)", "sgemm GF", "limit/s", "of limit", "(min-max)",
              "fwd / bwd / update ms");
  nlohmann::json rows = nlohmann::json::array(), ranks = nlohmann::json::array();
  for (const std::string& name : split_list(models_arg)) {
    for (nlohmann::json& row : run_model(name, threads_list, peer, batch, steps, repeats, warmup))
      rows.push_back(std::move(row));
    if (!ranks_binary.empty())
      for (int threads : threads_list)
        if (threads > 1)
          ranks.push_back(
              run_ranks(ranks_binary, name, threads, batch, rank_steps, repeats, gemm));
  }
  if (!json_path.empty())
    std::ofstream(json_path) << nlohmann::json{{"rows", rows}, {"threads_vs_ranks", ranks}}.dump(2)
                             << "\n";
  return 0;
}
