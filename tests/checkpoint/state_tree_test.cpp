// StateTree and Expected: names, kinds, shapes and duplicates are checked when an entry is
// put, and getters refuse a missing entry or another kind or shape.
#include "ringtrain/checkpoint/state_tree.hpp"

#include <catch2/catch.hpp>

#include "checkpoint_files.hpp"

using Catch::Matchers::Contains;
using namespace ringtrain::checkpoint;
using namespace ringtrain::checkpoint::test;

TEST_CASE("state tree keeps entries in order and returns every kind", "[checkpoint][tree]") {
  const StateTree tree = sample_tree();
  REQUIRE(tree.size() == 15);
  CHECK(tree.entries().front().name == "layers.0.linear/weight");
  CHECK(tree.entries().back().name == "global_step");
  const auto weight = tree.array(Group::kModel, "layers.0.linear/weight", {3, 4});
  CHECK(std::vector<float>(weight.begin(), weight.end()) == pattern(12, 1.0f));
  CHECK(tree.array(Group::kModel, "layers.5.scale").shape.empty());
  CHECK(tree.array(Group::kModel, "layers.6.empty").values.empty());
  CHECK(tree.u64(Group::kSchedule, "step") == 200);
  CHECK(tree.i64(Group::kData, "position") == -7);
  CHECK(tree.f64(Group::kProgress, "loss_sum") == 0.1 + 0.2);
  CHECK(tree.string(Group::kRng, "state") == "philox:0123456789abcdef");
  CHECK(tree.string(Group::kRng, "empty").empty());
  // 12+3+6+16+1+0+12 floats, 7 scalars, 23 + 0 string bytes
  CHECK(tree.payload_bytes() == 50 * 4 + 6 * 8 + 23);
}

TEST_CASE("getters name the entry and the problem", "[checkpoint][tree]") {
  const StateTree tree = sample_tree();
  CHECK_THAT(rejection([&] { tree.u64(Group::kModel, "nope"); }), Contains("/model/nope: missing"));
  CHECK_THAT(rejection([&] { tree.i64(Group::kSchedule, "step"); }),
             Contains("/schedule/step: is a uint64, expected a int64"));
  CHECK_THAT(rejection([&] {
               tree.array(Group::kModel, "layers.0.linear/weight", {4, 3});
             }),
             Contains("shape (3, 4), expected (4, 3)"));
  CHECK_THAT(rejection([&] { tree.string(Group::kModel, "layers.0.linear/bias"); }),
             Contains("is a float32 array"));
}

TEST_CASE("invalid names, shapes and values are refused when put", "[checkpoint][tree]") {
  StateTree tree;
  const std::vector<float> one{1.0f};
  for (const char* name : {"", "/a", "a/", "a//b", "a/./b", "..", "a|b", "a b", "é", "a\\b"}) {
    INFO(name);
    CHECK_THAT(rejection([&] { tree.put_array(Group::kModel, name, {1}, one); }),
               Contains("invalid entry name"));
  }
  CHECK_THAT(rejection([&] { tree.put_u64(Group::kModel, std::string(1025, 'a'), 1); }),
             Contains("longer than"));
  CHECK_THAT(rejection([&] {
               tree.put_array(Group::kModel, "w", {2, 2}, one);
             }),
             Contains("holds 4 elements but 1 values"));
  CHECK_THAT(rejection([&] {
               tree.put_array(Group::kModel, "w", {1, 1, 1, 1, 1}, one);
             }),
             Contains("rank 5 exceeds"));
  CHECK_THAT(
      rejection([&] {
        tree.put_array(Group::kModel, "w", {std::size_t{1} << 40, std::size_t{1} << 40}, one);
      }),
      Contains("overflows"));
  CHECK_THAT(rejection([&] { tree.put_string(Group::kRng, "s", std::string("a\0b", 3)); }),
             Contains("NUL"));
  tree.put_u64(Group::kData, "seed", 1);
  tree.put_u64(Group::kRng, "seed", 1);  // the same name in another group is fine
  CHECK_THAT(rejection([&] { tree.put_i64(Group::kData, "seed", 1); }), Contains("put twice"));
  CHECK_THAT(rejection([&] { tree.put_u64(static_cast<Group>(9), "x", 1); }),
             Contains("invalid group"));
  tree.put_u64(Group::kModel, "a-b_c.d+e:f/0", 1);  // every allowed character
}

TEST_CASE("Expected::of lists every entry with kind and shape", "[checkpoint][tree]") {
  const Expected expected = Expected::of(sample_tree());
  REQUIRE(expected.entries().size() == 15);
  const ExpectedEntry* weight = expected.find(Group::kModel, "layers.4.conv/weight");
  REQUIRE(weight != nullptr);
  CHECK(weight->kind == Kind::kFloat32Array);
  CHECK(weight->shape == Dims{2, 2, 2, 2});
  CHECK(expected.find(Group::kRng, "state")->kind == Kind::kString);
  CHECK(expected.find(Group::kRng, "nope") == nullptr);
  Expected manual;
  CHECK_THAT(rejection([&] { manual.add(Group::kModel, "w", Kind::kFloat32Array); }),
             Contains("add_array"));
  manual.add(Group::kModel, "w", Kind::kUInt64);
  CHECK_THAT(rejection([&] { manual.add_array(Group::kModel, "w", {1}); }),
             Contains("expected twice"));
}

TEST_CASE("group names and entry paths", "[checkpoint][tree]") {
  CHECK(group_name(Group::kOptimizer) == "optimizer");
  CHECK(group_path(Group::kProgress) == "/progress");
  CHECK(parse_group("rng") == Group::kRng);
  CHECK_FALSE(parse_group("/rng").has_value());
  CHECK(entry_path(Group::kModel, "layers.0.linear/weight") == "/model/layers.0.linear/weight");
  CHECK(to_string(Dims{}) == "()");
  CHECK(to_string(Dims{1024, 785}) == "(1024, 785)");
}

TEST_CASE("a tree refilled from an old one's storage holds the new values in the old buffers",
          "[checkpoint][tree]") {
  const std::vector<float> a = {1, 2, 3, 4, 5, 6}, b = {7, 8};
  StateTree old;
  old.put_array(Group::kModel, "w", {2, 3}, std::span<const float>(a));
  old.put_u64(Group::kSchedule, "step", 1);
  old.put_array(Group::kOptimizer, "w/m", {2}, std::span<const float>(b));
  const float* w_storage = old.array(Group::kModel, "w").values.data();
  const float* m_storage = old.array(Group::kOptimizer, "w/m").values.data();

  StateTree fresh;
  fresh.reuse_storage(std::move(old));
  CHECK(old.size() == 0);
  const std::vector<float> a2 = {6, 5, 4, 3, 2, 1}, b2 = {9, 10};
  fresh.put_array(Group::kModel, "w", {2, 3}, std::span<const float>(a2));
  fresh.put_u64(Group::kSchedule, "step", 2);
  fresh.put_array(Group::kOptimizer, "w/m", {2}, std::span<const float>(b2));
  CHECK(fresh.array(Group::kModel, "w").values == a2);
  CHECK(fresh.array(Group::kOptimizer, "w/m").values == b2);
  CHECK(fresh.u64(Group::kSchedule, "step") == 2);
  CHECK(fresh.array(Group::kModel, "w").values.data() == w_storage);
  CHECK(fresh.array(Group::kOptimizer, "w/m").values.data() == m_storage);
  // More arrays than the old tree had: the extra ones get new storage.
  fresh.put_array(Group::kModel, "b", {2}, std::span<const float>(b2));
  CHECK(fresh.array(Group::kModel, "b").values == b2);
}
