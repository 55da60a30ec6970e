// SmallVector (core/small_vector.h), the type behind Shape: inline up to N elements,
// heap beyond, with std::vector semantics for every operation the code base uses.
#include "core/small_vector.h"

#include <gtest/gtest.h>

#include <list>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace strata {
namespace {

using SV = SmallVector<int64_t, 4>;

std::vector<int64_t> V(const SV& v) { return ToVector(v); }

TEST(SmallVector, ShapeKeepsEightDimsInline) {
  Shape s{1, 2, 3, 4, 5, 6, 7, 8};
  EXPECT_TRUE(s.is_inline());
  EXPECT_EQ(s.capacity(), 8u);
  s.push_back(9);
  EXPECT_FALSE(s.is_inline());
  EXPECT_EQ(s.size(), 9u);
  EXPECT_EQ(s.back(), 9);
  EXPECT_EQ(ShapeToString(s), "[1,2,3,4,5,6,7,8,9]");
}

TEST(SmallVector, ConstructorsInlineAndSpilled) {
  SV empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_TRUE(empty.is_inline());
  EXPECT_EQ(empty.begin(), empty.end());

  SV sized(3);
  EXPECT_EQ(V(sized), (std::vector<int64_t>{0, 0, 0}));
  SV filled(6, 7);  // (count, value), not an iterator range
  EXPECT_FALSE(filled.is_inline());
  EXPECT_EQ(V(filled), (std::vector<int64_t>(6, 7)));

  std::list<int64_t> l{5, 6, 7};  // a non-contiguous, bidirectional source
  SV from_list(l.begin(), l.end());
  EXPECT_EQ(V(from_list), (std::vector<int64_t>{5, 6, 7}));

  std::vector<int64_t> big{1, 2, 3, 4, 5, 6};
  SV from_vec = big;  // implicit from std::vector
  EXPECT_FALSE(from_vec.is_inline());
  EXPECT_EQ(V(from_vec), big);
  EXPECT_EQ(from_vec, big);  // compares with a std::vector operand
  EXPECT_EQ(big, from_vec);
}

TEST(SmallVector, PushPopAcrossTheInlineBoundary) {
  SV v;
  for (int64_t i = 0; i < 10; ++i) {
    v.push_back(i);
    EXPECT_EQ(v.is_inline(), i < 4) << i;
  }
  EXPECT_EQ(v.front(), 0);
  EXPECT_EQ(v.back(), 9);
  EXPECT_EQ(v.emplace_back(42), 42);
  for (int i = 0; i < 11; ++i) v.pop_back();
  EXPECT_TRUE(v.empty());
  EXPECT_FALSE(v.is_inline());  // capacity is kept, as with std::vector
  v.push_back(v.capacity());    // an argument that aliases nothing still works after reuse
  EXPECT_EQ(v.size(), 1u);

  // push_back of an element of the vector itself while it must grow.
  SV full{1, 2, 3, 4};
  full.push_back(full[0]);
  EXPECT_EQ(V(full), (std::vector<int64_t>{1, 2, 3, 4, 1}));
}

TEST(SmallVector, InsertAndEraseAtTheEdges) {
  SV v{2, 3};
  auto it = v.insert(v.begin(), 1);  // front
  EXPECT_EQ(*it, 1);
  v.insert(v.end(), 4);  // back: now full inline
  EXPECT_TRUE(v.is_inline());
  EXPECT_EQ(V(v), (std::vector<int64_t>{1, 2, 3, 4}));
  v.insert(v.begin() + 2, 2, 9);  // middle, spills to the heap
  EXPECT_FALSE(v.is_inline());
  EXPECT_EQ(V(v), (std::vector<int64_t>{1, 2, 9, 9, 3, 4}));
  v.insert(v.end(), {5, 6});
  EXPECT_EQ(V(v), (std::vector<int64_t>{1, 2, 9, 9, 3, 4, 5, 6}));
  // Inserting a range of the vector into itself (the source moves while growing).
  v.insert(v.begin(), v.begin() + 6, v.end());
  EXPECT_EQ(V(v), (std::vector<int64_t>{5, 6, 1, 2, 9, 9, 3, 4, 5, 6}));

  it = v.erase(v.begin());  // front
  EXPECT_EQ(*it, 6);
  it = v.erase(v.end() - 1);  // back
  EXPECT_EQ(it, v.end());
  it = v.erase(v.begin() + 3, v.begin() + 5);  // middle range
  EXPECT_EQ(*it, 3);
  EXPECT_EQ(V(v), (std::vector<int64_t>{6, 1, 2, 3, 4, 5}));
  it = v.erase(v.begin() + 1, v.begin() + 1);  // empty range: no-op
  EXPECT_EQ(*it, 1);
  v.erase(v.begin(), v.end());
  EXPECT_TRUE(v.empty());
  v.insert(v.begin(), 3, 8);  // insert into an empty vector
  EXPECT_EQ(V(v), (std::vector<int64_t>{8, 8, 8}));
}

TEST(SmallVector, ResizeAssignReserveClear) {
  SV v{1, 2};
  v.resize(5, 3);
  EXPECT_EQ(V(v), (std::vector<int64_t>{1, 2, 3, 3, 3}));
  v.resize(1);
  EXPECT_EQ(V(v), (std::vector<int64_t>{1}));
  v.assign(3, 4);
  EXPECT_EQ(V(v), (std::vector<int64_t>{4, 4, 4}));
  v.assign({9, 8, 7, 6, 5, 4});
  EXPECT_EQ(V(v), (std::vector<int64_t>{9, 8, 7, 6, 5, 4}));
  v.assign(v.begin() + 2, v.end());  // a sub-range of itself
  EXPECT_EQ(V(v), (std::vector<int64_t>{7, 6, 5, 4}));
  v.assign(2, v[3]);  // a value that aliases an element
  EXPECT_EQ(V(v), (std::vector<int64_t>{4, 4}));
  SV r;
  r.reserve(3);
  EXPECT_TRUE(r.is_inline());
  r.reserve(20);
  EXPECT_GE(r.capacity(), 20u);
  EXPECT_FALSE(r.is_inline());
  r.clear();
  EXPECT_TRUE(r.empty());
}

TEST(SmallVector, CopyAndMoveBetweenInlineAndHeapStates) {
  SV small{1, 2}, large{1, 2, 3, 4, 5, 6};
  SV a = small, b = large;
  EXPECT_EQ(a, small);
  EXPECT_EQ(b, large);
  EXPECT_TRUE(a.is_inline());
  EXPECT_FALSE(b.is_inline());
  EXPECT_NE(b.data(), large.data());  // a deep copy

  a = large;  // inline <- heap
  EXPECT_EQ(a, large);
  b = small;  // heap <- inline (keeps its block)
  EXPECT_EQ(b, small);

  SV m1 = std::move(a);  // steals the heap block
  EXPECT_EQ(m1, large);
  EXPECT_FALSE(m1.is_inline());
  EXPECT_TRUE(a.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty and usable
  EXPECT_TRUE(a.is_inline());
  a.push_back(1);
  EXPECT_EQ(V(a), (std::vector<int64_t>{1}));

  SV m2 = std::move(b);  // copies inline elements
  EXPECT_EQ(m2, small);
  SV m3{7};
  m3 = std::move(m1);  // inline <- heap
  EXPECT_EQ(m3, large);
  m1 = std::move(m2);  // moved-from target <- inline
  EXPECT_EQ(m1, small);

  m1.swap(m3);
  EXPECT_EQ(m1, large);
  EXPECT_EQ(m3, small);
}

TEST(SmallVector, SelfAssignment) {
  SV in{1, 2}, heap{1, 2, 3, 4, 5};
  SV& in_ref = in;
  SV& heap_ref = heap;
  in = in_ref;
  heap = heap_ref;
  EXPECT_EQ(V(in), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(V(heap), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  in = std::move(in_ref);
  heap = std::move(heap_ref);
  EXPECT_EQ(V(in), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(V(heap), (std::vector<int64_t>{1, 2, 3, 4, 5}));
}

TEST(SmallVector, ComparisonsAndIteration) {
  SV a{1, 2, 3}, b{1, 2, 4}, c{1, 2};
  EXPECT_TRUE(a < b);
  EXPECT_TRUE(c < a);
  EXPECT_TRUE(a != b);
  EXPECT_TRUE(a == (SV{1, 2, 3}));
  std::vector<int64_t> rev(a.rbegin(), a.rend());
  EXPECT_EQ(rev, (std::vector<int64_t>{3, 2, 1}));
  int64_t sum = 0;
  for (int64_t x : a) sum += x;
  EXPECT_EQ(sum, 6);
  EXPECT_EQ(a.at(2), 3);
  EXPECT_THROW(a.at(3), std::out_of_range);
}

}  // namespace
}  // namespace strata
