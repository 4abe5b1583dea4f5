// The C++ ring's output for the inputs the Python tests use (test_collectives.py), written
// to files the tests compare with bitwise:
//   mpiexec.mpich -n N ring_reference DIR
// For each M of the tests' sizes and each collective (allreduce, reduce_scatter,
// all_gather), rank r writes DIR/N<N>-<collective>-M<M>-r<r>.bin: its M floats after the
// call on input test_input(M, r). The input is a pure function of (M, r, i) whose floats are
// exact (24-bit mantissas at scales 2^0..2^7), so C++ and NumPy build the same bits.
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ringtrain/collectives/ring.hpp"

namespace {

namespace coll = ringtrain::collectives;

// Element i of rank r's input (ringcheck.py rank_input builds the same).
float test_input(std::uint64_t r, std::uint64_t i) {
  std::uint64_t h = i * 0x9E3779B97F4A7C15ull + (r + 1) * 0xBF58476D1CE4E5B9ull;
  h ^= h >> 31;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 29;
  const float unit = static_cast<float>(h >> 40) * (1.0f / 8388608.0f) - 1.0f;  // [-1, 1)
  return unit * static_cast<float>(1u << ((h >> 32) & 7u));
}

void write(const std::string& path, const std::vector<float>& data) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(data.data()),
            static_cast<std::streamsize>(data.size() * sizeof(float)));
  if (!out) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  coll::Environment mpi(&argc, &argv);
  if (argc != 2) {
    std::fprintf(stderr, "usage: ring_reference DIR\n");
    return 2;
  }
  const coll::Communicator comm;
  std::filesystem::create_directories(argv[1]);
  const auto N = static_cast<std::size_t>(comm.size());
  const auto r = static_cast<std::uint64_t>(comm.rank());
  const std::size_t sizes[] = {0, 1, N - 1, N, N + 1, 1000, 65537};
  const std::pair<const char*, coll::Collective> calls[] = {
      {"allreduce", coll::Collective::kAllreduce},
      {"reduce_scatter", coll::Collective::kReduceScatter},
      {"all_gather", coll::Collective::kAllGather}};
  for (const std::size_t M : sizes)
    for (const auto& [name, which] : calls) {
      std::vector<float> data(M);
      for (std::size_t i = 0; i < M; ++i) data[i] = test_input(r, i);
      coll::RingTransfer transfer;
      coll::run_collective(transfer, comm, data, which);
      write(std::string(argv[1]) + "/N" + std::to_string(N) + "-" + name + "-M" +
                std::to_string(M) + "-r" + std::to_string(r) + ".bin",
            data);
    }
  return 0;
}
