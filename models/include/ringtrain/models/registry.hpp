// Models by name or file. The CLI's --model flag and a course's own programs build networks
// here; every model is a layer list (spec.hpp):
//
//   mlp      784 → 1024 → 1024 → 10, ReLU              (models/specs/mlp.toml)
//   cnn      conv5x5 1→32 pad 2, ReLU, maxpool 2, conv5x5 32→64 pad 2, ReLU, maxpool 2,
//            flatten, fc 3136→1024, ReLU, fc 1024→10    (models/specs/cnn.toml)
//   cnn-bn   cnn with BatchNorm after each convolution  (models/specs/cnn-bn.toml)
//   FILE.toml  any layer list (a --model value ending in .toml is a file, anything else a name)
//
// The named models' files are compiled into the library. Their flags edit the spec before it
// is built, so a model is always exactly its layer list: --mlp-hidden replaces mlp's hidden
// widths (with_hidden_widths), --dropout adds a dropout layer after each ReLU that follows a
// linear layer (with_dropout: mlp's hidden layers, cnn's fc 1024). A spec file is taken as
// written: --dropout > 0 with a file is refused (write a dropout layer), --mlp-hidden ignored.
//
// Shapes follow the data: ModelOptions::input and ::classes (by default Fashion-MNIST's
// (1, 28, 28) and 10). A training configuration's options become ModelOptions in the run plan
// (ringtrain/framework/train/run_plan.hpp: model_options); models know layers and their own
// options only. mlp takes any sample shape (its first layer takes all the sample's
// elements); cnn and cnn-bn take (C, H, W) with H, W >= 4 (the second pool needs 2x2).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ringtrain/framework/model_options.hpp"
#include "ringtrain/framework/sequential.hpp"
#include "ringtrain/models/spec.hpp"

namespace ringtrain::models {

using ModelOptions = ringtrain::ModelOptions;  // model_options.hpp

// Names accepted by make_model, in a stable order (for help texts and errors).
const std::vector<std::string>& model_names();

// True if `model` names a spec file (it ends in ".toml").
bool is_spec_file(const std::string& model);

// The layer list --model names: a built-in's file with the options' edits applied, or the
// file `model` read as is. Throws UsageError for an unknown name, a defect of the file
// (spec.hpp), or options.dropout > 0 with a file.
ModelSpec model_spec(const std::string& model, const ModelOptions& options = {});

// A new, unplanned model. Throws UsageError as model_spec, and when the model cannot take
// options.input or does not end in options.classes outputs (infer_shapes).
std::unique_ptr<Sequential> make_model(const std::string& name, const ModelOptions& options = {});

// Per-sample input shape of Fashion-MNIST, the default data: (1, 28, 28).
Shape input_shape();

// True if the named model contains a batch-dependent layer (BatchNorm).
bool has_batch_norm(const std::string& name);

}  // namespace ringtrain::models
