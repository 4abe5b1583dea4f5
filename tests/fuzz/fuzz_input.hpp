// The fuzz input as a file: the readers under test take paths (they are file readers), so
// each input is written to a per-process file in /dev/shm (memory, no disk wear) first.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

namespace ringtrain::fuzz {

inline std::filesystem::path write_input(const char* name, const std::uint8_t* data,
                                         std::size_t size) {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d = std::filesystem::exists("/dev/shm")
                                  ? std::filesystem::path("/dev/shm")
                                  : std::filesystem::temp_directory_path();
    return d / ("ringtrain-fuzz-" + std::to_string(::getpid()));
  }();
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / name;
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return file;
}

}  // namespace ringtrain::fuzz
