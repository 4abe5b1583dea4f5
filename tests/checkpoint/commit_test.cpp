// The atomic commit protocol: the files and LATEST appear in the documented order,
// stray partials are ignored and pruned, retention keeps the newest K and LATEST's target,
// resume falls back past corrupt files, and a process SIGKILLed at every phase of a save
// leaves a directory that resumes from a whole checkpoint.
#include "ringtrain/checkpoint/commit.hpp"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "checkpoint_files.hpp"

using Catch::Matchers::Contains;
using namespace ringtrain::checkpoint;
using namespace ringtrain::checkpoint::test;

namespace {

Header header_at(std::uint64_t step) {
  Header header = sample_header();
  header.step = step;
  return header;
}

// The full protocol for one step.
fs::path save(const fs::path& dir, std::uint64_t step, const StateTree& tree, std::size_t keep) {
  const fs::path partial = write_partial(dir, step, header_at(step), tree);
  const fs::path final_path = commit(dir, partial);
  update_latest(dir, final_path.filename());
  prune(dir, keep);
  return final_path;
}

std::string file_text(const fs::path& file) {
  const Bytes bytes = read_bytes(file);
  return std::string(bytes.begin(), bytes.end());
}

std::vector<std::string> names(const std::vector<fs::path>& paths) {
  std::vector<std::string> out;
  for (const auto& p : paths) out.push_back(p.filename().string());
  return out;
}

// Removes the crash hook when a test ends, whatever happens.
struct HookGuard {
  ~HookGuard() { set_crash_hook({}); }
};

}  // namespace

TEST_CASE("checkpoint names", "[checkpoint][commit]") {
  CHECK(checkpoint_name(200) == "step-00000200.h5");
  CHECK(checkpoint_name(123456789) == "step-123456789.h5");
  CHECK(parse_checkpoint_name("step-00000200.h5") == 200u);
  CHECK(parse_checkpoint_name("step-123456789.h5") == 123456789u);
  for (const char* bad :
       {"step-200.h5", "step-00000200.h5.partial", "step-000000200.h5", "step-0000020a.h5",
        "LATEST", "xstep-00000200.h5", "step-99999999999999999999999.h5"})
    CHECK_FALSE(parse_checkpoint_name(bad).has_value());
}

TEST_CASE("the commit steps make the files and LATEST appear in order", "[checkpoint][commit]") {
  TempDir dir;
  const StateTree tree = sample_tree();
  const Expected expected = Expected::of(tree);

  const fs::path partial = write_partial(dir.path(), 100, header_at(100), tree);
  CHECK(partial == dir / "step-00000100.h5.partial");
  CHECK(fs::exists(partial));
  CHECK(list_checkpoints(dir.path()).empty());  // a partial is not a checkpoint
  std::vector<std::string> rejected;
  CHECK_FALSE(newest_valid(dir.path(), expected, &rejected).has_value());
  CHECK(rejected.empty());

  const fs::path final_path = commit(dir.path(), partial);
  CHECK(final_path == dir / "step-00000100.h5");
  CHECK_FALSE(fs::exists(partial));
  CHECK(names(list_checkpoints(dir.path())) == std::vector<std::string>{"step-00000100.h5"});
  CHECK_FALSE(read_latest(dir.path()).has_value());

  update_latest(dir.path(), final_path.filename());
  CHECK(file_text(dir / "LATEST") == "step-00000100.h5\n");
  CHECK_FALSE(fs::exists(dir / "LATEST.tmp"));
  CHECK(read_latest(dir.path()) == final_path);
  CHECK(newest_valid(dir.path(), expected) == final_path);

  const auto loaded = load_newest_valid(dir.path(), expected);
  REQUIRE(loaded.has_value());
  CHECK(loaded->header.step == 100);
  CHECK(loaded->tree.u64(Group::kSchedule, "step") == 200);
}

TEST_CASE("commit steps refuse inconsistent input", "[checkpoint][commit]") {
  TempDir dir;
  CHECK_THAT(rejection([&] { write_partial(dir.path(), 5, header_at(6), sample_tree()); }),
             Contains("header step 6 differs"));
  CHECK_THAT(rejection([&] { commit(dir.path(), dir / "step-00000005.h5"); }),
             Contains("not a partial checkpoint name"));
  CHECK_THAT(rejection([&] { commit(dir.path(), dir / "step-00000005.h5.partial"); }),
             Contains("rename"));
  CHECK_THAT(rejection([&] { update_latest(dir.path(), "notes.txt"); }),
             Contains("not a checkpoint name"));
  CHECK_THAT(rejection([&] { update_latest(dir.path(), "step-00000005.h5"); }),
             Contains("missing checkpoint"));
  CHECK_THAT(rejection([&] { prune(dir.path(), 0); }), Contains("keep must be at least 1"));
}

TEST_CASE("prune keeps the newest K and LATEST's target, removes strays only",
          "[checkpoint][commit]") {
  TempDir dir;
  const StateTree tree = sample_tree();
  for (std::uint64_t step : {100, 200, 300, 400, 500, 600})
    commit(dir.path(), write_partial(dir.path(), step, header_at(step), tree));
  update_latest(dir.path(), "step-00000200.h5");  // e.g. resumed from an older checkpoint
  write_bytes(dir / "step-00000700.h5.partial", Bytes{'x'});
  write_bytes(dir / "LATEST.tmp", Bytes{'y'});
  write_bytes(dir / "notes.txt", Bytes{'z'});
  write_bytes(dir / "step-1.h5", Bytes{'w'});

  const auto removed = prune(dir.path(), 2);
  CHECK(removed.size() == 5);
  CHECK(names(list_checkpoints(dir.path())) ==
        std::vector<std::string>{"step-00000600.h5", "step-00000500.h5", "step-00000200.h5"});
  CHECK_FALSE(fs::exists(dir / "step-00000700.h5.partial"));
  CHECK_FALSE(fs::exists(dir / "LATEST.tmp"));
  CHECK(fs::exists(dir / "notes.txt"));
  CHECK(fs::exists(dir / "step-1.h5"));
  CHECK(fs::exists(dir / "LATEST"));
}

TEST_CASE("retention counts only checkpoints that verify: garbage takes no place and stays",
          "[checkpoint][commit]") {
  TempDir dir;
  const StateTree tree = sample_tree();
  for (std::uint64_t step : {100, 200, 300}) save(dir.path(), step, tree, 3);
  // Three empty files and one torn copy named like newer checkpoints.
  for (const char* name : {"step-00001200.h5", "step-00001201.h5", "step-00001202.h5"})
    write_bytes(dir / name, Bytes{});
  Bytes torn = read_bytes(dir / "step-00000300.h5");
  torn.resize(torn.size() / 2);
  write_bytes(dir / "step-00001203.h5", torn);

  std::vector<std::string> unverified;
  CHECK(prune(dir.path(), 3, &unverified).empty());
  CHECK(unverified.size() == 4);
  CHECK_THAT(unverified.front(), Contains("step-00001203.h5: "));
  CHECK(fs::exists(dir / "step-00000100.h5"));
  // A real save: the oldest real checkpoint goes, the garbage stays where it is.
  save(dir.path(), 400, tree, 3);
  CHECK(names(list_checkpoints(dir.path())) ==
        std::vector<std::string>{"step-00001203.h5", "step-00001202.h5", "step-00001201.h5",
                                 "step-00001200.h5", "step-00000400.h5", "step-00000300.h5",
                                 "step-00000200.h5"});
  // keep 1 never removes the newest checkpoint that verifies.
  prune(dir.path(), 1);
  CHECK(fs::exists(dir / "step-00000400.h5"));
  CHECK_FALSE(fs::exists(dir / "step-00000300.h5"));
}

TEST_CASE("LATEST that is a FIFO or a directory: refused at once, nothing left behind",
          "[checkpoint][commit]") {
  TempDir dir;
  save(dir.path(), 100, sample_tree(), 3);
  fs::remove(dir / "LATEST");
  REQUIRE(::mkfifo((dir / "LATEST").c_str(), 0600) == 0);
  // A plain open() of a FIFO waits for a writer forever; the reader must not.
  CHECK_THAT(rejection([&] { read_latest(dir.path()); }), Contains("LATEST: is a FIFO"));
  CHECK_THAT(rejection([&] { update_latest(dir.path(), "step-00000100.h5"); }),
             Contains("LATEST: exists and is a FIFO, not a regular file: refused"));
  fs::remove(dir / "LATEST");
  fs::create_directory(dir / "LATEST");
  CHECK_THAT(rejection([&] { update_latest(dir.path(), "step-00000100.h5"); }),
             Contains("is a directory, not a regular file: refused"));
  CHECK_FALSE(fs::exists(dir / "LATEST.tmp"));
  // A FIFO by the name of the next partial, a directory by the next final name: refused.
  REQUIRE(::mkfifo((dir / "step-00000200.h5.partial").c_str(), 0600) == 0);
  CHECK_THAT(rejection([&] { write_partial(dir.path(), 200, header_at(200), sample_tree()); }),
             Contains("step-00000200.h5.partial: exists and is a FIFO"));
  fs::remove(dir / "step-00000200.h5.partial");
  fs::create_directory(dir / "step-00000200.h5");
  const fs::path partial = write_partial(dir.path(), 200, header_at(200), sample_tree());
  CHECK_THAT(rejection([&] { commit(dir.path(), partial); }),
             Contains("step-00000200.h5: exists and is a directory"));
}

TEST_CASE("list_checkpoints orders by step, newest first, ignoring other names",
          "[checkpoint][commit]") {
  TempDir dir;
  for (const char* name : {"step-00000009.h5", "step-123456789.h5", "step-00000010.h5",
                           "step-00000011.h5.partial", "LATEST", "step-0000001.h5"})
    write_bytes(dir / name, Bytes{'x'});
  fs::create_directory(dir / "step-00000099.h5");  // a directory is not a checkpoint
  CHECK(names(list_checkpoints(dir.path())) ==
        std::vector<std::string>{"step-123456789.h5", "step-00000010.h5", "step-00000009.h5"});
  CHECK(list_checkpoints(dir / "missing").empty());
}

TEST_CASE("newest_valid falls back past corrupt, renamed and foreign files",
          "[checkpoint][commit]") {
  TempDir dir;
  const StateTree tree = sample_tree();
  const Expected expected = Expected::of(tree);
  for (std::uint64_t step : {100, 200, 300}) save(dir.path(), step, tree, 10);
  REQUIRE(read_latest(dir.path()) == dir / "step-00000300.h5");

  // Corrupt the data of the newest one: LATEST's target fails, the previous one is used.
  flip_byte(dir / "step-00000300.h5",
            data_offset(dir / "step-00000300.h5", "/model/layers.0.linear|weight") + 5);
  std::vector<std::string> rejected;
  CHECK(newest_valid(dir.path(), expected, &rejected) == dir / "step-00000200.h5");
  REQUIRE(rejected.size() == 1);
  CHECK_THAT(rejected[0], Contains("step-00000300.h5: content digest") &&
                              Contains("the bytes after the seal were changed"));

  // A garbage LATEST is reported and the directory listing takes over.
  write_bytes(dir / "LATEST", Bytes{'?', '\n'});
  rejected.clear();
  CHECK(newest_valid(dir.path(), expected, &rejected) == dir / "step-00000200.h5");
  REQUIRE(rejected.size() == 2);
  CHECK_THAT(rejected[0], Contains("LATEST: does not hold a checkpoint name"));

  // A file renamed to a newer step is refused: its header says otherwise.
  fs::copy_file(dir / "step-00000200.h5", dir / "step-00000400.h5");
  rejected.clear();
  CHECK(newest_valid(dir.path(), expected, &rejected) == dir / "step-00000200.h5");
  REQUIRE(rejected.size() == 3);  // LATEST, 400, 300
  CHECK_THAT(rejected[1], Contains("step-00000400.h5: header step 200 does not match"));

  // Another model's expectation: nothing verifies, every file is reported.
  StateTree other;
  other.put_array(Group::kModel, "fc/weight", {2, 2}, pattern(4, 0.0f));
  rejected.clear();
  CHECK_FALSE(newest_valid(dir.path(), Expected::of(other), &rejected).has_value());
  CHECK(rejected.size() == 5);
}

TEST_CASE("newest_valid takes a newer whole checkpoint that LATEST does not name yet",
          "[checkpoint][commit]") {
  // A crash after commit() and before update_latest(): step 200 is renamed (and fsynced), but
  // LATEST still names step 100. The newest checkpoint that verifies is 200.
  TempDir dir;
  const StateTree tree = sample_tree();
  const Expected expected = Expected::of(tree);
  save(dir.path(), 100, tree, 10);
  commit(dir.path(), write_partial(dir.path(), 200, header_at(200), tree));
  write_partial(dir.path(), 300, header_at(300), tree);  // a save that never committed
  REQUIRE(read_latest(dir.path()) == dir / "step-00000100.h5");
  std::vector<std::string> rejected;
  const auto loaded = load_newest_valid(dir.path(), expected, &rejected);
  REQUIRE(loaded.has_value());
  CHECK(loaded->path == dir / "step-00000200.h5");
  CHECK(loaded->header.step == 200);
  CHECK(rejected.empty());

  // The same file torn (cut in half): it is reported by name and reason, LATEST's is used.
  const Bytes whole = read_bytes(dir / "step-00000200.h5");
  write_bytes(dir / "step-00000200.h5", Bytes(whole.begin(), whole.begin() + whole.size() / 2));
  rejected.clear();
  CHECK(newest_valid(dir.path(), expected, &rejected) == dir / "step-00000100.h5");
  REQUIRE(rejected.size() == 1);
  CHECK_THAT(rejected[0], Contains("step-00000200.h5: ") && Contains("truncated"));

  // LATEST naming a file that is gone is reported; the newest valid file is still found.
  fs::remove(dir / "step-00000200.h5");
  fs::remove(dir / "step-00000100.h5");
  commit(dir.path(), write_partial(dir.path(), 50, header_at(50), tree));
  rejected.clear();
  CHECK(newest_valid(dir.path(), expected, &rejected) == dir / "step-00000050.h5");
  REQUIRE(rejected.size() == 1);
  CHECK_THAT(rejected[0], Contains("LATEST: names step-00000100.h5, which does not exist"));
}

TEST_CASE("the crash hook sees every phase in order", "[checkpoint][commit]") {
  TempDir dir;
  HookGuard guard;
  std::vector<int> phases;
  set_crash_hook([&](int phase) { phases.push_back(phase); });
  save(dir.path(), 100, sample_tree(), 1);
  save(dir.path(), 200, sample_tree(), 1);  // prunes step 100
  CHECK(phases == std::vector<int>{1, 2, 3, 4, 1, 2, 3, 4, 5});
}

TEST_CASE("SIGKILL at any phase of a save leaves a resumable directory",
          "[checkpoint][commit][crash]") {
  const StateTree tree = sample_tree();
  const Expected expected = Expected::of(tree);
  // phase -> the checkpoint a resume must pick (0: no crash)
  const std::vector<std::pair<int, std::uint64_t>> table = {
      {kAfterPartialWritten, 100}, {kAfterRename, 200}, {kAfterDirectorySync, 200},
      {kAfterLatest, 200},         {kDuringPrune, 200}, {0, 200}};
  for (const auto& [phase, resume_step] : table) {
    DYNAMIC_SECTION("killed at phase " << phase) {
      TempDir dir;
      save(dir.path(), 100, tree, 1);
      const pid_t child = fork();
      REQUIRE(child >= 0);
      if (child == 0) {
        const int kill_at = phase;
        set_crash_hook([kill_at](int reached) {
          if (reached == kill_at) raise(SIGKILL);
        });
        try {
          save(dir.path(), 200, tree, 1);
        } catch (...) {
          _exit(3);
        }
        _exit(0);
      }
      int status = 0;
      REQUIRE(waitpid(child, &status, 0) == child);
      if (phase == 0) {
        REQUIRE(WIFEXITED(status));
        CHECK(WEXITSTATUS(status) == 0);
      } else {
        REQUIRE(WIFSIGNALED(status));
        CHECK(WTERMSIG(status) == SIGKILL);
      }
      std::vector<std::string> rejected;
      const auto chosen = newest_valid(dir.path(), expected, &rejected);
      REQUIRE(chosen.has_value());
      CHECK(chosen->filename() == checkpoint_name(resume_step));
      CHECK(rejected.empty());
      // The next save cleans up whatever the crash left behind.
      save(dir.path(), 300, tree, 1);
      CHECK(names(list_checkpoints(dir.path())) == std::vector<std::string>{"step-00000300.h5"});
      for (const auto& entry : fs::directory_iterator(dir.path()))
        CHECK(
            (entry.path().filename() == "LATEST" || entry.path().filename() == "step-00000300.h5"));
    }
  }
}
