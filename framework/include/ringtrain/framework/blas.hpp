// The one door to OpenBLAS. Every matrix product of the framework goes through gemm().
//
// Row-major throughout. gemm computes  C = alpha * op(A) * op(B) + beta * C  with
//   op(A): (m, k), op(B): (k, n), C: (m, n)
// and leading dimensions equal to the row lengths of the matrices as stored.
#pragma once

#include <span>
#include <string>

namespace ringtrain::blas {

enum class Trans { kNo, kYes };

void gemm(Trans trans_a, Trans trans_b, int m, int n, int k, float alpha, const float* a,
          const float* b, float beta, float* c);

// Threads OpenBLAS may use in this process (DESIGN §4: cores per node / ranks per node).
void set_threads(int threads);
int threads();
// OpenBLAS's own description: version, core type, threading model.
std::string config();
// Cores this process may run on (sched_getaffinity), at least 1.
int available_cores();

}  // namespace ringtrain::blas
