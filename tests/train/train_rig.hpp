// Test rig for whole training runs: a small configuration, a run on a given communicator
// with its run directory in a fresh temporary folder, and comparisons of parameter sets.
#pragma once

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ringtrain/collectives/communicator.hpp"
#include "ringtrain/framework/train/run_plan.hpp"
#include "ringtrain/framework/train/trainer.hpp"
#include "ringtrain/models/registry.hpp"

namespace ringtrain::testing {

// A short, quiet run: `steps` steps of `model`, no evaluation.
inline TrainConfig small_config(const std::string& model, std::uint64_t steps,
                                std::size_t global_batch) {
  TrainConfig c;
  c.model = model;
  c.steps = steps;
  c.global_batch = global_batch;
  c.evaluate = false;
  c.quiet = true;
  c.log_every = steps;
  c.blas_threads = 1;
  return c;
}

// The model `config` names (--model, --mlp-hidden, --dropout, --conv-algorithm), for samples
// of `input` shape and `outputs` classes (Fashion-MNIST's by default).
inline std::unique_ptr<Sequential> model_of(const TrainConfig& config,
                                            const Shape& input = models::input_shape(),
                                            std::size_t outputs = 10) {
  return models::make_model(config.model, model_options(config, input, outputs));
}

struct RunOutput {
  std::vector<float> parameters;
  std::vector<float> buffers;
  TrainResults results;
};

// Trains on `comm` and returns the final parameters. Each calling rank makes its own
// temporary folder (only the communicator's rank 0 writes into it); `inspect`, if given, sees
// the run directory before it is removed.
inline RunOutput train_on(TrainConfig config, MPI_Comm comm_handle,
                          const std::function<void(const std::filesystem::path&)>& inspect = {}) {
  char pattern[] = "/tmp/ringtrain-test-XXXXXX";
  const std::filesystem::path dir = mkdtemp(pattern);
  config.run_dir = (dir / "run").string();
  collectives::Communicator comm(comm_handle);
  Trainer trainer(config, model_of(config), models::input_shape(), comm);
  RunOutput out;
  out.results = trainer.run();
  auto p = trainer.model().parameters().values();
  auto b = trainer.model().buffers().values();
  out.parameters.assign(p.begin(), p.end());
  out.buffers.assign(b.begin(), b.end());
  if (inspect) inspect(dir / "run");
  std::filesystem::remove_all(dir);
  return out;
}

template <typename T>  // float parameters, double losses
bool bitwise_equal(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](T x, T y) {
           return std::memcmp(&x, &y, sizeof x) == 0;
         });
}

// ‖a − b‖ / ‖b‖ over the whole flat buffer.
inline double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) {
    diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    norm += double(b[i]) * b[i];
  }
  return a.size() != b.size() ? INFINITY : std::sqrt(diff / std::max(norm, 1e-300));
}

}  // namespace ringtrain::testing
