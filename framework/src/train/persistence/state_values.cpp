// check_state_values (state_values.hpp): the counters of a checkpoint against each other and
// the recorded configuration.
#include "ringtrain/framework/train/state_values.hpp"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "ringtrain/framework/error.hpp"

namespace ringtrain {
namespace {

using checkpoint::Group;

[[noreturn]] void refuse(const std::string& file, const std::string& what) {
  throw UsageError(fmt::format("{}: {}: refused (a damaged or forged checkpoint)", file, what));
}

// The steps the run that wrote the file was to make: --steps, or --epochs of E steps each;
// nullopt if the configuration does not say (a file written by hand or by an old build).
std::optional<std::uint64_t> recorded_total_steps(const nlohmann::json& config,
                                                  std::uint64_t steps_per_epoch) {
  if (!config.is_object()) return std::nullopt;
  const auto steps = config.find("steps");
  if (steps != config.end() && steps->is_number_unsigned() && steps->get<std::uint64_t>() > 0)
    return steps->get<std::uint64_t>();
  const auto epochs = config.find("epochs");
  if (epochs == config.end() || !epochs->is_number()) return std::nullopt;
  const double total = std::ceil(epochs->get<double>() * double(steps_per_epoch));
  if (!(total >= 0.0) || total > 0x1p62) return std::nullopt;
  return static_cast<std::uint64_t>(total);
}

void check_data_position(const checkpoint::StateTree& tree, const nlohmann::json& config,
                         std::uint64_t step, const std::string& file) {
  const std::uint64_t n = tree.u64(Group::kData, "dataset_size");
  const std::uint64_t batch = tree.u64(Group::kData, "global_batch");
  if (n == 0 || batch == 0 || batch > n)
    refuse(file, fmt::format("/data holds global_batch {} for dataset_size {}", batch, n));
  if (config.is_object() && config.contains("global-batch") &&
      config["global-batch"] != nlohmann::json(batch))
    refuse(file, fmt::format("/data/global_batch is {}, the recorded configuration says {}", batch,
                             config["global-batch"].dump()));
  const std::uint64_t per_epoch = (n + batch - 1) / batch;
  const std::uint64_t epoch = tree.u64(Group::kData, "epoch");
  const std::uint64_t position = tree.u64(Group::kData, "position");
  if (epoch != step / per_epoch || position != (step % per_epoch) * batch)
    refuse(file, fmt::format("/data is at epoch {}, position {}, but step {} of {} steps per epoch "
                             "of {} samples is epoch {}, position {}",
                             epoch, position, step, per_epoch, batch, step / per_epoch,
                             (step % per_epoch) * batch));
  if (const auto total = recorded_total_steps(config, per_epoch); total && step > *total)
    refuse(file, fmt::format("step {} is beyond the {} steps of the run it records", step, *total));
  const std::uint64_t seen = tree.u64(Group::kProgress, "samples_seen");
  if (seen / batch > step)
    refuse(file, fmt::format("/progress/samples_seen {} is more than {} steps of {} samples", seen,
                             step, batch));
}

void check_progress_numbers(const checkpoint::StateTree& tree, std::uint64_t step,
                            const std::string& file) {
  for (const char* name : {"skipped_steps", "nonfinite_in_a_row", "window_steps"})
    if (const std::uint64_t v = tree.u64(Group::kProgress, name); v > step)
      refuse(file, fmt::format("/progress/{} is {}, more than the {} steps taken", name, v, step));
  if (const std::uint64_t count = tree.u64(Group::kOptimizer, "step_count"); count > step)
    refuse(file,
           fmt::format("/optimizer/step_count is {}, more than the {} steps taken", count, step));
  for (const char* name : {"useful_compute_s", "window_loss", "window_samples"})
    if (const double v = tree.f64(Group::kProgress, name); !std::isfinite(v) || v < 0.0)
      refuse(file, fmt::format("/progress/{} is {}: expected a finite number >= 0", name, v));
  // The best MSE is +inf until the first evaluation; a NaN metric is never recorded.
  for (const char* name : {"best_test_accuracy", "final_test_accuracy"})
    if (const double v = tree.f64(Group::kProgress, name); std::isnan(v))
      refuse(file, fmt::format("/progress/{} is nan", name));
}

}  // namespace

void check_state_values(const checkpoint::StateTree& tree, const checkpoint::Header& header,
                        const std::string& file) {
  const std::uint64_t step = tree.u64(Group::kProgress, "step");
  if (header.step != step || tree.u64(Group::kSchedule, "step") != step)
    refuse(file, fmt::format("the header says step {}, /progress {}, /schedule {}", header.step,
                             step, tree.u64(Group::kSchedule, "step")));
  if (header.epoch != tree.u64(Group::kData, "epoch"))
    refuse(file, fmt::format("the header says epoch {}, /data {}", header.epoch,
                             tree.u64(Group::kData, "epoch")));
  const nlohmann::json config = nlohmann::json::parse(header.config_json, nullptr, false);
  check_data_position(tree, config, step, file);
  check_progress_numbers(tree, step, file);
}

}  // namespace ringtrain
