// ZeRO-1 (--zero 1, optimizer_shard.hpp) through the real Trainer: each rank updates only its
// chunk of every bucket and the ring all-gathers the parameters. Facts shown, at N = 2 and 3:
//   - after every step the parameters are bitwise those of --zero 0 with the same buckets
//     (the parameter hash in metrics.jsonl, logged every step, and the final parameters),
//     for SGD with momentum and AdamW, one bucket and several, overlap on and off, both
//     progress drivers;
//   - the optimizer state is divided: the ranks' bytes sum to the unsharded bytes, and each
//     rank holds 1/N of them within one element per bucket and state tensor;
//   - a checkpoint's gather to rank 0 alone gives rank 0 what the all-gather gives.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "mpi_test.hpp"
#include "ringtrain/collectives/buckets.hpp"
#include "ringtrain/framework/train/optimizer_shard.hpp"
#include "train_rig.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;

namespace {

// A small mlp (784-32-16-10, 25,818 parameters), a parameter hash logged after every step.
TrainConfig zero_config(const std::string& optimizer, std::size_t bucket_bytes) {
  TrainConfig c = small_config("mlp", 6, 24);
  c.mlp_hidden = "32,16";
  c.log_every = 1;
  c.trace_steps = 0;
  c.optimizer = parse_choice<OptimizerKind>(optimizer, "--optimizer");
  c.lr = optimizer == "sgd" ? 0.05f : 0.003f;
  c.weight_decay = 0.01f;
  c.bucket_bytes = bucket_bytes;
  return c;
}

struct ZeroRun {
  RunOutput out;
  std::vector<std::string> hashes;  // parameter hash after each step
  nlohmann::json state;             // manifest.json's optimizer_state
  std::size_t buckets = 0;
};

ZeroRun run(TrainConfig config) {
  ZeroRun r;
  // Only rank 0 writes the run directory: the others have nothing to read.
  r.out = train_on(config, MPI_COMM_WORLD, [&](const std::filesystem::path& dir) {
    if (world_rank() != 0) return;
    std::ifstream in(dir / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line);
      if (j.contains("parameter_hash")) r.hashes.push_back(j["parameter_hash"]);
    }
    const auto manifest = nlohmann::json::parse(std::ifstream(dir / "manifest.json"));
    r.state = manifest["optimizer_state"];
    r.buckets = manifest["gradient_buckets"]["count"];
  });
  return r;
}

}  // namespace

TEST_CASE("--zero 1 gives bitwise the parameters of --zero 0 after every step") {
  const int N = world_size();
  for (const std::string optimizer : {"sgd", "adamw"})
    for (const std::size_t bucket_bytes : {std::size_t{1} << 20, std::size_t{4096}}) {
      TrainConfig config = zero_config(optimizer, bucket_bytes);
      const ZeroRun plain = run(config);
      // Rank 0 read the files; the others check only the parameters they hold.
      const bool leader = world_rank() == 0;
      // The test can fail: the parameters change at every step.
      bool distinct = true;
      for (std::size_t i = 1; i < plain.hashes.size(); ++i)
        distinct = distinct && plain.hashes[i] != plain.hashes[i - 1];
      REQUIRE(all_ranks(!leader || (plain.hashes.size() == 6 && distinct)));
      config.zero = 1;
      struct Variant {
        const char* overlap;
        const char* progress;
      };
      for (const Variant v :
           {Variant{"on", "layers"}, Variant{"off", "layers"}, Variant{"on", "thread"}}) {
        if (bucket_bytes > 4096 && v.overlap != std::string("on")) continue;
        config.overlap = parse_choice<Overlap>(v.overlap, "--overlap");
        config.progress = parse_choice<ProgressDriver>(v.progress, "--progress");
        INFO(fmt::format("{}, N = {}, bucket cap {} B, overlap {}, progress {}", optimizer, N,
                         bucket_bytes, v.overlap, v.progress));
        const ZeroRun zero = run(config);
        REQUIRE(all_ranks(bitwise_equal(zero.out.parameters, plain.out.parameters)));
        REQUIRE(all_ranks(!leader || zero.hashes == plain.hashes));
        REQUIRE(all_ranks(!leader || (bucket_bytes == 4096) == (zero.buckets > 1)));

        // Optimizer state: sharded bytes sum to the unsharded ones; each rank 1/N of them
        // within one float per bucket and state tensor.
        bool bytes_ok = true;
        if (leader) {
          const std::size_t full = zero.state["unsharded_bytes"];
          const std::size_t tensors = optimizer == "sgd" ? 1 : 2;
          std::size_t sum = 0;
          for (std::size_t b : zero.state["bytes_per_rank"]) {
            sum += b;
            const double off = std::abs(double(b) - double(full) / N);
            bytes_ok = bytes_ok && off <= double(tensors * zero.buckets * sizeof(float));
          }
          for (std::size_t b : plain.state["bytes_per_rank"]) bytes_ok = bytes_ok && b == full;
          bytes_ok = bytes_ok && sum == full && full == tensors * zero.out.parameters.size() * 4;
        }
        REQUIRE(all_ranks(bytes_ok));
      }
    }
}

TEST_CASE("gather_to_root gives rank 0 the full state that gather gives every rank") {
  const collectives::Communicator comm;
  const int n = comm.size(), rank = comm.rank();
  // Parameter sizes incl. one smaller than N (a bucket with empty chunks) and odd sizes.
  const std::vector<std::size_t> sizes = {30, 50, 250, 40, 70, 1, 3};
  const std::size_t total = 444;
  Facts facts;
  for (const std::size_t cap_bytes : {std::size_t{4}, std::size_t{400}, std::size_t{1} << 20}) {
    const auto buckets = collectives::plan_buckets(sizes, cap_bytes);
    const OptimizerShard shard(buckets, total, n, rank, /*sharded=*/true);
    // Each rank's shard holds its own elements' flat indices, plus 1000 x the rank's number
    // (so a value in the wrong place, or from the wrong rank, shows).
    std::vector<float> full(total), mine(shard.elements());
    std::iota(full.begin(), full.end(), 1000.0f * float(rank));
    shard.take(full, mine);
    std::vector<float> everywhere(total), at_root(rank == 0 ? total : 0);
    shard.gather(comm, mine, everywhere);
    shard.gather_to_root(comm, mine, at_root);
    if (rank == 0)
      facts.check(at_root == everywhere,
                  fmt::format("cap {}: rank 0's gathered state differs from gather()'s", cap_bytes));
  }
  REQUIRE_ALL_RANKS(facts);
}
