// Small collectives (see small.hpp): an all-gather of a few bytes per rank, then every rank
// combines the N contributions in rank order.
#include "ringtrain/collectives/small.hpp"

#include <algorithm>
#include <climits>
#include <cstring>
#include <string>
#include <vector>

#include "ringtrain/collectives/schedule.hpp"

namespace ringtrain::collectives {

namespace {

// Distinct from the ring's default tag, so a small collective can run while an
// AsyncAllreduce is in flight on the same communicator.
constexpr int kSmallTag = 0x534d4c;

// all: (N, block_bytes); block r holds rank r's bytes on return. Rank `comm.rank()` fills
// its own block before the call. Every rank sends its block straight to every other rank and
// waits for all of them: one message latency instead of the ring's N-1 in a row, which
// matters when ranks share cores and every latency is a trip through the scheduler.
void all_gather_bytes(const Communicator& comm, std::span<std::byte> all, std::size_t block_bytes,
                      WaitPolicy wait) {
  const int N = comm.size(), r = comm.rank();
  if (N == 1) return;
  if (block_bytes > static_cast<std::size_t>(INT_MAX))
    throw CollectiveError("small collective: block of " + std::to_string(block_bytes) +
                          " bytes is too large");
  std::vector<MPI_Request> requests;
  requests.reserve(2 * static_cast<std::size_t>(N - 1));
  for (int k = 1; k < N; ++k) {  // receive from r-1, r-2, ... (the ring's order)
    const int from = (r - k + N) % N;
    requests.emplace_back();
    check_mpi(MPI_Irecv(all.data() + static_cast<std::size_t>(from) * block_bytes,
                        static_cast<int>(block_bytes), MPI_BYTE, from, kSmallTag, comm.handle(),
                        &requests.back()),
              "MPI_Irecv");
  }
  const std::byte* mine = all.data() + static_cast<std::size_t>(r) * block_bytes;
  for (int k = 1; k < N; ++k) {  // send to r+1, r+2, ...
    requests.emplace_back();
    check_mpi(MPI_Isend(mine, static_cast<int>(block_bytes), MPI_BYTE, (r + k) % N, kSmallTag,
                        comm.handle(), &requests.back()),
              "MPI_Isend");
  }
  Waiter waiter(resolve_wait_policy(wait, comm));
  for (;;) {
    int done = 0;
    check_mpi(
        MPI_Testall(static_cast<int>(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE),
        "MPI_Testall");
    if (done) return;
    waiter.idle();
  }
}

// Every rank's value of a u64, in rank order.
std::vector<std::uint64_t> all_gather_u64(const Communicator& comm, std::uint64_t value,
                                          WaitPolicy wait) {
  std::vector<std::uint64_t> all(static_cast<std::size_t>(comm.size()));
  all[static_cast<std::size_t>(comm.rank())] = value;
  all_gather_bytes(comm, std::as_writable_bytes(std::span(all)), sizeof(std::uint64_t), wait);
  return all;
}

}  // namespace

void check_same_size(const Communicator& comm, std::size_t elements, std::string_view operation,
                     WaitPolicy wait) {
  if (comm.size() == 1) return;
  const std::vector<std::uint64_t> sizes = all_gather_u64(comm, elements, wait);
  if (std::all_of(sizes.begin(), sizes.end(), [&](auto s) { return s == sizes[0]; })) return;
  // Every rank holds the same table, so every rank builds and throws the same message.
  std::string text = std::string(operation) + ": ranks passed buffers of different lengths (";
  const std::size_t shown = std::min<std::size_t>(sizes.size(), 8);
  for (std::size_t r = 0; r < shown; ++r)
    text += (r ? ", " : "") + ("rank " + std::to_string(r) + ": " + std::to_string(sizes[r]));
  if (shown < sizes.size()) text += ", ...";
  const auto [lo, hi] = std::minmax_element(sizes.begin(), sizes.end());
  text += " elements; smallest " + std::to_string(*lo) + ", largest " + std::to_string(*hi) +
          "). Every rank must pass the same number of elements; no data was exchanged.";
  throw CollectiveError(text);
}

namespace {

// values[i] <- combine over ranks r = 0..N-1 (in rank order) of values_r[i].
template <typename Combine>
void allreduce_doubles(const Communicator& comm, std::span<double> values, const char* operation,
                       WaitPolicy wait, Combine combine) {
  if (comm.size() == 1) return;
  check_same_size(comm, values.size(), operation, wait);
  if (values.empty()) return;
  const auto N = static_cast<std::size_t>(comm.size()), n = values.size();
  std::vector<double> all(N * n);  // (N, n): rank r's values in row r
  std::copy(values.begin(), values.end(),
            all.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(comm.rank()) * n));
  all_gather_bytes(comm, std::as_writable_bytes(std::span(all)), n * sizeof(double), wait);
  for (std::size_t i = 0; i < n; ++i) {
    double result = all[i];
    for (std::size_t r = 1; r < N; ++r) result = combine(result, all[r * n + i]);  // rank order
    values[i] = result;
  }
}

}  // namespace

void allreduce_sum(const Communicator& comm, std::span<double> values, WaitPolicy wait) {
  allreduce_doubles(comm, values, "allreduce_sum(double)", wait,
                    [](double a, double b) { return a + b; });
}

void allreduce_max(const Communicator& comm, std::span<double> values, WaitPolicy wait) {
  allreduce_doubles(comm, values, "allreduce_max(double)", wait,
                    [](double a, double b) { return std::max(a, b); });
}

void allreduce_min_max(const Communicator& comm, std::uint64_t value, std::uint64_t& min,
                       std::uint64_t& max, WaitPolicy wait) {
  const std::vector<std::uint64_t> all = all_gather_u64(comm, value, wait);
  const auto [lo, hi] = std::minmax_element(all.begin(), all.end());
  min = *lo;
  max = *hi;
}

void barrier(const Communicator& comm, WaitPolicy wait) {
  // An all-gather of one byte: after N-1 rounds every rank has (transitively) heard from all.
  if (comm.size() == 1) return;
  std::vector<std::byte> all(static_cast<std::size_t>(comm.size()));
  all_gather_bytes(comm, all, 1, wait);
}

namespace {

constexpr int kGatherTag = 0x475452;

}  // namespace

std::vector<std::string> gather_text(const Communicator& comm, const std::string& mine, int root,
                                     WaitPolicy wait) {
  if (root < 0 || root >= comm.size())
    throw CollectiveError("gather_text: root " + std::to_string(root) + " is not a rank of " +
                          std::to_string(comm.size()));
  // Lengths first (everyone learns them: a small all-gather), then rank by rank the bytes.
  const std::vector<std::uint64_t> lengths = all_gather_u64(comm, mine.size(), wait);
  for (std::uint64_t n : lengths)
    if (n > static_cast<std::uint64_t>(INT_MAX))
      throw CollectiveError("gather_text: " + std::to_string(n) + " bytes from one rank exceed " +
                            "MPI's int count");
  std::vector<std::string> all;
  MPI_Request request = MPI_REQUEST_NULL;
  if (comm.rank() != root) {
    check_mpi(MPI_Isend(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, root, kGatherTag,
                        comm.handle(), &request),
              "MPI_Isend");
    wait_request(comm, request, wait);
    return all;
  }
  all.resize(static_cast<std::size_t>(comm.size()));
  for (int r = 0; r < comm.size(); ++r) {
    std::string& text = all[static_cast<std::size_t>(r)];
    if (r == root) {
      text = mine;
      continue;
    }
    text.resize(lengths[static_cast<std::size_t>(r)]);
    check_mpi(MPI_Irecv(text.data(), static_cast<int>(text.size()), MPI_CHAR, r, kGatherTag,
                        comm.handle(), &request),
              "MPI_Irecv");
    wait_request(comm, request, wait);
  }
  return all;
}

}  // namespace ringtrain::collectives
