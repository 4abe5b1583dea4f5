// ZeRO-1 (--zero 1, optimizer_shard.hpp) through the real Trainer: each rank updates only its
// chunk of every bucket and the ring all-gathers the parameters. Facts shown, at N = 2 and 3:
//   - after every step the parameters are bitwise those of --zero 0 with the same buckets
//     (the parameter hash in metrics.jsonl, logged every step, and the final parameters),
//     for SGD with momentum and AdamW, one bucket and several, overlap on and off, both
//     progress drivers;
//   - the optimizer state is divided: the ranks' bytes sum to the unsharded bytes, and each
//     rank holds 1/N of them within one element per bucket and state tensor;
//   - the same with --collective hierarchical (hosts of 1 and of 2 ranks, uneven at N = 3):
//     each rank updates its shard of the two-level reduce-scatter, and the parameters after
//     every step are bitwise those of hierarchical --zero 0; the state is divided among the
//     core ranks (an extra rank holds none);
//   - a checkpoint's gather to rank 0 alone gives rank 0 what the all-gather gives, each
//     rank's own values in its pieces, for the ring's and the hierarchical shards.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>

#include "mpi_test.hpp"
#include "ringtrain/collectives/buckets.hpp"
#include "ringtrain/collectives/hierarchical.hpp"
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
      config.zero = ZeroChoice::kOff;
      const ZeroRun plain = run(config);
      // Rank 0 read the files; the others check only the parameters they hold.
      const bool leader = world_rank() == 0;
      // The test can fail: the parameters change at every step.
      bool distinct = true;
      for (std::size_t i = 1; i < plain.hashes.size(); ++i)
        distinct = distinct && plain.hashes[i] != plain.hashes[i - 1];
      REQUIRE(all_ranks(!leader || (plain.hashes.size() == 6 && distinct)));
      config.zero = ZeroChoice::kOn;
      struct Variant {
        const char* overlap;
        const char* progress;
      };
      for (const Variant v :
           {Variant{"on", "layers"}, Variant{"off", "layers"}, Variant{"on", "thread"}}) {
        if (bucket_bytes > 4096 && v.overlap != std::string("on")) continue;
        config.overlap = parse_choice<Overlap>(v.overlap, "--overlap");
        config.poll_driver = parse_choice<PollDriver>(v.progress, "--ring-driver");
        INFO(fmt::format("{}, N = {}, bucket cap {} B, overlap {}, ring driver {}", optimizer, N,
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

TEST_CASE("hierarchical --zero 1 gives bitwise the parameters of hierarchical --zero 0") {
  const int N = world_size();
  for (const int K : {1, 2})
    for (const std::string optimizer : {"sgd", "adamw"}) {
      TrainConfig config = zero_config(optimizer, 4096);
      config.collective = CollectiveKind::kHierarchical;
      config.ranks_per_host = K;
      config.zero = ZeroChoice::kOff;
      const ZeroRun plain = run(config);
      const bool leader = world_rank() == 0;
      REQUIRE(all_ranks(!leader || plain.hashes.size() == 6));
      config.zero = ZeroChoice::kOn;
      for (const char* overlap : {"on", "off"}) {
        config.overlap = parse_choice<Overlap>(overlap, "--overlap");
        INFO(fmt::format("{}, N = {}, --ranks-per-host {}, overlap {}", optimizer, N, K, overlap));
        const ZeroRun zero = run(config);
        REQUIRE(all_ranks(bitwise_equal(zero.out.parameters, plain.out.parameters)));
        REQUIRE(all_ranks(!leader || zero.hashes == plain.hashes));
        // The state is divided: the ranks' bytes sum to the unsharded ones; at N = 3 with
        // hosts of 2, rank 1 is an extra rank and owns nothing.
        bool bytes_ok = true;
        if (leader) {
          const std::size_t full = zero.state["unsharded_bytes"];
          const std::vector<std::size_t> per_rank = zero.state["bytes_per_rank"];
          bytes_ok = std::accumulate(per_rank.begin(), per_rank.end(), std::size_t{0}) == full &&
                     per_rank.size() == std::size_t(N);
          if (N == 3 && K == 2) bytes_ok = bytes_ok && per_rank[1] == 0 && per_rank[0] > 0;
        }
        REQUIRE(all_ranks(bytes_ok));
      }
    }
}

namespace {

// Every rank's state holds its elements' flat indices plus 1000 x (rank + 1), so a value in
// the wrong place, from the wrong rank, or from no rank (0) shows. Checks that gather() puts
// this rank's own values in its pieces and the same bits everywhere, that the pieces of all
// ranks add up to the whole (with the first: they partition it), and that gather_to_root
// gives rank 0 what gather() gives.
void check_gathers(const collectives::RingOptions& ring, const std::string& where, Facts& facts) {
  const collectives::Communicator comm;
  const int n = comm.size(), rank = comm.rank();
  // Parameter sizes incl. one smaller than N (a bucket with empty chunks) and odd sizes.
  const std::vector<std::size_t> sizes = {30, 50, 250, 40, 70, 1, 3};
  const std::size_t total = 444;
  for (const std::size_t cap_bytes : {std::size_t{4}, std::size_t{400}, std::size_t{1} << 20}) {
    const std::string at = fmt::format("{}, cap {}: ", where, cap_bytes);
    const auto buckets = collectives::plan_buckets(sizes, cap_bytes);
    const OptimizerShard shard(buckets, total, n, rank, /*sharded=*/true, ring);
    std::vector<float> full(total), mine(shard.elements());
    std::iota(full.begin(), full.end(), 1000.0f * float(rank + 1));
    shard.take(full, mine);
    std::vector<float> everywhere(total), at_root(rank == 0 ? total : 0);
    shard.gather(comm, mine, everywhere);
    shard.gather_to_root(comm, mine, at_root);
    bool own = true;
    for (const ShardPiece& p : shard.pieces())
      for (std::size_t i = p.flat_offset; i < p.flat_offset + p.count; ++i)
        own = own && everywhere[i] == full[i];
    facts.check(own, at + "a rank's own values are not in its pieces");
    unsigned long long elements = shard.elements(), sum = 0;
    MPI_Allreduce(&elements, &sum, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    facts.check(sum == total, at + fmt::format("the shards hold {} of {} elements", sum, total));
    std::vector<float> root = everywhere;
    MPI_Bcast(root.data(), static_cast<int>(total), MPI_FLOAT, 0, MPI_COMM_WORLD);
    facts.check(bitwise_equal(root, everywhere), at + "gather() differs between ranks");
    if (rank == 0) facts.check(at_root == everywhere, at + "gather_to_root differs from gather()");
  }
}

}  // namespace

TEST_CASE("gather_to_root gives rank 0 the full state that gather gives every rank") {
  Facts facts;
  check_gathers({}, "ring", facts);
  for (const int K : {1, 2, 3}) {
    const collectives::Hierarchy hierarchy(collectives::Communicator{}, K);
    collectives::RingOptions ring;
    ring.algorithm = collectives::Algorithm::kHierarchical;
    ring.hierarchy = &hierarchy;
    check_gathers(ring, fmt::format("hierarchical, hosts of {}", K), facts);
  }
  REQUIRE_ALL_RANKS(facts);
}
