// libFuzzer target: a model spec (--model FILE.toml) from untrusted bytes, through the parser,
// shape inference for a few sample shapes, and the canonical form. Every outcome but a
// ringtrain::Error or a normal return is a finding; so is an error message of more than one
// line, and a canonical form that does not parse back to the same layers.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "ringtrain/framework/error.hpp"
#include "ringtrain/models/spec.hpp"

namespace {

bool same_layers(const ringtrain::models::ModelSpec& a, const ringtrain::models::ModelSpec& b) {
  if (a.layers.size() != b.layers.size()) return false;
  for (std::size_t i = 0; i < a.layers.size(); ++i) {
    auto x = a.layers[i], y = b.layers[i];
    x.line = y.line = 0;
    if (!(x == y)) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ringtrain;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  models::ModelSpec spec;
  try {
    spec = models::parse_model_spec(text, "input.toml");
  } catch (const Error& e) {
    if (std::strchr(e.what(), '\n') != nullptr) std::abort();
    return 0;
  }
  const models::ModelSpec again = models::parse_model_spec(models::to_toml(spec), "canonical");
  if (!same_layers(spec, again)) std::abort();
  for (const Shape& input : {Shape{784}, Shape{1, 28, 28}, Shape{3, 7, 5}}) {
    try {
      const auto shapes = models::infer_shapes(spec, input, 10);
      if (shapes.size() != spec.layers.size()) std::abort();
    } catch (const Error& e) {
      if (std::strchr(e.what(), '\n') != nullptr) std::abort();
    }
  }
  return 0;
}
