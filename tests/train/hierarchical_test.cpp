// --collective hierarchical through the real Trainer: the same training as the flat ring and
// as one process to rounding (they sum in different orders), for hosts of 1 and 2 ranks (uneven at N = 3)
// and MPI's own grouping; every rank ends with the same bits; buckets with overlap on and off
// give the same bits; SyncBatchNorm runs with it; metrics.jsonl's wire_bytes and
// inter_host_bytes; --ranks-per-host without it is refused (ZeRO-1 with it: zero_test.cpp).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "mpi_test.hpp"
#include "ringtrain/framework/error.hpp"
#include "train_rig.hpp"

using namespace ringtrain;
using namespace ringtrain::testing;

namespace {

// A small mlp in several 4 KiB buckets.
TrainConfig mlp_config() {
  TrainConfig c = small_config("mlp", 6, 24);
  c.mlp_hidden = "32,32";
  c.bucket_bytes = 4096;
  c.trace_steps = 0;
  return c;
}

TrainConfig hierarchical(TrainConfig c, int ranks_per_host) {
  c.collective = CollectiveKind::kHierarchical;
  c.ranks_per_host = ranks_per_host;
  return c;
}

nlohmann::json read_json(const std::filesystem::path& file) {
  std::ifstream in(file);
  return nlohmann::json::parse(in);
}

// Every rank holds rank 0's bits.
bool same_on_all_ranks(std::vector<float> values) {
  std::vector<float> root = values;
  MPI_Bcast(root.data(), static_cast<int>(root.size()), MPI_FLOAT, 0, MPI_COMM_WORLD);
  return all_ranks(bitwise_equal(values, root));
}

}  // namespace

TEST_CASE("mlp: hierarchical equals the flat ring within 1e-5, the same bits on every rank") {
  const TrainConfig ring = mlp_config();
  const RunOutput flat = train_on(ring, MPI_COMM_WORLD);
  for (int K : {1, 2, 0}) {
    INFO(fmt::format("N = {}, --ranks-per-host {}", world_size(), K));
    int hosts = 0;  // as the manifest states them (rank 0 reads it)
    const RunOutput two_level =
        train_on(hierarchical(ring, K), MPI_COMM_WORLD, [&](const std::filesystem::path& run) {
          if (world_rank() == 0) hosts = read_json(run / "manifest.json").value("hosts", -1);
        });
    MPI_Bcast(&hosts, 1, MPI_INT, 0, MPI_COMM_WORLD);
    CHECK(hosts == (K == 0 ? 1 : (world_size() + K - 1) / K));
    CHECK(all_ranks(relative_difference(two_level.parameters, flat.parameters) < 1e-5));
    CHECK(same_on_all_ranks(two_level.parameters));
    CHECK(all_ranks(two_level.results.steps == flat.results.steps));
  }
}

TEST_CASE("mlp: hierarchical at N ranks equals one process on the same global batches") {
  // As equivalence_test.cpp: a small lr keeps float's other summation orders within 1e-5.
  TrainConfig config = small_config("mlp", 20, 24);
  config.lr = 0.002f;
  const RunOutput reference = train_on(config, MPI_COMM_SELF);
  TrainConfig one_step = config;
  one_step.steps = 1;  // steps 2..20 move the parameters far beyond the tolerance
  REQUIRE(all_ranks(relative_difference(reference.parameters,
                                        train_on(one_step, MPI_COMM_SELF).parameters) > 1e-3));
  config = hierarchical(config, 2);
  for (const std::string split : {"", world_size() == 2 ? "0,24" : "10,0,14"}) {
    config.local_batches = split;
    const RunOutput two_level = train_on(config, MPI_COMM_WORLD);
    INFO(fmt::format("N = {}, local batches '{}'", world_size(), split));
    CHECK(all_ranks(relative_difference(two_level.parameters, reference.parameters) < 1e-5));
  }
}

namespace {

// metrics.jsonl's per-rank wire_bytes and inter_host_bytes of the run's one window (rank 0
// reads them; empty on the other ranks).
struct Wire {
  std::vector<double> wire, inter;
};

Wire wire_of(const TrainConfig& config) {
  Wire w;
  train_on(config, MPI_COMM_WORLD, [&](const std::filesystem::path& run) {
    if (world_rank() != 0) return;
    std::ifstream in(run / "metrics.jsonl");
    for (std::string line; std::getline(in, line);) {
      const auto j = nlohmann::json::parse(line);
      if (!j.contains("step_s")) continue;
      w.wire = j["per_rank"]["wire_bytes"].get<std::vector<double>>();
      w.inter = j["per_rank"]["inter_host_bytes"].get<std::vector<double>>();
    }
  });
  return w;
}

}  // namespace

TEST_CASE("metrics: wire_bytes and inter_host_bytes per step follow the host grouping") {
  const int N = world_size();
  TrainConfig ring = mlp_config();
  ring.log_every = ring.steps;  // one window
  const Wire flat = wire_of(ring);
  const Wire own_hosts = wire_of(hierarchical(ring, 1));  // every rank a host: one cross ring
  const Wire pairs = wire_of(hierarchical(ring, 2));
  Facts facts;
  if (world_rank() == 0) {
    const auto n = std::size_t(N);
    facts.check(flat.wire.size() == n && own_hosts.wire.size() == n && pairs.inter.size() == n,
                "a window with every rank's figures");
    for (std::size_t r = 0; r < flat.wire.size() && r < n; ++r) {
      const std::string rank = fmt::format("rank {}: ", r);
      facts.check(flat.wire[r] > 0 && flat.inter[r] == 0, rank + "flat ring: bytes, none between hosts");
      facts.check(own_hosts.wire[r] == flat.wire[r] && own_hosts.inter[r] == own_hosts.wire[r],
                  rank + "K=1: the flat ring's bytes, all between hosts");
      // K=2: at N=2 one host (nothing between hosts, the same ring); at N=3 hosts {0,1}, {2}:
      // rank 1 is an extra rank and sends nothing between hosts.
      const bool crosses = N == 3 && r != 1;
      facts.check((pairs.inter[r] > 0) == crosses && pairs.inter[r] < pairs.wire[r] + 1,
                  rank + fmt::format("K=2: {} of {} bytes between hosts", pairs.inter[r],
                                     pairs.wire[r]));
      if (N == 2) facts.check(pairs.wire[r] == flat.wire[r], rank + "K=2, N=2: the ring's bytes");
    }
  }
  REQUIRE_ALL_RANKS(facts);
}

TEST_CASE("hierarchical: overlap on and off with the same buckets give the same bits") {
  TrainConfig config = hierarchical(mlp_config(), 2);
  config.overlap = Overlap::kOff;
  const RunOutput off = train_on(config, MPI_COMM_WORLD);
  config.overlap = Overlap::kOn;
  for (const std::string progress : {"layers", "thread"}) {
    config.poll_driver = parse_choice<PollDriver>(progress, "--ring-driver");
    INFO("N = " << world_size() << ", ring driver " << progress);
    REQUIRE(all_ranks(bitwise_equal(train_on(config, MPI_COMM_WORLD).parameters,
                                    off.parameters)));
  }
}

TEST_CASE("cnn-bn with SyncBatchNorm: hierarchical equals the flat ring within 1e-5") {
  TrainConfig ring = small_config("cnn-bn", 2, 12);
  ring.lr = 0.01f;
  ring.trace_steps = 0;
  ring.sync_bn = SyncBn::kOn;
  const RunOutput flat = train_on(ring, MPI_COMM_WORLD);
  const RunOutput two_level = train_on(hierarchical(ring, 2), MPI_COMM_WORLD);
  INFO("N = " << world_size());
  CHECK(all_ranks(relative_difference(two_level.parameters, flat.parameters) < 1e-5));
  CHECK(all_ranks(relative_difference(two_level.buffers, flat.buffers) < 1e-5));
  CHECK(same_on_all_ranks(two_level.parameters));
}

TEST_CASE("hierarchical: --zero 1 is allowed (mpi's is not), a stray --ranks-per-host refused") {
  TrainConfig config = hierarchical(mlp_config(), 2);
  CHECK_NOTHROW(config.validate(world_size()));
  config.zero = ZeroChoice::kOn;
  CHECK_NOTHROW(config.validate(world_size()));
  config.collective = CollectiveKind::kMpi;
  config.ranks_per_host = 0;
  CHECK_THROWS_AS(config.validate(world_size()), UsageError);
  TrainConfig ring = mlp_config();
  ring.ranks_per_host = 2;
  CHECK_THROWS_AS(ring.validate(world_size()), UsageError);
  ring.ranks_per_host = -1;
  ring.collective = CollectiveKind::kHierarchical;
  CHECK_THROWS_AS(ring.validate(world_size()), UsageError);
}
