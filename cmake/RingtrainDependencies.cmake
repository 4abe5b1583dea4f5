# Every dependency is a Debian bookworm package found through CMake's own modules.
# This file is also installed and included by ringtrainConfig.cmake, so a program built
# against the installed package finds the same libraries (with find_dependency semantics
# provided by the caller).

# MPICH, even when Open MPI's alternatives own mpicc/mpiexec (installing python3-torch
# pulls Open MPI in). Pointing FindMPI at MPICH's own wrapper and launcher before
# find_package selects libmpich and hydra.
find_program(RINGTRAIN_MPICH_CXX NAMES mpicxx.mpich)
find_program(RINGTRAIN_MPICH_EXEC NAMES mpiexec.mpich)
if(NOT RINGTRAIN_MPICH_CXX OR NOT RINGTRAIN_MPICH_EXEC)
  message(FATAL_ERROR "MPICH not found (mpicxx.mpich / mpiexec.mpich). "
    "Install it with: apt-get install mpich libmpich-dev")
endif()
set(MPI_CXX_COMPILER "${RINGTRAIN_MPICH_CXX}" CACHE FILEPATH "MPICH C++ wrapper" FORCE)
set(MPIEXEC_EXECUTABLE "${RINGTRAIN_MPICH_EXEC}" CACHE FILEPATH "MPICH launcher" FORCE)
find_package(MPI REQUIRED COMPONENTS CXX)

set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_path(RINGTRAIN_CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas REQUIRED)

find_package(HDF5 REQUIRED COMPONENTS C)
find_package(ZLIB REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET GLOBAL libxxhash)
# libsodium: the keyed BLAKE2b MAC of checkpoints (crypto_generichash).
pkg_check_modules(SODIUM REQUIRED IMPORTED_TARGET GLOBAL libsodium)
find_package(nlohmann_json REQUIRED)
find_package(fmt REQUIRED)
# toml++: reads `ringtrain train --config FILE` (Debian ships the compiled library).
find_package(tomlplusplus REQUIRED)
