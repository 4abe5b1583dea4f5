// The keyed MAC (key.hpp, ): a reader given a key refuses, before HDF5 opens the
// file, every file that was not signed with that key -- no MAC, a MAC made with another key,
// a signed file edited and re-digested by someone without the key, a version-1 file -- and
// a key file that group or others may read is refused like ssh refuses such a private key.
#include "ringtrain/checkpoint/key.hpp"

#include <sys/stat.h>

#include <array>
#include <catch2/catch.hpp>
#include <string>

#include "checkpoint_files.hpp"
#include "ringtrain/checkpoint/commit.hpp"

using Catch::Matchers::Contains;
using namespace ringtrain::checkpoint;
using namespace ringtrain::checkpoint::test;

namespace {

MacKey key_of(unsigned char fill) {
  std::array<unsigned char, MacKey::kBytes> bytes{};
  for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<unsigned char>(fill + i);
  return MacKey::from_bytes(bytes);
}

fs::path key_file(const TempDir& dir, const std::string& content, mode_t mode) {
  const fs::path path = dir / "ck.key";
  write_bytes(path, Bytes(content.begin(), content.end()));
  REQUIRE(::chmod(path.c_str(), mode) == 0);
  return path;
}

}  // namespace

TEST_CASE("a signed file reads with its key and without one", "[checkpoint][key]") {
  TempDir dir;
  const fs::path file = dir / "step-00000200.h5";
  const StateTree tree = sample_tree();
  const MacKey key = key_of(1);
  write_file(file, sample_header(), tree, &key);
  const StateTree loaded = read_file(file, Expected::of(tree), nullptr, &key);
  CHECK(loaded.array(Group::kModel, "layers.0.linear/weight").values == pattern(12, 1.0f));
  const VerifyResult with_key = verify_file(file, &key);
  CHECK(with_key.mac_checked);
  const VerifyResult without = verify_file(file);
  CHECK(without.mac_present);
  CHECK_FALSE(without.mac_checked);
}

TEST_CASE("files not signed with the reader's key are refused before parsing",
          "[checkpoint][key][crafted]") {
  TempDir dir;
  const fs::path file = dir / "step-00000200.h5";
  const StateTree tree = sample_tree();
  const Expected expected = Expected::of(tree);
  const MacKey key = key_of(1), other = key_of(2);
  const auto refusal = [&] {
    const std::string read = rejection([&] { read_file(file, expected, nullptr, &key); });
    const std::string verify = rejection([&] { verify_file(file, &key); });
    CHECK_THAT(verify, Contains("step-00000200.h5") && Contains("not signed with this key"));
    return read;
  };
  SECTION("MAC absent (written without a key)") {
    write_file(file, sample_header(), tree);
    CHECK_THAT(refusal(), Contains("step-00000200.h5: not signed with this key (the file "
                                   "carries no MAC)"));
  }
  SECTION("MAC made with another key") {
    write_file(file, sample_header(), tree, &other);
    CHECK_THAT(refusal(), Contains("step-00000200.h5: not signed with this key (MAC mismatch)"));
  }
  SECTION("a signed file edited, its public digest recomputed") {
    write_file(file, sample_header(), tree, &key);
    flip_byte(file, data_offset(file, "/model/layers.0.linear|weight") + 2, 0x01);
    reseal_content(file);
    CHECK_THAT(refusal(), Contains("not signed with this key (MAC mismatch)"));
  }
  SECTION("the MAC flag cleared (downgrade to an unsigned seal)") {
    write_file(file, sample_header(), tree, &key);
    Bytes bytes = read_bytes(file);
    bytes[12] = 0;
    write_bytes(file, bytes);
    CHECK_THAT(refusal(), Contains("not signed with this key"));
  }
  SECTION("a version-1 file") {
    Header v1 = sample_header();
    v1.version = 1;
    write_file(file, v1, tree);
    CHECK_THAT(refusal(), Contains("not signed with this key (format version 1, no seal)"));
  }
}

TEST_CASE("newest_valid with a key skips unsigned checkpoints", "[checkpoint][key][commit]") {
  TempDir dir;
  const StateTree tree = sample_tree();
  const MacKey key = key_of(7);
  Header header = sample_header();
  header.step = 100;
  commit(dir.path(), write_partial(dir.path(), 100, header, tree, &key));
  header.step = 200;
  commit(dir.path(), write_partial(dir.path(), 200, header, tree));  // not signed
  std::vector<std::string> rejected;
  CHECK(newest_valid(dir.path(), Expected::of(tree), &rejected, &key) == dir / "step-00000100.h5");
  REQUIRE(rejected.size() == 1);
  CHECK_THAT(rejected[0], Contains("step-00000200.h5: not signed with this key"));
}

TEST_CASE("key files: 32 raw bytes or 64 hex digits, private to the owner", "[checkpoint][key]") {
  TempDir dir;
  const std::string raw(32, '\x5a');
  const std::string hex = std::string(64, 'a') + "\n";
  const MacKey from_raw = MacKey::load(key_file(dir, raw, 0600));
  CHECK(from_raw.bytes()[0] == 0x5a);
  const MacKey from_hex = MacKey::load(key_file(dir, hex, 0400));
  CHECK(from_hex.bytes()[31] == 0xaa);

  CHECK_THAT(rejection([&] { MacKey::load(key_file(dir, raw, 0644)); }),
             Contains("ck.key") && Contains("mode 0644: group or others may read it"));
  CHECK_THAT(rejection([&] { MacKey::load(key_file(dir, raw, 0640)); }),
             Contains("group or others may read it"));
  CHECK_THAT(rejection([&] { MacKey::load(key_file(dir, "short", 0600)); }),
             Contains("32 raw bytes or 64 hex digits"));
  CHECK_THAT(rejection([&] { MacKey::load(dir / "missing.key"); }),
             Contains("missing.key") && Contains("cannot read the checkpoint key file"));
}
