// optim_replay: applies optimizer steps read from stdin and prints the parameters after
// each step, so that bench/peers/torch_optim_check.py can compare ringtrain's optimizers
// with torch.optim. Not a test: it needs PyTorch, which CI does not have.
//
//   optim_replay NAME MOMENTUM NESTEROV(0|1) WEIGHT_DECAY BETA1 BETA2 EPS
//   stdin:  n steps, then n initial params, then per step: lr and n grads
//   stdout: per step, one line of n params (%.9g, enough to round-trip a float)
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "ringtrain/framework/optim/optimizer.hpp"

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr,
                 "usage: optim_replay NAME MOMENTUM NESTEROV WEIGHT_DECAY BETA1 BETA2 EPS\n");
    return 2;
  }
  try {
    ringtrain::OptimizerConfig config;
    config.name = argv[1];
    config.momentum = std::stof(argv[2]);
    config.nesterov = std::string(argv[3]) == "1";
    config.weight_decay = std::stof(argv[4]);
    config.beta1 = std::stof(argv[5]);
    config.beta2 = std::stof(argv[6]);
    config.eps = std::stof(argv[7]);
    std::size_t n = 0, steps = 0;
    if (std::scanf("%zu %zu", &n, &steps) != 2) throw std::runtime_error("bad header");
    std::vector<float> p(n), g(n);
    for (auto& x : p)
      if (std::scanf("%f", &x) != 1) throw std::runtime_error("bad params");
    auto opt = ringtrain::make_optimizer(config, n);
    for (std::size_t s = 0; s < steps; ++s) {
      float lr = 0;
      if (std::scanf("%f", &lr) != 1) throw std::runtime_error("bad lr");
      for (auto& x : g)
        if (std::scanf("%f", &x) != 1) throw std::runtime_error("bad grads");
      opt->step(p, g, lr);
      for (std::size_t i = 0; i < n; ++i) std::printf(i + 1 < n ? "%.9g " : "%.9g\n", p[i]);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "optim_replay: %s\n", e.what());
    return 1;
  }
  return 0;
}
