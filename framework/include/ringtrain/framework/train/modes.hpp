// The modes of `ringtrain train`: flags whose value is one word from a fixed list
// (--overlap on|off|alternate, --optimizer sgd|adamw, ...), as enums.
//
// Each enum has one small table pairing its values with the words users type; the same
// table parses a flag, names the value in config.toml and the manifest, and lists the
// choices in --help and in the error for a wrong word. Vocabulary:
//   choice      one (value, name) row of such a table
//   ModeTable<E>   the table of enum E; choices<E>() its rows
//   parse_choice<E>(text, flag)   the value named `text`, or a UsageError naming the flag
//                                 and the allowed words
// Enums that already exist elsewhere (Reduction, PollDriver, Conv2d::Algorithm, Wire) get
// their table here; the rest are declared here.
#pragma once

#include <fmt/format.h>

#include <span>
#include <string>
#include <string_view>

#include "ringtrain/collectives/options.hpp"
#include "ringtrain/files/escape.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/layers/conv2d.hpp"
#include "ringtrain/framework/train/poll_driver.hpp"
#include "ringtrain/framework/train/reduction.hpp"

namespace ringtrain {

template <typename E>
struct Choice {
  E value;
  std::string_view name;
};

enum class OptimizerKind { kSgd, kAdamw };
enum class ScheduleKind { kConstant, kStep, kCosine };
enum class LrScaling { kNone, kLinear, kSqrt };            // --lr relative to batch 128
enum class SyncBn { kAuto, kOn, kOff };                    // auto: on when the model has BatchNorm
enum class GemmChoice { kAuto, kOpenblas, kOwn };          // blas.hpp resolves auto for this CPU
enum class CollectiveKind { kRing, kMpi, kHierarchical };  // ring, MPI_Allreduce, two-level
enum class Overlap { kOn, kOff, kAlternate };  // alternate: on in even steps, off in odd
enum class OnOff { kOn, kOff };
// --zero: auto shards the optimizer state wherever the ring's halves exist (run_plan.hpp)
enum class ZeroChoice { kAuto, kOff, kOn };
// --zero-gather: where a ZeRO-1 save's shards reach rank 0 (checkpointer.hpp)
enum class ZeroGather { kSnapshot, kWriter };
// auto: from y's dtype (integer labels: cross-entropy, float32 targets: mse); loss.hpp
enum class LossChoice { kAuto, kCrossEntropy, kMse };
// --progress: rank 0's per-step output (progress_bar.hpp). auto: a bar when the output reaches
// a terminal (also through mpiexec), lines into a file or pipe; off: neither (the banner,
// evaluations, saves and the summary still print; --quiet silences those too)
enum class ProgressOutput { kAuto, kBar, kLines, kOff };

// The table of enum E: ModeTable<E>::kChoices, one row per value.
template <typename E>
struct ModeTable;

// clang-format off
template <> struct ModeTable<Conv2d::Algorithm> {
  static constexpr Choice<Conv2d::Algorithm> kChoices[] = {
      {Conv2d::Algorithm::kAuto, "auto"}, {Conv2d::Algorithm::kIm2col, "im2col"},
      {Conv2d::Algorithm::kWinograd, "winograd"}};
};
template <> struct ModeTable<OptimizerKind> {
  static constexpr Choice<OptimizerKind> kChoices[] = {
      {OptimizerKind::kSgd, "sgd"}, {OptimizerKind::kAdamw, "adamw"}};
};
template <> struct ModeTable<ScheduleKind> {
  static constexpr Choice<ScheduleKind> kChoices[] = {
      {ScheduleKind::kConstant, "constant"}, {ScheduleKind::kStep, "step"},
      {ScheduleKind::kCosine, "cosine"}};
};
template <> struct ModeTable<LrScaling> {
  static constexpr Choice<LrScaling> kChoices[] = {
      {LrScaling::kNone, "none"}, {LrScaling::kLinear, "linear"}, {LrScaling::kSqrt, "sqrt"}};
};
template <> struct ModeTable<Reduction> {
  static constexpr Choice<Reduction> kChoices[] = {
      {Reduction::kSumScaled, "sum-scaled"}, {Reduction::kMeanOfMeans, "mean-of-means"},
      {Reduction::kExact, "exact"}};
};
template <> struct ModeTable<SyncBn> {
  static constexpr Choice<SyncBn> kChoices[] = {
      {SyncBn::kAuto, "auto"}, {SyncBn::kOn, "on"}, {SyncBn::kOff, "off"}};
};
template <> struct ModeTable<GemmChoice> {
  static constexpr Choice<GemmChoice> kChoices[] = {
      {GemmChoice::kAuto, "auto"}, {GemmChoice::kOpenblas, "openblas"}, {GemmChoice::kOwn, "own"}};
};
template <> struct ModeTable<CollectiveKind> {
  static constexpr Choice<CollectiveKind> kChoices[] = {
      {CollectiveKind::kRing, "ring"}, {CollectiveKind::kMpi, "mpi"},
      {CollectiveKind::kHierarchical, "hierarchical"}};
};
template <> struct ModeTable<collectives::Wire> {
  static constexpr Choice<collectives::Wire> kChoices[] = {
      {collectives::Wire::kFp32, "fp32"}, {collectives::Wire::kBf16, "bf16"}};
};
template <> struct ModeTable<Overlap> {
  static constexpr Choice<Overlap> kChoices[] = {
      {Overlap::kOn, "on"}, {Overlap::kOff, "off"}, {Overlap::kAlternate, "alternate"}};
};
template <> struct ModeTable<PollDriver> {
  static constexpr Choice<PollDriver> kChoices[] = {
      {PollDriver::kLayers, "layers"}, {PollDriver::kThread, "thread"}};
};
template <> struct ModeTable<ProgressOutput> {
  static constexpr Choice<ProgressOutput> kChoices[] = {
      {ProgressOutput::kAuto, "auto"}, {ProgressOutput::kBar, "bar"},
      {ProgressOutput::kLines, "lines"}, {ProgressOutput::kOff, "off"}};
};
template <> struct ModeTable<LossChoice> {
  static constexpr Choice<LossChoice> kChoices[] = {
      {LossChoice::kAuto, "auto"}, {LossChoice::kCrossEntropy, "cross-entropy"},
      {LossChoice::kMse, "mse"}};
};
template <> struct ModeTable<OnOff> {
  static constexpr Choice<OnOff> kChoices[] = {{OnOff::kOn, "on"}, {OnOff::kOff, "off"}};
};
template <> struct ModeTable<ZeroChoice> {
  static constexpr Choice<ZeroChoice> kChoices[] = {
      {ZeroChoice::kAuto, "auto"}, {ZeroChoice::kOff, "0"}, {ZeroChoice::kOn, "1"}};
};
template <> struct ModeTable<ZeroGather> {
  static constexpr Choice<ZeroGather> kChoices[] = {
      {ZeroGather::kSnapshot, "snapshot"}, {ZeroGather::kWriter, "writer"}};
};
// clang-format on

// The rows of E's table, in order.
template <typename E>
constexpr std::span<const Choice<E>> choices() {
  return ModeTable<E>::kChoices;
}

// The word for a value: name_of(Overlap::kOff) == "off".
template <typename E>
std::string name_of(E value) {
  for (const Choice<E>& c : choices<E>())
    if (c.value == value) return std::string(c.name);
  return fmt::format("<{} {}>", "unnamed value", static_cast<int>(value));  // not in the table
}

// "on | off | alternate": the allowed words in table order, for --help and errors.
template <typename E>
std::string choice_list(std::string_view separator = " | ") {
  std::string list;
  for (const Choice<E>& c : choices<E>()) {
    if (!list.empty()) list += separator;
    list += c.name;
  }
  return list;
}

// The value named `text`. Throws UsageError "--overlap sometimes: choose one of on, off,
// alternate" (`flag` is the flag with its dashes).
template <typename E>
E parse_choice(std::string_view text, std::string_view flag) {
  for (const Choice<E>& c : choices<E>())
    if (c.name == text) return c.value;
  throw UsageError(
      fmt::format("{} {}: choose one of {}", flag, files::escaped(text), choice_list<E>(", ")));
}

}  // namespace ringtrain
