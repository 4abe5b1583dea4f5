// Gradient buckets: which spans of the flat gradient buffer are reduced together, and in what
// order. Pure: no MPI.
//
// Where it sits: the model keeps its parameters in one flat buffer in forward order (layer 0
// first), but backward writes their gradients last layer first. A bucket is a contiguous span
// of that buffer; its ring can start as soon as its last gradient is written, while backward
// still computes earlier layers. The plan walks the parameters from the end of
// the buffer to its start and packs consecutive ones into buckets of at most `cap_bytes`.
// A parameter is never split: one larger than the cap gets a bucket of its own (splitting
// would not make any part ready earlier: a layer writes a parameter's gradient in one go).
//
// Worked example, parameters in buffer order with their sizes in floats and a cap of 100
// floats (400 bytes):
//
//   parameter   p0   p1   p2    p3   p4
//   elements    30   50   250   40   70        offsets 0, 30, 80, 330, 370; total 440
//   backward order: p4 p3 p2 p1 p0
//   bucket 0  = p4       [370, 440)  70 floats   (p4 + p3 = 110 > 100: close it)
//   bucket 1  = p3       [330, 370)  40 floats   (p3 + p2 > 100)
//   bucket 2  = p2       [ 80, 330) 250 floats   (alone: larger than the cap)
//   bucket 3  = p1 p0    [  0,  80)  80 floats
//
// Vocabulary: a bucket's `first_parameter` is the one nearest the start of the buffer, i.e.
// the one backward writes last: once it is written, the bucket is complete.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "ringtrain/collectives/cost_model.hpp"

namespace ringtrain::collectives {

struct Bucket {
  std::size_t offset = 0;           // first element, into the flat buffer
  std::size_t elements = 0;         // length in floats
  std::size_t first_parameter = 0;  // parameters [first_parameter, first_parameter + parameters)
  std::size_t parameters = 0;       // in buffer order; >= 1
};

// `parameter_elements[i]`: floats of parameter i, in buffer order (parameter i starts where
// i-1 ends). Returns the buckets in backward order (bucket 0 ends at the end of the buffer);
// together they cover every element exactly once. Parameters of zero elements join the
// bucket that is open when they come. Throws std::invalid_argument if cap_bytes < 4.
std::vector<Bucket> plan_buckets(std::span<const std::size_t> parameter_elements,
                                 std::size_t cap_bytes);

// The default cap from the α-β model of the ring:
//   t(M) = 2(N-1) α + 2(N-1)/N · M / B
// The fixed part 2(N-1)α is paid once per bucket. The cap is the smallest power of two for
// which that fixed part is at most `max_fixed_share` of a bucket's time,
//   2(N-1)α <= s · t(M)   <=>   M >= (1 - s)/s · α · N · B
// (s = 0.1: M >= 9 α N B); smaller buckets start earlier but pay more latency, larger ones
// hide less of the ring behind backward. With N = 1 nothing is reduced: the whole buffer is
// one bucket. The reason says which numbers gave which size, for the start-up banner.
struct BucketChoice {
  std::size_t cap_bytes = 0;
  std::string reason;
};
BucketChoice default_bucket_cap(const AlphaBeta& model, int N, std::size_t total_bytes,
                                double max_fixed_share = 0.1);

}  // namespace ringtrain::collectives
