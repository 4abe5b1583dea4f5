// `ringtrain eval`'s checkpoint: the file named, or a run directory's newest that verifies,
// and what its header says about the run that wrote it (the model's spec, the sample shape,
// the outputs, the options its threads and seed come from). The file is untrusted: it is
// parsed in a contained reader child (a resume reads it the same way).
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "ringtrain/checkpoint/contained.hpp"
#include "ringtrain/checkpoint/key.hpp"
#include "ringtrain/framework/sequential.hpp"
#include "ringtrain/framework/train/config.hpp"
#include "ringtrain/models/registry.hpp"

namespace ringtrain::cli {

struct StoredRun {
  checkpoint::VerifyResult file;  // header and every entry's kind and shape
  TrainConfig config;             // seed, kernels, threads, the built-in model's options
  models::ModelSpec spec;
  std::optional<Shape> sample_shape;  // absent in files written before it was stored
  std::optional<std::size_t> classes;
  std::optional<std::size_t> targets;  // regression: outputs per sample (files with "loss")
};

// `path` itself if it is a file; for a folder (a run directory, or its checkpoints/), its
// newest committed checkpoint that verifies, the ones passed over reported on stderr by the
// leader. Throws UsageError naming the folder when none verifies (each file's reason).
std::filesystem::path choose_checkpoint(const std::filesystem::path& path,
                                        const checkpoint::MacKey* key, bool leader);

// Reads and verifies `file`'s header and entries. Throws UsageError or CheckpointError
// naming the file.
StoredRun read_stored_run(const std::string& file, const checkpoint::MacKey* key);

// Reads the file's entries, /model against `model`'s own schema, into the model.
void load_weights(const std::string& file, const StoredRun& run, Sequential& model,
                  const checkpoint::MacKey* key);

}  // namespace ringtrain::cli
