// The ring's pure schedule (see schedule.hpp): chunk partition, per-step chunks, segments and
// the traffic that follows from them.
#include "ringtrain/collectives/schedule.hpp"

#include <algorithm>

namespace ringtrain::collectives {

// M = q*N + s: the first s chunks have q+1 elements, the others q.
//   chunk_begin(i) = i*q + min(i, s)
std::size_t chunk_size(std::size_t M, std::size_t N, std::size_t i) {
  return M / N + (i < M % N ? 1 : 0);
}

std::size_t chunk_begin(std::size_t M, std::size_t N, std::size_t i) {
  return i * (M / N) + std::min(i, M % N);
}

int ring_right(int rank, int N) { return (rank + 1) % N; }
int ring_left(int rank, int N) { return (rank + N - 1) % N; }

int first_step(Collective which, int N) {
  return which == Collective::kAllGather ? N - 1 : 0;
}

int num_steps(Collective which, int N) {
  return which == Collective::kAllreduce ? 2 * (N - 1) : N - 1;
}

bool step_reduces(int step, int N) { return step < N - 1; }

// (rank - step - k) mod N without going negative: step < 2N, so adding 2N suffices.
static std::size_t ring_mod(int rank, int step, int k, int N) {
  return static_cast<std::size_t>((rank - step - k + 3 * N) % N);
}

std::size_t send_chunk(int rank, int step, int N) { return ring_mod(rank, step, 1, N); }
std::size_t recv_chunk(int rank, int step, int N) { return ring_mod(rank, step, 2, N); }

std::size_t segment_elements(std::size_t segment_bytes) {
  return std::max<std::size_t>(1, segment_bytes / sizeof(float));
}

std::size_t num_segments(std::size_t elements, std::size_t segment_elements) {
  return (elements + segment_elements - 1) / segment_elements;
}

Counters expected_counters(Collective which, std::size_t M, int N, int rank) {
  Counters c;
  if (N <= 1 || M == 0) return c;
  const auto n = static_cast<std::size_t>(N);
  const int first = first_step(which, N);
  for (int step = first; step < first + num_steps(which, N); ++step) {
    ++c.rounds;
    c.bytes_sent += chunk_size(M, n, send_chunk(rank, step, N)) * sizeof(float);
    c.bytes_received += chunk_size(M, n, recv_chunk(rank, step, N)) * sizeof(float);
  }
  return c;
}

}  // namespace ringtrain::collectives
