// Buckets that start during backward (gradient_reducer.hpp), through the real Trainer:
//   - overlap on and off with the same buckets end with bitwise the same parameters, for
//     both progress drivers, per-bucket or whole updates, SGD and AdamW, and so do steps
//     that alternate between the modes;
//   - the step account is consistent: exposed <= comm, and compute + exposed matches the
//     measured step time; alternating steps report each mode's mean step time;
//   - trace.json holds every rank's spans on one timeline, bounded by --trace-steps.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "mpi_test.hpp"
#include "train_rig.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;

namespace {

// A small mlp (784-32-32-10, 26,506 parameters) in 4 buckets of at most 4 KiB: the last
// layer with the middle bias, the middle weight, the first bias, the first weight (alone:
// larger than the cap).
TrainConfig overlap_config(std::uint64_t steps) {
  TrainConfig c = small_config("mlp", steps, 24);
  c.mlp_hidden = "32,32";
  c.bucket_bytes = 4096;
  c.trace_steps = 0;
  return c;
}

std::vector<nlohmann::json> read_metrics(const std::filesystem::path& run) {
  std::vector<nlohmann::json> windows;
  std::ifstream in(run / "metrics.jsonl");
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains("step_s")) windows.push_back(j);
  }
  return windows;
}

}  // namespace

TEST_CASE("overlap on and off, same buckets: bitwise the same parameters") {
  for (const std::string optimizer : {"sgd", "adamw"}) {
    TrainConfig config = overlap_config(8);
    config.optimizer = parse_choice<OptimizerKind>(optimizer, "--optimizer");
    config.lr = optimizer == "sgd" ? 0.05f : 0.003f;
    config.overlap = Overlap::kOff;
    const RunOutput off = train_on(config, MPI_COMM_WORLD);
    config.overlap = Overlap::kOn;
    for (const std::string progress : {"layers", "thread"})
      for (const std::string update : {"on", "off"}) {
        config.poll_driver = parse_choice<PollDriver>(progress, "--ring-driver");
        config.bucket_update = parse_choice<OnOff>(update, "--bucket-update");
        INFO(fmt::format("{}, N = {}: overlap on, ring driver {}, per-bucket update {}", optimizer,
                         world_size(), progress, update));
        const RunOutput on = train_on(config, MPI_COMM_WORLD);
        REQUIRE(all_ranks(bitwise_equal(on.parameters, off.parameters)));
      }
    // The comparison sees the buckets: at N >= 3 other chunk boundaries sum some elements
    // in another order (at N = 2 a + b = b + a, so any plan gives the same bits).
    if (world_size() >= 3) {
      config.bucket_bytes = 1 << 20;  // one bucket
      const RunOutput one_bucket = train_on(config, MPI_COMM_WORLD);
      CHECK(all_ranks(!bitwise_equal(one_bucket.parameters, off.parameters)));
      CHECK(all_ranks(relative_difference(one_bucket.parameters, off.parameters) < 1e-5));
    }
  }
}

TEST_CASE("cnn with overlap on, or alternating, equals overlap off bit for bit") {
  TrainConfig config = small_config("cnn", 3, 12);
  config.bucket_bytes = 64 * 1024;
  config.trace_steps = 0;
  config.overlap = Overlap::kOff;
  const RunOutput off = train_on(config, MPI_COMM_WORLD);
  for (const std::string overlap : {"on", "alternate"}) {
    config.overlap = parse_choice<Overlap>(overlap, "--overlap");
    const RunOutput run = train_on(config, MPI_COMM_WORLD);
    INFO("overlap " << overlap << ", N = " << world_size());
    REQUIRE(all_ranks(bitwise_equal(run.parameters, off.parameters)));
  }
}

// Tolerance of compute + exposed against the measured step: the rest of a step is
// bookkeeping between the timed spans (watchdog marks, a branch or two), microseconds, but a
// rank that loses its core there (N = 3 on 2 cores) adds the time slice. 5 % of the step
// plus 0.5 ms per step, on the window's means.
constexpr double kShare = 0.05, kSlackS = 0.5e-3;

TEST_CASE("step account: exposed <= comm, compute + exposed = measured step time") {
  for (const std::string overlap : {"on", "off", "alternate"}) {
    TrainConfig config = overlap_config(40);
    config.log_every = 10;
    config.overlap = parse_choice<Overlap>(overlap, "--overlap");
    Facts facts;
    train_on(config, MPI_COMM_WORLD, [&](const std::filesystem::path& run) {
      if (world_rank() != 0) return;
      const auto windows = read_metrics(run);
      facts.check(windows.size() == 4, fmt::format("{} metrics windows, not 4", windows.size()));
      for (const auto& w : windows) {
        const auto& pr = w["per_rank"];
        for (int r = 0; r < world_size(); ++r) {
          const double step = pr["step_s"][r], compute = pr["compute_s"][r];
          const double comm = pr["comm_s"][r], exposed = pr["exposed_s"][r];
          const double collectives = pr["collectives"][r];
          const bool good = exposed <= comm && exposed >= 0 &&
                            std::abs(compute + exposed - step) <= kShare * step + kSlackS &&
                            collectives >= 2 && (overlap != "off" || exposed == comm);
          facts.check(good, fmt::format("window {} rank {}: step {:.3g} compute {:.3g} comm {:.3g} "
                                        "exposed {:.3g} collectives {}",
                                        w["step"].get<int>(), r, step, compute, comm, exposed,
                                        collectives));
        }
        // Rank 0's figures at the top level, overlap_fraction = 1 - exposed / comm.
        facts.check(
            w["compute_s"] == pr["compute_s"][0] &&
                std::abs(w["overlap_fraction"].get<double>() -
                         (1.0 - w["exposed_s"].get<double>() / w["comm_s"].get<double>())) < 1e-12,
            fmt::format("window {}: top-level figures are not rank 0's, or "
                        "overlap_fraction is not 1 - exposed/comm",
                        w["step"].get<int>()));
        // Alternating: 5 steps of each mode per 10-step window, so each figure's two mode
        // means average to the window's, and the off steps expose all they communicate; the
        // other runs have one mode and no such keys.
        const bool paired = w.contains("step_s_overlap_on") && w.contains("step_s_overlap_off");
        if (overlap == "alternate" && paired) {
          for (const std::string figure : {"step_s", "backward_s", "exposed_s", "comm_s"}) {
            const double on = w[figure + "_overlap_on"], off = w[figure + "_overlap_off"];
            const double all = w[figure];
            // A step may expose nothing (exposed 0); the others always take time.
            const bool timed = figure != "exposed_s";
            const bool good = (timed ? on > 0 && off > 0 : on >= 0 && off >= 0) &&
                              std::abs((on + off) / 2 - all) <= 1e-9 * all + 1e-15;
            facts.check(good, fmt::format("window {} {}: on {:.3g} off {:.3g} all {:.3g}",
                                          w["step"].get<int>(), figure, on, off, all));
          }
          facts.check(w["exposed_s_overlap_off"] == w["comm_s_overlap_off"],
                      "steps without overlap exposed less than they communicated");
        } else {
          facts.check(paired == (overlap == "alternate"),
                      overlap == "alternate" ? "a window without both modes' step times"
                                             : "per-mode figures in a run of one mode");
        }
      }
    });
    INFO("overlap " << overlap << ", N = " << world_size());
    REQUIRE_ALL_RANKS(facts);
  }
}

TEST_CASE("samples/s: evaluations and saves inside a window are not step time") {
  // Evaluations (full test set) every 4 steps and saves every 5 fall inside the 10-step
  // windows. samples_per_s divides the window's samples by its time less those pauses, so the
  // step time it implies is at least rank 0's own mean step time; counting only the time
  // since the window's last pause would imply a fraction of it.
  TrainConfig config = overlap_config(30);
  config.log_every = 10;
  config.evaluate = true;
  config.eval_every = 4;
  config.checkpoint_every = std::to_string(5);  // (a literal trips GCC 12's -Wrestrict)
  Facts facts;
  train_on(config, MPI_COMM_WORLD, [&](const std::filesystem::path& run) {
    if (world_rank() != 0) return;
    const auto windows = read_metrics(run);
    facts.check(windows.size() == 3, fmt::format("{} metrics windows, not 3", windows.size()));
    for (const auto& w : windows) {
      const double samples = double(config.global_batch * config.log_every);
      const double implied_step_s =
          samples / w["samples_per_s"].get<double>() / double(config.log_every);
      const double step_s = w["per_rank"]["step_s"][0];
      facts.check(
          implied_step_s >= 0.9 * step_s,
          fmt::format("window {}: samples/s implies {:.3g} s per step, rank 0 measured {:.3g}",
                      w["step"].get<int>(), implied_step_s, step_s));
    }
  });
  INFO("N = " << world_size());
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("trace.json: every rank's spans, bounded by --trace-steps, clocks aligned") {
  TrainConfig config = overlap_config(6);
  config.trace_steps = 3;
  const int N = world_size();
  Facts facts;
  auto expect = [&](bool fact, const std::string& what) { facts.check(fact, what); };
  const RunOutput out = train_on(config, MPI_COMM_WORLD, [&](const std::filesystem::path& run) {
    if (world_rank() != 0) return;
    std::ifstream in(run / "trace.json");
    const nlohmann::json trace = nlohmann::json::parse(in);
    std::set<int> pids;
    std::map<std::pair<int, int>, std::multiset<std::string>> names;  // (rank, step) -> names
    std::map<std::pair<int, int>, double> ring_bytes;
    int saves = 0;
    for (const auto& e : trace["traceEvents"]) {
      const int pid = e["pid"];
      pids.insert(pid);
      if (e["ph"] == "M" && e["name"] == "process_name") {
        const double offset = e["args"]["clock_offset_us"],
                     uncertainty = e["args"]["clock_uncertainty_us"];
        expect(std::abs(offset) <= uncertainty + 1e-6,
               fmt::format("rank {} clock offset {} us > +- {}", pid, offset, uncertainty));
      }
      if (e["ph"] != "X") continue;
      const std::string name = e["name"];
      const int step = e["args"]["step"];
      expect(e["dur"].get<double>() >= 0, "negative duration");
      if (name == "checkpoint save") {
        ++saves;
        continue;
      }
      expect(step < 3, fmt::format("event '{}' of step {} beyond --trace-steps 3", name, step));
      names[{pid, step}].insert(name);
      if (name.rfind("ring bucket", 0) == 0)
        ring_bytes[{pid, step}] += e["args"]["bytes"].get<double>();
    }
    expect(pids.size() == std::size_t(N) && *pids.begin() == 0 && *pids.rbegin() == N - 1,
           "pids are not the ranks");
    expect(saves == N, fmt::format("{} checkpoint save events for {} ranks", saves, N));
    // mlp 784-32-32-10: layers 0..4 are linear, relu, linear, relu, linear.
    const std::vector<std::string> kinds = {"linear", "relu", "linear", "relu", "linear"};
    const double gradient_bytes = 4.0 * double(out.parameters.size());
    for (int r = 0; r < N; ++r)
      for (int s = 0; s < 3; ++s) {
        const auto& seen = names[{r, s}];
        for (std::size_t i = 0; i < kinds.size(); ++i) {
          const std::string path = fmt::format("layers.{}.{}", i, kinds[i]);
          expect(seen.count("forward " + path) == 1 && seen.count("backward " + path) == 1,
                 fmt::format("rank {} step {}: no forward/backward span of {}", r, s, path));
        }
        expect(seen.count("optimizer") >= 1 && seen.count("agree: gradients finite") == 1,
               fmt::format("rank {} step {}: optimizer or agreement missing", r, s));
        expect(ring_bytes[{r, s}] == gradient_bytes,
               fmt::format("rank {} step {}: rings carried {} bytes, gradients are {}", r, s,
                           ring_bytes[{r, s}], gradient_bytes));
      }
  });
  REQUIRE_ALL_RANKS(facts);
}
