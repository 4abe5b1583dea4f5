// Capture and restore of the training state (see training_state.hpp for the layout).
#include "ringtrain/framework/train/training_state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <nlohmann/json.hpp>

#include "ringtrain/framework/error.hpp"

namespace ringtrain {
namespace {

using checkpoint::Group;

checkpoint::Dims dims_of(const Shape& shape) {
  return checkpoint::Dims(shape.begin(), shape.end());
}

void put_store(checkpoint::StateTree& tree, const ParameterStore& store) {
  for (std::size_t p = 0; p < store.count(); ++p) {
    const ParameterEntry& e = store.entry(p);
    tree.put_array(Group::kModel, e.name, dims_of(e.shape),
                   store.values().subspan(e.offset, e.size));
  }
}

void get_store(const checkpoint::StateTree& tree, ParameterStore& store) {
  for (std::size_t p = 0; p < store.count(); ++p) {
    const ParameterEntry& e = store.entry(p);
    const auto values = tree.array(Group::kModel, e.name, dims_of(e.shape));
    std::copy(values.begin(), values.end(), store.value(p).begin());
  }
}

void expect_store(checkpoint::Expected& expected, const ParameterStore& store) {
  for (const ParameterEntry& e : store.entries())
    expected.add_array(Group::kModel, e.name, dims_of(e.shape));
}

}  // namespace

void expect_model(checkpoint::Expected& expected, const Sequential& model) {
  expect_store(expected, model.parameters());
  expect_store(expected, model.buffers());
}

void restore_model(const checkpoint::StateTree& tree, Sequential& model) {
  get_store(tree, model.parameters());
  get_store(tree, model.buffers());
}

bool sharded(const TrainingState& s) {
  return s.shard != nullptr && s.shard->sharded();
}

namespace {

std::size_t residual_elements(const TrainingState& s) {
  return s.feedback == nullptr ? 0 : s.feedback->residual().size();
}

}  // namespace

std::vector<float> gather_residuals_to_root(const collectives::Communicator& comm,
                                            const TrainingState& s) {
  const std::size_t M = residual_elements(s);
  if (M == 0) return {};
  if (M > static_cast<std::size_t>(std::numeric_limits<int>::max()))
    throw Error(fmt::format("wire residual of {} elements: too many for MPI_Gather", M));
  const bool root = comm.rank() == 0;
  std::vector<float> all(root ? M * static_cast<std::size_t>(comm.size()) : 0);
  collectives::check_mpi(MPI_Gather(s.feedback->residual().data(), static_cast<int>(M), MPI_FLOAT,
                                    all.data(), static_cast<int>(M), MPI_FLOAT, 0, comm.handle()),
                         "MPI_Gather");
  return all;
}

std::vector<FullOptimizerState> gather_optimizer_state(const collectives::Communicator& comm,
                                                       const TrainingState& s) {
  std::vector<FullOptimizerState> full;
  if (!sharded(s)) return full;
  for (const OptimizerStateView& view : s.optimizer.state()) {
    full.push_back({view.name, std::vector<float>(s.shard->total_elements())});
    s.shard->gather(comm, view.values, full.back().values);
  }
  return full;
}

std::vector<FullOptimizerState> gather_optimizer_state_to_root(
    const collectives::Communicator& comm, const TrainingState& s) {
  std::vector<FullOptimizerState> full;
  if (!sharded(s)) return full;
  const bool root = comm.rank() == 0;
  for (const OptimizerStateView& view : s.optimizer.state()) {
    std::vector<float> values(root ? s.shard->total_elements() : 0);
    s.shard->gather_to_root(comm, view.values, values);
    if (root) full.push_back({view.name, std::move(values)});
  }
  return full;
}

namespace {

// One entry per (state tensor, parameter), named so h5dump shows which tensor is which:
// optimizer state tensors are parallel to the flat parameter buffer.
void put_state_tensor(checkpoint::StateTree& tree, const std::string& state_name,
                      std::span<const ParameterEntry> entries, std::span<const float> full) {
  for (const ParameterEntry& e : entries)
    tree.put_array(Group::kOptimizer, state_name + "/" + e.name, dims_of(e.shape),
                   full.subspan(e.offset, e.size));
}

// Every rank's wire residual (N x M, rank after rank).
void put_residuals(checkpoint::StateTree& tree, std::size_t M, std::span<const float> residuals) {
  if (residuals.empty() || residuals.size() % M != 0)
    throw Error(
        fmt::format("capture: the wire residual needs every rank's {} elements "
                    "gathered first (got {})",
                    M, residuals.size()));
  tree.put_array(Group::kOptimizer, "wire_residual", {residuals.size() / M, M}, residuals);
}

// Everything but the model and the per-element optimizer state: counters, schedule, data
// position, RNG and progress.
void put_scalars(checkpoint::StateTree& tree, const TrainingState& s) {
  tree.put_u64(Group::kOptimizer, "step_count", s.optimizer.step_count());
  tree.put_string(Group::kOptimizer, "describe", s.optimizer.describe());

  tree.put_u64(Group::kSchedule, "step", s.counters.step);

  const data::SamplerState sampler = s.sampler.state();
  tree.put_u64(Group::kData, "seed", sampler.seed);
  tree.put_u64(Group::kData, "epoch", sampler.epoch);
  tree.put_u64(Group::kData, "position", sampler.position);
  tree.put_u64(Group::kData, "dataset_size", s.sampler.dataset_size());
  tree.put_u64(Group::kData, "global_batch", s.sampler.global_batch());

  tree.put_u64(Group::kRng, "seed", s.seed);
  tree.put_string(
      Group::kRng, "generator",
      "counter-based: splitmix64 finaliser over (seed, stream, key words); no hidden state");

  const TrainingCounters& p = s.counters;
  tree.put_u64(Group::kProgress, "step", p.step);
  tree.put_u64(Group::kProgress, "samples_seen", p.samples_seen);
  tree.put_f64(Group::kProgress, "useful_compute_s", p.useful_compute_s);
  tree.put_u64(Group::kProgress, "skipped_steps", p.skipped_steps);
  tree.put_u64(Group::kProgress, "nonfinite_in_a_row", p.nonfinite_in_a_row);
  tree.put_f64(Group::kProgress, "best_test_accuracy", p.best_selection_metric);
  tree.put_f64(Group::kProgress, "final_test_accuracy", p.final_selection_metric);
  tree.put_f64(Group::kProgress, "window_loss", p.window_loss);
  tree.put_f64(Group::kProgress, "window_samples", p.window_samples);
  tree.put_u64(Group::kProgress, "window_steps", p.window_steps);
  if (s.split_plan) tree.put_string(Group::kProgress, "split_plan", *s.split_plan);
}

checkpoint::StateTree model_tree(const TrainingState& s, checkpoint::StateTree* recycle) {
  checkpoint::StateTree tree;
  if (recycle) tree.reuse_storage(std::move(*recycle));
  put_store(tree, s.model.parameters());
  put_store(tree, s.model.buffers());
  return tree;
}

}  // namespace

checkpoint::StateTree capture(const TrainingState& s, std::span<const FullOptimizerState> gathered,
                              checkpoint::StateTree* recycle, std::span<const float> residuals) {
  checkpoint::StateTree tree = model_tree(s, recycle);
  const std::vector<OptimizerStateView> views = s.optimizer.state();
  if (sharded(s) && gathered.size() != views.size())
    throw Error(
        fmt::format("capture: the optimizer state is sharded; gather its {} tensors "
                    "first (got {})",
                    views.size(), gathered.size()));
  for (std::size_t v = 0; v < views.size(); ++v)
    put_state_tensor(tree, views[v].name, s.model.parameters().entries(),
                     sharded(s) ? std::span<const float>(gathered[v].values) : views[v].values);
  if (const std::size_t M = residual_elements(s); M > 0) put_residuals(tree, M, residuals);
  put_scalars(tree, s);
  return tree;
}

checkpoint::StateTree capture_deferred(const TrainingState& s, checkpoint::StateTree* recycle,
                                       DeferredState& later) {
  checkpoint::StateTree tree = model_tree(s, recycle);
  const std::span<const ParameterEntry> entries = s.model.parameters().entries();
  later = DeferredState{};
  later.residual_elements = residual_elements(s);
  for (const OptimizerStateView& view : s.optimizer.state()) {
    if (sharded(s))
      later.state_names.push_back(view.name);
    else
      put_state_tensor(tree, view.name, entries, view.values);
  }
  if (sharded(s)) later.entries.assign(entries.begin(), entries.end());
  put_scalars(tree, s);
  return tree;
}

void put_deferred(checkpoint::StateTree& tree, const DeferredState& later,
                  std::span<const FullOptimizerState> gathered, std::span<const float> residuals) {
  if (gathered.size() != later.state_names.size())
    throw Error(fmt::format("put_deferred: {} optimizer state tensors expected, got {}",
                            later.state_names.size(), gathered.size()));
  for (std::size_t v = 0; v < gathered.size(); ++v)
    put_state_tensor(tree, later.state_names[v], later.entries, gathered[v].values);
  if (later.residual_elements > 0) put_residuals(tree, later.residual_elements, residuals);
}

void check_compatible(const checkpoint::StateTree& tree, const TrainingState& s) {
  const struct {
    const char* what;
    std::uint64_t in_file, here;
    const char* flag;
  } facts[] = {
      {"seed", tree.u64(Group::kData, "seed"), s.sampler.state().seed, "--seed"},
      {"seed", tree.u64(Group::kRng, "seed"), s.seed, "--seed"},
      {"global batch", tree.u64(Group::kData, "global_batch"), s.sampler.global_batch(),
       "--global-batch"},
      {"training set size", tree.u64(Group::kData, "dataset_size"), s.sampler.dataset_size(),
       "--data"},
  };
  for (const auto& f : facts)
    if (f.in_file != f.here)
      throw UsageError(fmt::format(
          "the checkpoint was written with {} {}, this run has {} {}: resume with the same {} "
          "(the sample order and all randomness depend on it)",
          f.what, f.in_file, f.what, f.here, f.flag));
}

void check_same_data(const std::string& stored_config_json, const std::string& run_config_json) {
  const auto stored = nlohmann::json::parse(stored_config_json, nullptr, false);
  const auto run = nlohmann::json::parse(run_config_json, nullptr, false);
  const auto text = [](const nlohmann::json& json, const char* key) {
    return json.is_object() && json.contains(key) && json[key].is_string()
               ? json[key].get<std::string>()
               : std::string();
  };
  const std::string was = text(stored, "data_digest"), is = text(run, "data_digest");
  if (was.empty() || is.empty() || was == is) return;
  throw UsageError(fmt::format(
      "the checkpoint was written training on data with digest {} ({}), but this run's data "
      "has digest {} ({}): resume with the data the run trained on (the sample order, the "
      "position in the epoch and the weights all refer to it)",
      was, text(stored, "data_path"), is, text(run, "data_path")));
}

void restore(const checkpoint::StateTree& tree, const TrainingState& s) {
  restore_model(tree, s.model);
  ParameterStore& params = s.model.parameters();
  std::vector<float> full(sharded(s) ? params.num_elements() : 0);
  for (const OptimizerStateView& view : s.optimizer.state()) {
    const std::span<float> target = sharded(s) ? std::span<float>(full) : view.values;
    for (const ParameterEntry& e : params.entries()) {
      const auto values = tree.array(Group::kOptimizer, view.name + "/" + e.name, dims_of(e.shape));
      std::copy(values.begin(), values.end(), target.begin() + std::ptrdiff_t(e.offset));
    }
    if (sharded(s)) s.shard->take(full, view.values);
  }
  s.optimizer.set_step_count(tree.u64(Group::kOptimizer, "step_count"));
  // The wire residual differs by rank: restore_residual takes this rank's row.

  s.sampler.restore({tree.u64(Group::kData, "seed"), tree.u64(Group::kData, "epoch"),
                     tree.u64(Group::kData, "position")});

  TrainingCounters& p = s.counters;
  p.step = tree.u64(Group::kProgress, "step");
  p.samples_seen = tree.u64(Group::kProgress, "samples_seen");
  p.useful_compute_s = tree.f64(Group::kProgress, "useful_compute_s");
  p.skipped_steps = tree.u64(Group::kProgress, "skipped_steps");
  p.nonfinite_in_a_row = tree.u64(Group::kProgress, "nonfinite_in_a_row");
  p.best_selection_metric = tree.f64(Group::kProgress, "best_test_accuracy");
  p.final_selection_metric = tree.f64(Group::kProgress, "final_test_accuracy");
  p.window_loss = tree.f64(Group::kProgress, "window_loss");
  p.window_samples = tree.f64(Group::kProgress, "window_samples");
  p.window_steps = tree.u64(Group::kProgress, "window_steps");
  if (s.split_plan)
    *s.split_plan = tree.find(Group::kProgress, "split_plan")
                        ? tree.string(Group::kProgress, "split_plan")
                        : std::string();
}

checkpoint::Expected toggle_split_plan(const checkpoint::Expected& expected) {
  checkpoint::Expected other;
  bool had = false;
  for (const checkpoint::ExpectedEntry& e : expected.entries()) {
    if (e.group == Group::kProgress && e.name == "split_plan") {
      had = true;
    } else if (e.kind == checkpoint::Kind::kFloat32Array) {
      other.add_array(e.group, e.name, e.shape);
    } else {
      other.add(e.group, e.name, e.kind);
    }
  }
  if (!had) other.add(Group::kProgress, "split_plan", checkpoint::Kind::kString);
  return other;
}

void restore_residual(const checkpoint::StateTree& tree, const TrainingState& s, int rank,
                      int world_size) {
  const std::size_t M = residual_elements(s);
  if (M == 0) return;
  const auto all =
      tree.array(Group::kOptimizer, "wire_residual", {static_cast<std::size_t>(world_size), M});
  s.feedback->restore(all.subspan(static_cast<std::size_t>(rank) * M, M));
}

}  // namespace ringtrain
