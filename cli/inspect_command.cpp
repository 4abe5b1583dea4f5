// `ringtrain inspect FILE [--verify] [--compare OTHER [--rtol R] [--groups model,...]]`
//
//   inspect FILE                 header and every entry (group, name, kind, shape, size)
//   inspect FILE --verify        also read every dataset through its checksum: exit 1 if the
//                                file fails any check, with the reason
//   inspect FILE --verify        the counters too (state_values.hpp): a step, epoch or
//                                position the recorded configuration does not allow fails
//   inspect FILE --compare OTHER per array: ‖a − b‖ / max(‖a‖, ‖b‖), the same whichever file
//                                comes first; exit 1 if any exceeds --rtol (default 0:
//                                bitwise), e.g. a resume on another N vs the uninterrupted
//                                run. A NaN on either side is a difference (infinite), named
//                                with its element. /progress (timings) is not compared;
//                                --groups limits the comparison to the groups named. (The
//                                momentum of a bias that BatchNorm cancels is float noise
//                                around zero: compare /model when asking "same training?")
//   --checkpoint-key FILE        (or $RINGTRAIN_CHECKPOINT_KEY_FILE) refuse files without a
//                                valid MAC made with this key, before HDF5 reads them
// A version-1 file (no seal) is read with a one-line notice on stderr. Files are parsed in a
// contained child process (contained.hpp): a file that crashes libhdf5 is refused, not fatal.
#include <fmt/format.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "commands.hpp"
#include "ringtrain/checkpoint/contained.hpp"
#include "ringtrain/checkpoint/error.hpp"
#include "ringtrain/checkpoint/file.hpp"
#include "ringtrain/checkpoint/key.hpp"
#include "ringtrain/framework/error.hpp"
#include "ringtrain/framework/train/state_values.hpp"

namespace ringtrain::cli {
namespace {

namespace ck = checkpoint;

// The schema a file declares (kinds and shapes), for reading it and its twin.
ck::Expected schema_of(const ck::VerifyResult& verified) {
  ck::Expected expected;
  for (const ck::EntryInfo& e : verified.entries) {
    if (e.kind == ck::Kind::kFloat32Array)
      expected.add_array(e.group, e.name, e.shape);
    else
      expected.add(e.group, e.name, e.kind);
  }
  return expected;
}

// How far apart two arrays of one shape are: ‖a − b‖ / max(‖a‖, ‖b‖) (0 when both are 0),
// symmetric in a and b. NaN differs from everything, itself included: the first index where
// either side holds one makes the difference infinite.
struct ArrayDifference {
  double relative = 0.0;
  std::optional<std::size_t> nan_at;
};

ArrayDifference difference(std::span<const float> a, std::span<const float> b) {
  double diff = 0.0, norm_a = 0.0, norm_b = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i]) || std::isnan(b[i])) return {INFINITY, i};
    norm_a += double(a[i]) * a[i], norm_b += double(b[i]) * b[i];
    // equal infinities are equal (their difference would be NaN)
    if (a[i] != b[i]) diff += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  }
  const double norm = std::max(norm_a, norm_b);
  if (diff == 0.0) return {0.0, std::nullopt};
  return {norm > 0 && std::isfinite(norm) ? std::sqrt(diff / norm) : INFINITY, std::nullopt};
}

// Throws CheckpointError naming `other` and the entry unless both schemas hold the same
// entries (names, kinds, shapes) outside /progress.
void require_same_outside_progress(const ck::Expected& mine, const ck::Expected& theirs,
                                   const std::string& other) {
  const auto outside = [](const ck::Expected& schema) {
    std::size_t count = 0;
    for (const ck::ExpectedEntry& e : schema.entries()) count += e.group != ck::Group::kProgress;
    return count;
  };
  for (const ck::ExpectedEntry& e : theirs.entries()) {
    if (e.group == ck::Group::kProgress) continue;
    const ck::ExpectedEntry* m = mine.find(e.group, e.name);
    if (m == nullptr || m->kind != e.kind || m->shape != e.shape)
      throw ck::CheckpointError(other, ck::entry_path(e.group, e.name) +
                                           ": not in the first file with this kind and shape");
  }
  if (outside(mine) != outside(theirs))
    throw ck::CheckpointError(other, "lacks entries of the first file outside /progress");
}

int compare(const std::string& file, const std::string& other, double rtol,
            const std::vector<std::string>& group_names, const ck::MacKey* key, bool rank0) {
  std::vector<ck::Group> groups;
  for (const std::string& name : group_names) {
    const auto group = ck::parse_group(name);
    if (!group || *group == ck::Group::kProgress)
      throw UsageError("--groups: '" + name +
                       "' is not one of model, optimizer, schedule, data, rng");
    groups.push_back(*group);
  }
  const ck::VerifyResult mine = ck::verify_file_contained(file, key);
  const ck::Expected expected = schema_of(mine);
  const ck::StateTree a = ck::read_file_contained(file, expected, nullptr, key);
  // Each file against its own schema: they must hold the same entries, kinds and shapes
  // outside /progress, which is not compared (one run may hold a split plan, another not).
  const ck::Expected theirs = schema_of(ck::verify_file_contained(other, key));
  require_same_outside_progress(expected, theirs, other);
  const ck::StateTree b = ck::read_file_contained(other, theirs, nullptr, key);
  double worst = 0.0;
  std::string worst_name;
  for (const ck::Entry& entry : a.entries()) {
    if (entry.group == ck::Group::kProgress || entry.kind() != ck::Kind::kFloat32Array) continue;
    if (!groups.empty() && std::find(groups.begin(), groups.end(), entry.group) == groups.end())
      continue;
    const ArrayDifference d = difference(std::get<ck::FloatArray>(entry.value).values,
                                         b.array(entry.group, entry.name).values);
    if (d.relative > worst || worst_name.empty()) {
      worst = d.relative;
      worst_name = ck::entry_path(entry.group, entry.name);
      if (d.nan_at) worst_name += " (element " + std::to_string(*d.nan_at) + " is NaN)";
    }
  }
  const bool ok = worst <= rtol;
  if (rank0)
    std::printf("%s: largest relative difference %.3g in %s (tolerance %.3g)\n",
                ok ? "equal within tolerance" : "DIFFERENT", worst, worst_name.c_str(), rtol);
  return ok ? 0 : 1;
}

// A training state's counters against each other and its recorded configuration (a file
// without /progress/step is not a training state: nothing to check). AgreedError: exit 1.
void check_training_values(const std::string& file, const ck::VerifyResult& verified,
                           const ck::MacKey* key) {
  const ck::Expected expected = schema_of(verified);
  if (expected.find(ck::Group::kProgress, "step") == nullptr) return;
  try {
    check_state_values(ck::read_file_contained(file, expected, nullptr, key), verified.header,
                       file);
  } catch (const UsageError& e) {
    throw AgreedError(e.what());
  }
}

// The one-line notice for a file of the format before the seal.
void notice_if_unsealed(const std::string& file, const ck::VerifyResult& verified, bool rank0) {
  if (rank0 && verified.header.version < 2)
    std::fprintf(stderr,
                 "ringtrain: notice: %s: format version 1 (no seal): read without the whole-file "
                 "digest and table of contents check\n",
                 file.c_str());
}

}  // namespace

void add_inspect(CLI::App& app, Runner& run) {
  struct Options {
    std::string file, other, key_file;
    bool verify = false;
    double rtol = 0.0;
    std::vector<std::string> groups;
  };
  auto o = std::make_shared<Options>();
  CLI::App* inspect = app.add_subcommand("inspect", "summary of a checkpoint; --verify checks it");
  inspect->add_option("FILE", o->file, "checkpoint file (.h5)")->required();
  inspect->add_flag("--verify", o->verify,
                    "read every dataset and verify its checksum; exit 1 on failure");
  inspect->add_option("--compare", o->other, "another checkpoint: compare arrays (not /progress)");
  inspect->add_option("--rtol", o->rtol, "with --compare: largest allowed ||a-b||/||b|| per array")
      ->capture_default_str();
  inspect->add_option(
      "--checkpoint-key", o->key_file,
      "MAC key file: refuse files not signed with it (default: $RINGTRAIN_CHECKPOINT_KEY_FILE)");
  inspect
      ->add_option(
          "--groups", o->groups,
          "with --compare: only these groups, e.g. model,optimizer (default all but progress)")
      ->delimiter(',');
  inspect->callback([&run, o] {
    run = [o]() -> int {
      int rank = 0;
      MPI_Comm_rank(MPI_COMM_WORLD, &rank);
      const bool rank0 = rank == 0;
      try {
        const std::optional<ck::MacKey> key = ck::MacKey::from_flag_or_environment(o->key_file);
        const ck::MacKey* k = key ? &*key : nullptr;
        if (!o->other.empty()) return compare(o->file, o->other, o->rtol, o->groups, k, rank0);
        if (o->verify) {
          const ck::VerifyResult r = ck::verify_file_contained(o->file, k);
          check_training_values(o->file, r, k);
          notice_if_unsealed(o->file, r, rank0);
          const char* seal = r.mac_checked ? ", seal and MAC match"
                             : r.sealed    ? ", seal and table of contents match"
                                           : "";
          if (rank0)
            std::printf(
                "%s: OK: format %s v%d, step %llu, %zu entries, %llu payload bytes, all checksums "
                "match%s\n",
                o->file.c_str(), r.header.format.c_str(), r.header.version,
                (unsigned long long)r.header.step, r.entries.size(),
                (unsigned long long)r.payload_bytes, seal);
          return 0;
        }
        if (rank0) std::printf("%s", ck::describe_file_contained(o->file, k).c_str());
        return 0;
      } catch (const ck::CheckpointError& e) {
        throw AgreedError(e.what());  // every rank inspected the same file: exit 1, no abort
      }
    };
  });
}

}  // namespace ringtrain::cli
