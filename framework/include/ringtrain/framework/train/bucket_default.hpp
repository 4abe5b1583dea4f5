// The bucket cap of `ringtrain train` when --bucket-bytes is not given: the rule of
// collectives/buckets.hpp (default_bucket_cap) applied to an α-β fit of the ring.
//
// Which fit: --cost-model FILE (the JSON of `ringtrain bench allreduce --json`, measured on
// the machine that trains) if given, else the fit measured on the project's 2-core machine
// (bench/README-allreduce.md): N=2 with a core per rank, and N=4 on 2 cores for
// runs with more ranks than cores. The choice depends only on the file, N and whether ranks
// outnumber cores, never on a measurement made at start-up: the bucket plan fixes the
// summation order (for N >= 3), so a run must pick the same plan every time to stay bitwise
// reproducible.
#pragma once

#include <cstddef>
#include <string>

#include "ringtrain/collectives/buckets.hpp"
#include "ringtrain/collectives/cost_model.hpp"

namespace ringtrain {

struct RingFit {
  collectives::AlphaBeta model;
  std::string source;  // where the numbers come from, for the banner and the manifest
};

// The fit for bucket-sized messages (the regime that holds 1 MiB when the fit has several).
// Throws UsageError naming the file if it cannot be read or holds no fit.
RingFit ring_fit_for_buckets(const std::string& cost_model_file, int N, bool oversubscribed);

// The default cap and a one-line reason naming the fit. Without overlap (overlap = false)
// buckets buy nothing: no backward is left to hide a ring behind, and every bucket adds a
// ring's startups and its own optimizer pass. Then the default is one bucket of total_bytes
// (measured: bench/README-overlap.md, "Buckets when nothing overlaps").
collectives::BucketChoice default_bucket_choice(const RingFit& fit, int N, std::size_t total_bytes,
                                                bool overlap = true);

}  // namespace ringtrain
