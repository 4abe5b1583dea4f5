// bench_train_speed: training samples/s of ringtrain's models next to PyTorch 1.13 on the
// same model, batch, optimizer (SGD momentum 0.9) and thread count, measured in the same
// invocation, and training's GFLOP/s against its own products':
//
//   products (GFLOP/s) = the model's Linear layers' products at the batch (y = x·Wᵀ, dW = dyᵀ·x
//                        and dx = dy·W), timed through blas::gemm at the same thread count: the
//                        own kernels where they take them (blas.hpp), OpenBLAS for the rest
//   training (GFLOP/s) = samples/s × training FLOPs per sample (3 × forward: forward, dW, dx)
//   of products        = training / products: 100 % would be a step that is all products
//
// Each repeat pairs the two sides in time: `steps` of our training between two probes of
// the products (the mean of their medians of 5 passes is the repeat's GFLOP/s), and the
// peer's `steps` in a fresh process right after (repeats 1, 3, ...) or before (2, 4, ...). A
// repeat's step time is its mean (the peer's rule: the steps' total over their number). The
// ratio and the fraction of the products are computed per repeat, and the row prints their
// medians with their range: this VM's speed drifts by up to 50 % within minutes, so only
// measurements seconds apart are compared. Within a repeat every thread count of a model runs
// (the order rotating from repeat to repeat), so "scaling" (samples/s at T threads over the
// first thread count) is also a median of per-repeat ratios. The phases (forward, backward,
// update) are medians over the steps, and "pool" counts the rank's parallel loops per step
// and the calling thread's wait for the others' parts in them. One table row per (model,
// threads); --json writes the rows, with the per-repeat values.
//
// --ranks BIN (the ringtrain executable): per repeat and thread count T > 1, `BIN train` as
// one process of one thread alone, as T such processes started together (the ceiling: they
// share only the machine and never wait for each other), as one rank with T threads and as T
// ranks (mpiexec.mpich) of one thread each, same model, global batch, steps and --gemm, in
// rotating order; samples/s from each run's manifest.json (the sum over the processes for the
// ceiling). Each configuration prints its share of the ceiling, and the ceiling its gain over
// one process alone.
//
// Usage: bench_train_speed [--models mlp,cnn] [--threads 1,2] [--batch 128] [--steps 20]
//                          [--repeats 5] [--peer bench/peers/torch_train_speed.py | none]
//                          [--gemm auto|openblas|own] [--ranks BIN] [--rank-steps 200]
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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

// One product of a Linear layer at the batch: C (m x n) = op(A)·op(B), k deep.
struct Product {
  blas::Trans ta, tb;
  int m, n, k;
};

// The model's Linear layers' products at `batch` samples (linear.cpp): y = x·Wᵀ, dW = dyᵀ·x,
// and dx = dy·W except for the first layer, whose input gradient is not computed.
std::vector<Product> linear_products(const Sequential& model, std::size_t batch) {
  using blas::Trans;
  std::vector<Product> products;
  for (const ParameterEntry& e : model.parameters().entries()) {
    if (model.layer(e.layer).kind() != "linear" || e.shape.size() != 2) continue;
    const int out = int(e.shape[0]), in = int(e.shape[1]), b = int(batch);
    products.push_back({Trans::kNo, Trans::kYes, b, out, in});
    products.push_back({Trans::kYes, Trans::kNo, out, in, b});
    if (e.layer > 0) products.push_back({Trans::kNo, Trans::kNo, b, in, out});
  }
  return products;
}

// GFLOP/s of the model's Linear products at the batch through blas::gemm at the current
// thread count: the median of `repeats` timed passes over all of them.
double products_gflops(const std::vector<Product>& products, int repeats) {
  std::vector<std::vector<float>> a, b, c;
  double flops = 0.0;
  for (const Product& p : products) {
    a.emplace_back(std::size_t(p.m) * p.k, 0.5f);
    b.emplace_back(std::size_t(p.k) * p.n, 0.25f);
    c.emplace_back(std::size_t(p.m) * p.n);
    flops += 2.0 * p.m * p.n * p.k;
  }
  auto pass = [&] {
    for (std::size_t i = 0; i < products.size(); ++i) {
      const Product& p = products[i];
      blas::gemm(p.ta, p.tb, p.m, p.n, p.k, 1.0f, a[i].data(), b[i].data(), 0.0f, c[i].data());
    }
  };
  pass();
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    const double t0 = now_s();
    pass();
    rates.push_back(flops / (now_s() - t0) / 1e9);
  }
  return median(rates);
}

struct Phases {
  double step_s, forward_s, backward_s, update_s;
  double pool_loops, pool_wait_s;  // per step: the rank's parallel loops, the caller's wait
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
    blas::PoolCounters pool0{};
    for (int s = -warmup; s < steps; ++s) {
      if (s == 0) pool0 = blas::pool_counters();
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
    const blas::PoolCounters pool1 = blas::pool_counters();
    return {total_s / steps,
            median(fwd),
            median(bwd),
            median(upd),
            double(pool1.loops - pool0.loops) / steps,
            (pool1.caller_wait_s - pool0.caller_wait_s) / steps};
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

// One `ringtrain train` job: `ranks` ranks of `threads` BLAS threads.
struct Job {
  int ranks, threads;
};

// samples/s of each job, all started together (a shell's background jobs, then `wait`), from
// their manifest.json (0 for a job that failed).
std::vector<double> ringtrain_samples_per_s(const std::string& binary, const std::vector<Job>& jobs,
                                            const std::string& model, std::size_t batch, int steps,
                                            const std::string& gemm) {
  char pattern[] = "/tmp/bench-train-speed-XXXXXX";
  const char* dir = mkdtemp(pattern);
  if (dir == nullptr) return std::vector<double>(jobs.size(), 0.0);
  std::string command;
  for (std::size_t j = 0; j < jobs.size(); ++j)
    command += fmt::format(
        "mpiexec.mpich -n {} {} train --model {} --global-batch {} --steps {} --no-eval --quiet "
        "--log-every {} --blas-threads {} --gemm {} --run-dir {}/run{} >/dev/null 2>&1 & ",
        jobs[j].ranks, binary, model, batch, steps, steps, jobs[j].threads, gemm, dir, j);
  std::system((command + "wait").c_str());
  std::vector<double> rates;
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    std::ifstream manifest(fmt::format("{}/run{}/manifest.json", dir, j));
    const nlohmann::json m = nlohmann::json::parse(manifest, nullptr, false);
    rates.push_back(m.is_discarded() || !m.contains("results")
                        ? 0.0
                        : m["results"].value("samples_per_s", 0.0));
  }
  std::system(fmt::format("rm -rf {}", dir).c_str());
  return rates;
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
  std::vector<double> pool_loops, pool_wait_s;
};

// One repeat of one row: probes of the products around our steps, the peer before (odd r)
// or after.
void measure_repeat(Row& row, const std::string& name, const std::string& peer, std::size_t batch,
                    int steps, int r, double train_flops, const std::vector<Product>& products) {
  blas::set_threads(row.threads);
  double torch_r = 0.0;
  if (r % 2 == 1) torch_r = torch_samples_per_s(peer, name, row.threads, batch, steps, 1);
  const double gflops_before = products_gflops(products, 5);
  const Phases phases = row.ours->time(0, steps);
  const double gflops_r = 0.5 * (gflops_before + products_gflops(products, 5));
  if (r % 2 == 0) torch_r = torch_samples_per_s(peer, name, row.threads, batch, steps, 1);
  const double ours_r = double(batch) / phases.step_s;
  row.ours_rate.push_back(ours_r);
  row.gflops.push_back(gflops_r);
  row.fraction.push_back(ours_r * train_flops / 1e9 / gflops_r);
  row.fwd.push_back(phases.forward_s);
  row.bwd.push_back(phases.backward_s);
  row.upd.push_back(phases.update_s);
  row.pool_loops.push_back(phases.pool_loops);
  row.pool_wait_s.push_back(phases.pool_wait_s);
  if (torch_r > 0) {
    row.torch_rate.push_back(torch_r);
    row.ratio.push_back(ours_r / torch_r);
  }
}

nlohmann::json print_row(const Row& row, const std::string& name, std::size_t batch,
                         double train_flops) {
  const double training_gflops = median_or_zero(row.ours_rate) * train_flops / 1e9;
  std::vector<double> percent;
  for (double f : row.fraction) percent.push_back(100.0 * f);
  std::printf(
      "%-5s %3d %10.0f %10.0f %7.2f %13s %9.1f %9.1f %7.1f%% %15s  %.2f / %.2f / %.2f  %5.1f "
      "%6.3f\n",
      name.c_str(), row.threads, median_or_zero(row.ours_rate), median_or_zero(row.torch_rate),
      median_or_zero(row.ratio), range_of(row.ratio).c_str(), training_gflops,
      median_or_zero(row.gflops), median_or_zero(percent), range_of(percent).c_str(),
      median_or_zero(row.fwd) * 1e3, median_or_zero(row.bwd) * 1e3, median_or_zero(row.upd) * 1e3,
      median_or_zero(row.pool_loops), median_or_zero(row.pool_wait_s) * 1e3);
  std::fflush(stdout);
  return {{"model", name},
          {"threads", row.threads},
          {"batch", batch},
          {"ours_samples_per_s", median_or_zero(row.ours_rate)},
          {"torch_samples_per_s", median_or_zero(row.torch_rate)},
          {"ratio_vs_torch", median_or_zero(row.ratio)},
          {"scaling", median_or_zero(row.scaling)},
          {"training_gflops", training_gflops},
          {"products_gflops", median_or_zero(row.gflops)},
          {"train_flops_per_sample", train_flops},
          {"fraction_of_products", median_or_zero(row.fraction)},
          {"forward_s", median_or_zero(row.fwd)},
          {"backward_s", median_or_zero(row.bwd)},
          {"update_s", median_or_zero(row.upd)},
          {"pool_loops_per_step", median_or_zero(row.pool_loops)},
          {"pool_wait_s_per_step", median_or_zero(row.pool_wait_s)},
          {"per_repeat",
           {{"ours_samples_per_s", row.ours_rate},
            {"torch_samples_per_s", row.torch_rate},
            {"ratio_vs_torch", row.ratio},
            {"scaling", row.scaling},
            {"products_gflops", row.gflops},
            {"fraction_of_products", row.fraction}}}};
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
  const std::vector<Product> products = linear_products(*probe, batch);
  std::vector<Row> rows(threads_list.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    rows[i].threads = threads_list[i];
    blas::set_threads(rows[i].threads);  // the layers plan their threads now
    rows[i].ours = std::make_unique<OurTraining>(name, batch);
    rows[i].ours->time(warmup, 0);
  }
  for (int r = 0; r < repeats; ++r) {
    for (std::size_t j = 0; j < rows.size(); ++j)
      measure_repeat(rows[(j + r) % rows.size()], name, peer, batch, steps, r, train_flops,
                     products);
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

// --ranks: per repeat, in rotating order, one process of one thread alone, T of them
// together (the ceiling), one rank of T threads, T ranks of one thread; each configuration's
// samples/s as a share of the ceiling of the same repeat.
nlohmann::json run_configurations(const std::string& binary, const std::string& name, int threads,
                                  std::size_t batch, int steps, int repeats,
                                  const std::string& gemm) {
  const std::vector<std::pair<std::string, std::vector<Job>>> configurations = {
      {"alone", {{1, 1}}},
      {"ceiling", std::vector<Job>(std::size_t(threads), Job{1, 1})},
      {fmt::format("1 rank x {} threads", threads), {{1, threads}}},
      {fmt::format("{} ranks x 1 thread", threads), {{threads, 1}}}};
  const std::size_t n = configurations.size();
  std::vector<std::vector<double>> rate(n), share(n);
  for (int r = 0; r < repeats; ++r) {
    std::vector<double> got(n, 0.0);
    for (std::size_t j = 0; j < n; ++j) {
      const std::size_t c = (j + std::size_t(r)) % n;
      const std::vector<double> rates =
          ringtrain_samples_per_s(binary, configurations[c].second, name, batch, steps, gemm);
      if (std::find(rates.begin(), rates.end(), 0.0) == rates.end())
        for (double x : rates) got[c] += x;
    }
    if (std::find(got.begin(), got.end(), 0.0) != got.end()) continue;  // a run failed
    for (std::size_t c = 0; c < n; ++c) {
      rate[c].push_back(got[c]);
      share[c].push_back(got[c] / got[1]);
    }
  }
  nlohmann::json out = {{"model", name}, {"threads", threads}, {"steps", steps}};
  for (std::size_t c = 0; c < n; ++c) {
    const std::string& label = configurations[c].first;
    const std::string of =
        c == 1
            ? fmt::format("{:.2f}x alone {}", median_or_zero(rate[1]) / median_or_zero(rate[0]),
                          "(median of repeats' sums)")
            : fmt::format("{:.2f} of the ceiling {}", median_or_zero(share[c]), range_of(share[c]));
    std::printf("%-5s %-22s %9.0f samples/s  %s\n", name.c_str(), label.c_str(),
                median_or_zero(rate[c]), of.c_str());
    out[label] = {{"samples_per_s", rate[c]},
                  {"share_of_ceiling", share[c]},
                  {"share_median", median_or_zero(share[c])}};
  }
  std::printf("%-5s (ringtrain train, %d steps per run, %zu repeats kept)\n", name.c_str(), steps,
              rate[0].size());
  std::fflush(stdout);
  return out;
}

int main(int argc, char** argv) {
  // The right OpenBLAS kernels for this CPU, for us and (inherited environment) the peer.
  blas::reexec_with_better_core(argv);
  CLI::App app{"ringtrain training speed next to PyTorch, its products and the two-core ceiling"};
  std::string models_arg = "mlp,cnn", threads_arg = "1,2",
              peer = "bench/peers/torch_train_speed.py", json_path;
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
  app.add_option("--gemm", gemm, "auto | openblas | own, as ringtrain train")
      ->capture_default_str();
  app.add_option("--ranks", ranks_binary,
                 "ringtrain executable: threads and ranks against the ceiling");
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
  // one process on this node: the pool of the most threads asked, and whether it spins
  blas::set_threads(*std::max_element(threads_list.begin(), threads_list.end()), 1);

  std::printf(
      "batch %zu, SGD momentum 0.9, random data; %d repeats x %d steps, each repeat pairs ours, "
      "a probe of the model's Linear products and the peer; medians over repeats (range); %s; "
      "the rank's threads %s while they wait\n",
      batch, repeats, steps, blas::kernels_report().c_str(), blas::pool_spins() ? "spin" : "sleep");
  auto env = [](const char* name) { return std::getenv(name) ? std::getenv(name) : "(unset)"; };
  std::printf("%s; the PyTorch peer inherits OPENBLAS_CORETYPE=%s, OPENBLAS_THREAD_TIMEOUT=%s\n",
              blas::core_report().c_str(), env("OPENBLAS_CORETYPE"),
              env("OPENBLAS_THREAD_TIMEOUT"));
  std::printf("%-5s %3s %10s %10s %7s %13s %9s %9s %8s %15s  %s  %s\n", "model", "thr", "ours/s",
              "torch/s", "ratio", "(min-max)", "train GF", "prod. GF", "of prod.", "(min-max)",
              "fwd / bwd / update ms", "pool loops, wait ms per step");
  nlohmann::json rows = nlohmann::json::array(), ranks = nlohmann::json::array();
  for (const std::string& name : split_list(models_arg)) {
    for (nlohmann::json& row : run_model(name, threads_list, peer, batch, steps, repeats, warmup))
      rows.push_back(std::move(row));
    if (!ranks_binary.empty())
      for (int threads : threads_list)
        if (threads > 1)
          ranks.push_back(
              run_configurations(ranks_binary, name, threads, batch, rank_steps, repeats, gemm));
  }
  if (!json_path.empty())
    std::ofstream(json_path) << nlohmann::json{{"rows", rows}, {"threads_vs_ranks", ranks}}.dump(2)
                             << "\n";
  return 0;
}
