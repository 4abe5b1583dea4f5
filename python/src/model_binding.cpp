// ringtrain.Model: a model of models/ (a built-in name or a spec file) with the framework's
// forward, loss and backward, its parameters and gradients as NumPy views.
//
//   Model(spec, input_shape, classes, seed=0, max_batch=256)
//   forward(x, training=False)              logits (n, classes), a new array
//   loss_and_backward(x, y, scale, ...)     Σ_i ℓ_i; gradients <- scale · ∂(Σ ℓ_i)/∂θ
//   parameters(), gradients(), buffers()    {name: view}, names as in checkpoints
//   load_state(state)                       copies {name: array} into the model
//
// Views share the model's flat buffers (parameters.hpp): writing a view writes the model,
// and a flat gradient_buffer() is what the ring reduces in one call. The step is the one
// `ringtrain train` runs per rank (data_parallel_step.cpp): forward in training mode keyed
// by the model's seed, the loss of the labels' kind (integer labels: softmax cross-entropy;
// float32 targets: squared error), backward overwriting every gradient. BatchNorm here uses
// this rank's batch statistics (no cross-rank sum).
#include <pybind11/functional.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>

#include "arrays.hpp"
#include "bindings.hpp"
#include "ringtrain/framework/loss.hpp"
#include "ringtrain/models/registry.hpp"
#include "session.hpp"

namespace ringtrain::python {

namespace {

class Model {
 public:
  Model(const std::string& spec, const Shape& input, std::size_t classes, std::uint64_t seed,
        std::size_t max_batch, const models::ModelOptions& base)
      : input_(input), classes_(classes), seed_(seed), max_batch_(max_batch) {
    if (max_batch_ < 1) throw py::value_error("Model: max_batch must be >= 1");
    ensure_blas();
    models::ModelOptions options = base;
    options.input = input;
    options.classes = classes;
    net_ = models::make_model(spec, options);
    net_->plan(input, max_batch_);
    net_->initialize(seed);
    const std::size_t outputs = num_elements(net_->output_shape());
    dlogits_.resize(max_batch_ * outputs);
    labels_.resize(max_batch_);
    ids_.resize(max_batch_);
  }

  Sequential& net() { return *net_; }
  // The key of the model's randomness (dropout: (seed, sample id, layer)), as --seed.
  std::uint64_t seed() const { return seed_; }
  void set_seed(std::uint64_t seed) { seed_ = seed; }
  std::size_t outputs() const { return num_elements(net_->output_shape()); }

  // x: (n, *input) -> n, checked.
  std::size_t rows(const py::array& x, std::span<const float> data) const {
    const std::size_t per = num_elements(input_);
    if (x.ndim() < 1 || static_cast<std::size_t>(x.ndim()) != input_.size() + 1 ||
        data.size() != static_cast<std::size_t>(x.shape(0)) * per)
      throw py::value_error("x must have shape (n, " + to_string(input_).substr(1) +
                            " (n samples of the model's input shape)");
    const auto n = static_cast<std::size_t>(x.shape(0));
    if (n > max_batch_)
      throw py::value_error("x has " + std::to_string(n) + " rows, more than max_batch " +
                            std::to_string(max_batch_) + " this Model was made for");
    return n;
  }

  StepContext context(std::size_t n, bool training, const py::object& sample_ids) {
    if (sample_ids.is_none()) {
      for (std::size_t i = 0; i < n; ++i) ids_[i] = i;
    } else {
      const auto ids = sample_ids.cast<std::vector<std::uint64_t>>();
      if (ids.size() != n) throw py::value_error("sample_ids must hold one id per row of x");
      std::copy(ids.begin(), ids.end(), ids_.begin());
    }
    StepContext ctx;
    ctx.training = training;
    ctx.seed = seed_;
    ctx.sample_ids = std::span<const std::uint64_t>(ids_).first(n);
    return ctx;
  }

  py::array_t<float> forward(const py::object& x, bool training, const py::object& sample_ids) {
    const auto data = float32_span(x, "Model.forward: x", false);
    const std::size_t n = rows(py::reinterpret_borrow<py::array>(x), data);
    const auto logits = net_->forward(data, n, context(n, training, sample_ids));
    return copy(logits, {n, outputs()});
  }

  double loss_and_backward(const py::object& x, const py::object& y, float scale,
                           const py::object& sample_ids,
                           const std::function<void(std::size_t)>& on_layer_done) {
    const auto data = float32_span(x, "Model.loss_and_backward: x", false);
    const std::size_t n = rows(py::reinterpret_borrow<py::array>(x), data);
    const std::size_t width = outputs();
    const auto logits = net_->forward(data, n, context(n, true, sample_ids));
    const std::span<float> dlogits = std::span(dlogits_).first(n * width);
    LossResult loss;
    if (py::isinstance<py::array_t<float>>(y)) {
      const auto targets = float32_span(y, "Model.loss_and_backward: y", false);
      if (targets.size() != n * width)
        throw py::value_error("y (float32 targets) must hold " + std::to_string(width) +
                              " values per row of x");
      loss = squared_error(logits, targets, n, width, scale, dlogits);
    } else {
      const py::array labels = py::array::ensure(y);
      if (!labels) throw py::type_error("y must be an array of integer class labels");
      loss =
          softmax_cross_entropy(logits, class_labels(labels, n, width), n, width, scale, dlogits);
    }
    net_->backward(dlogits, n, context(n, true, sample_ids), on_layer_done);
    return loss.loss_sum;
  }

  void load_state(const py::dict& state);

 private:
  // Integer labels as the loss takes them: (n) values in [0, classes).
  std::span<const std::int32_t> class_labels(const py::array& y, std::size_t n, std::size_t width) {
    if (y.dtype().kind() != 'i' && y.dtype().kind() != 'u')
      throw py::type_error("y must hold integer class labels (or float32 regression targets)");
    const auto labels = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>(y);
    if (static_cast<std::size_t>(labels.size()) != n)
      throw py::value_error("y must hold one label per row of x");
    for (std::size_t i = 0; i < n; ++i) {
      const std::int64_t label = labels.at(static_cast<py::ssize_t>(i));
      if (label < 0 || static_cast<std::size_t>(label) >= width)
        throw py::value_error("label " + std::to_string(label) + " at index " + std::to_string(i) +
                              " is outside [0, " + std::to_string(width) + ")");
      labels_[i] = static_cast<std::int32_t>(label);
    }
    return std::span<const std::int32_t>(labels_).first(n);
  }

  std::unique_ptr<Sequential> net_;
  Shape input_;
  std::size_t classes_;
  std::uint64_t seed_;
  std::size_t max_batch_;
  std::vector<float> dlogits_;
  std::vector<std::int32_t> labels_;
  std::vector<std::uint64_t> ids_;
};

// Copies every array of `state` into the entry of that name; every parameter and buffer must
// be there with its shape, and no other name.
void Model::load_state(const py::dict& state) {
  std::size_t matched = 0;
  for (ParameterStore* store : {&net_->parameters(), &net_->buffers()}) {
    for (std::size_t i = 0; i < store->count(); ++i) {
      const ParameterEntry& e = store->entry(i);
      if (!state.contains(e.name)) throw py::key_error("load_state: '" + e.name + "' is missing");
      const auto a =
          py::array_t<float, py::array::c_style | py::array::forcecast>(state[py::str(e.name)]);
      std::vector<std::size_t> shape(a.shape(), a.shape() + a.ndim());
      if (shape != e.shape)
        throw py::value_error("load_state: '" + e.name + "' has shape " + to_string(shape) +
                              ", the model's is " + to_string(e.shape));
      std::copy(a.data(), a.data() + a.size(), store->value(i).begin());
      ++matched;
    }
  }
  if (matched != state.size())
    for (const auto& item : state) {
      const auto name = item.first.cast<std::string>();
      bool known = false;
      for (ParameterStore* store : {&net_->parameters(), &net_->buffers()})
        for (const ParameterEntry& e : store->entries()) known = known || e.name == name;
      if (!known) throw py::key_error("load_state: '" + name + "' is not an entry of the model");
    }
}

// {name: view} of a store's values (or gradients).
py::dict views(const py::object& self, ParameterStore& store, bool grads) {
  py::dict d;
  for (std::size_t i = 0; i < store.count(); ++i) {
    const ParameterEntry& e = store.entry(i);
    d[py::str(e.name)] = view(grads ? store.grad(i) : store.value(i), e.shape, self);
  }
  return d;
}

Model& of(const py::object& self) {
  return self.cast<Model&>();
}

}  // namespace

void bind_model(py::module_& m) {
  m.def("set_blas", &set_blas, py::arg("threads"), py::arg("kernels") = "auto",
        "BLAS threads of this process and the kernel choice (auto, openblas, own), as "
        "`ringtrain train --blas-threads --gemm` set them; by default cores per node / ranks per "
        "node and auto. Results compare bitwise only under the same choice.");
  py::class_<Model>(
      m, "Model",
      "A model of ringtrain's models/: a built-in name (mlp, cnn, cnn-bn) or a spec file "
      "(FILE.toml), for samples of input_shape and `classes` outputs, its parameters "
      "initialised from seed as `ringtrain train --seed` does. Planned for batches of up to "
      "max_batch rows. Inputs: C-contiguous float32 arrays (refused otherwise).")
      .def(py::init([](const std::string& spec, const std::vector<std::size_t>& input_shape,
                       std::size_t classes, std::uint64_t seed, std::size_t max_batch,
                       const std::vector<std::size_t>& mlp_hidden, float dropout) {
             models::ModelOptions options;
             if (!mlp_hidden.empty()) options.mlp_hidden = mlp_hidden;
             options.dropout = dropout;
             return std::make_unique<Model>(spec, input_shape, classes, seed, max_batch, options);
           }),
           py::arg("spec"), py::arg("input_shape"), py::arg("classes"), py::arg("seed") = 0,
           py::arg("max_batch") = 256, py::arg("mlp_hidden") = std::vector<std::size_t>{},
           py::arg("dropout") = 0.0f)
      .def("forward", &Model::forward, py::arg("x"), py::arg("training") = false,
           py::arg("sample_ids") = py::none(),
           "Outputs (n, classes) for x (n, *input_shape), as a new array.")
      .def("loss_and_backward", &Model::loss_and_backward, py::arg("x"), py::arg("y"),
           py::arg("scale"), py::arg("sample_ids") = py::none(),
           py::arg("on_layer_done") = std::function<void(std::size_t)>{},
           "Forward in training mode, the loss (softmax cross-entropy for integer labels y, "
           "squared error for float32 targets y), and backward: every gradient <- scale * the "
           "gradient of the loss sum. Returns the loss sum (not scaled). on_layer_done(i) is "
           "called after layer i's backward, last layer first: its gradients are final then. "
           "sample_ids (default 0..n-1) key dropout as the trainer's global sample indices do.")
      .def(
          "parameters",
          [](py::object self) { return views(self, of(self).net().parameters(), false); },
          "{name: writable view} of every parameter, named as in checkpoints "
          "('layers.0.linear/weight').")
      .def(
          "gradients",
          [](py::object self) { return views(self, of(self).net().parameters(), true); },
          "{name: writable view} of every parameter's gradient.")
      .def(
          "buffers", [](py::object self) { return views(self, of(self).net().buffers(), false); },
          "{name: writable view} of the non-trained state (BatchNorm running statistics).")
      .def(
          "parameter_buffer",
          [](py::object self) {
            auto values = of(self).net().parameters().values();
            return view(values, {values.size()}, self);
          },
          "Every parameter in one flat float32 view (the layout of parameters.hpp).")
      .def(
          "gradient_buffer",
          [](py::object self) {
            auto grads = of(self).net().parameters().grads();
            return view(grads, {grads.size()}, self);
          },
          "Every gradient in one flat float32 view: what the ring reduces in one call.")
      .def(
          "parameter_entries",
          [](Model& model) {
            py::list out;
            for (const ParameterEntry& e : model.net().parameters().entries())
              out.append(py::dict(py::arg("name") = e.name,
                                  py::arg("shape") = py::tuple(py::cast(e.shape)),
                                  py::arg("offset") = e.offset, py::arg("size") = e.size,
                                  py::arg("layer") = e.layer));
            return out;
          },
          "The parameters in buffer order: name, shape, offset and size (elements), layer.")
      .def("load_state", &Model::load_state, py::arg("state"),
           "Copies {name: array} into the model: every parameter and buffer, by name and shape.")
      .def(
          "summary", [](Model& model) { return model.net().summary(); },
          "The model as a table (as `ringtrain model` prints it).")
      .def_property("seed", &Model::seed, &Model::set_seed,
                    "The key of the model's randomness: dropout masks are drawn from (seed, "
                    "sample id, layer), as `ringtrain train --seed` keys them.")
      .def_property_readonly("num_layers", [](Model& model) { return model.net().num_layers(); });
}

}  // namespace ringtrain::python
