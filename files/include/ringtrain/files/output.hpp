// Outputs written so that they never replace what they should not (`eval --predictions`,
// checkpoint files, LATEST, the run directory's manifest.json, config.toml and metrics.jsonl).
//
//   1. check_output: the destination, if it exists, must be a regular file (a device such as
//      /dev/null or /dev/full, a FIFO, a socket or a directory is refused: renaming a file
//      over /dev/null would replace the device for the whole machine), and it must not be
//      one of the command's inputs (same device and inode, so another path to the same file,
//      a hard link or a symbolic link to it, is caught too).
//   2. the temporary `<destination>.tmp` is created beside it (same file system: the rename
//      is atomic) with O_CREAT | O_EXCL | O_NOFOLLOW, so it is a new file of ours, never a
//      link planted there; a regular file left by a crash is removed first, anything else
//      by that name is refused.
//   3. write, fsync, close (each result checked: ENOSPC and EFBIG are reported with the
//      path), rename over the destination. Any failure removes the temporary: nothing
//      half-written stays behind.
#pragma once

#include <filesystem>
#include <span>
#include <string>
#include <string_view>

namespace ringtrain::files {

// Step 1. Throws FileError naming the destination: "exists and is a FIFO, not a regular file:
// refused", "is the same file as the input <path>: refused".
void check_output(const std::filesystem::path& destination,
                  std::span<const std::filesystem::path> inputs = {});

// A file created new for writing (step 2), closed by close() or the destructor, which also
// removes it unless keep() was called. Move-only.
class NewFile {
 public:
  // Creates `path` with O_CREAT | O_EXCL | O_NOFOLLOW (mode 0644 before the umask). A regular
  // file already there is removed first; anything else there is refused. Throws FileError.
  explicit NewFile(const std::filesystem::path& path);
  ~NewFile();
  NewFile(NewFile&& other) noexcept;
  NewFile& operator=(NewFile&&) = delete;
  NewFile(const NewFile&) = delete;
  NewFile& operator=(const NewFile&) = delete;

  // Writes all of `bytes` at the current end. Throws FileError with the errno's name.
  void write(std::string_view bytes);
  void sync();   // fsync
  void close();  // checked close (deferred write errors); the file stays until ~NewFile
  void keep();   // the destructor leaves the file in place (it was renamed, or is wanted)
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  bool keep_ = false;
};

struct WriteOptions {
  std::span<const std::filesystem::path> inputs;  // paths the output must not be (step 1)
  bool sync = true;  // fsync the file before the rename and the directory after it
};

// Steps 1-3: `bytes` become the content of `destination` atomically (a reader sees the old
// or the new file, never a torn one). Throws FileError naming the path and the reason.
void write_file_atomically(const std::filesystem::path& destination, std::string_view bytes,
                           const WriteOptions& options = {});

// rename(from, to) after check_output(to); then fsync of the directory if `sync`. Throws
// FileError.
void rename_into_place(const std::filesystem::path& from, const std::filesystem::path& to,
                       bool sync = true);

// open(O_RDONLY | O_DIRECTORY) + fsync: creations and renames inside `dir` are durable.
void sync_directory(const std::filesystem::path& dir);

}  // namespace ringtrain::files
