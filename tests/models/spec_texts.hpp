// Spec texts shared by the model tests.
#pragma once

namespace ringtrain::testing {

// Every layer type once: conv2d, batchnorm, relu, maxpool2d (stride != kernel), dropout,
// flatten, linear to the classes. Line numbers matter to the tests: conv2d's header is line 2.
inline const char* const kAllTypes = R"(# every layer type
[[layers]]
type = "conv2d"
out = 6
kernel = 3
padding = 1

[[layers]]
type = "batchnorm"
[[layers]]
type = "relu"
[[layers]]
type = "maxpool2d"
kernel = 3
stride = 2
[[layers]]
type = "dropout"
p = 0.25
[[layers]]
type = "flatten"
[[layers]]
type = "linear"
out = "classes"
)";

}  // namespace ringtrain::testing
