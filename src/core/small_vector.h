// SmallVector<T, N>: a vector of trivially copyable elements that keeps up to N of them
// inline and moves to the heap only beyond that. strata's Shape is SmallVector<int64_t, 8>,
// so building, copying and passing the shape of a tensor of rank <= 8 never allocates: the
// steady state of an io-binding run is heap-free (docs/hardening.md "Real-time use").
//
// The interface is the subset of std::vector the code base uses. Iterators are raw
// pointers; like std::vector's, they are invalidated by any call that changes capacity.
#pragma once

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iterator>
#include <new>
#include <stdexcept>
#include <type_traits>
#include <vector>

namespace strata {

template <typename T, size_t N>
class SmallVector {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVector holds trivially copyable elements only");
  static_assert(N > 0, "SmallVector needs an inline capacity");

 public:
  using value_type = T;
  using size_type = size_t;
  using difference_type = std::ptrdiff_t;
  using reference = T&;
  using const_reference = const T&;
  using pointer = T*;
  using const_pointer = const T*;
  using iterator = T*;
  using const_iterator = const T*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;

  SmallVector() noexcept {}  // user-provided: `static const Shape s;` needs it (inline_ stays raw)
  explicit SmallVector(size_t n) { resize(n); }
  SmallVector(size_t n, const T& v) { assign(n, v); }
  template <std::input_iterator It>
  SmallVector(It first, It last) {
    assign(first, last);
  }
  SmallVector(std::initializer_list<T> il) { assign(il.begin(), il.end()); }
  // Implicit on purpose: attribute lists and other std::vector<T> sources become shapes
  // without ceremony (no allocation for <= N elements). The other way is explicit: ToVector().
  SmallVector(const std::vector<T>& v) { assign(v.begin(), v.end()); }  // NOLINT(runtime/explicit)
  SmallVector(const SmallVector& o) { assign(o.begin(), o.end()); }
  SmallVector(SmallVector&& o) noexcept { MoveFrom(o); }
  ~SmallVector() { FreeHeap(); }

  SmallVector& operator=(const SmallVector& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVector& operator=(SmallVector&& o) noexcept {
    if (this != &o) {
      FreeHeap();
      MoveFrom(o);
    }
    return *this;
  }
  SmallVector& operator=(std::initializer_list<T> il) {
    assign(il.begin(), il.end());
    return *this;
  }

  // --- size and capacity
  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  size_t capacity() const noexcept { return capacity_; }
  static constexpr size_t inline_capacity() noexcept { return N; }
  // True while the elements live in the object itself (no heap block).
  bool is_inline() const noexcept { return data_ == InlineData(); }
  void reserve(size_t n) {
    if (n > capacity_) Grow(n);
  }
  void resize(size_t n) { resize(n, T()); }
  void resize(size_t n, const T& v) {
    const T copy = v;  // v may alias an element that reserve() moves
    reserve(n);
    for (size_t i = size_; i < n; ++i) data_[i] = copy;
    size_ = n;
  }
  void clear() noexcept { size_ = 0; }

  // --- element access
  T* data() noexcept { return data_; }
  const T* data() const noexcept { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  // Bounds-checked like std::vector::at (throws std::out_of_range).
  T& at(size_t i) {
    if (i >= size_) throw std::out_of_range("SmallVector::at");
    return data_[i];
  }
  const T& at(size_t i) const {
    if (i >= size_) throw std::out_of_range("SmallVector::at");
    return data_[i];
  }
  T& front() { return data_[0]; }
  const T& front() const { return data_[0]; }
  T& back() { return data_[size_ - 1]; }
  const T& back() const { return data_[size_ - 1]; }

  // --- iterators
  iterator begin() noexcept { return data_; }
  iterator end() noexcept { return data_ + size_; }
  const_iterator begin() const noexcept { return data_; }
  const_iterator end() const noexcept { return data_ + size_; }
  const_iterator cbegin() const noexcept { return data_; }
  const_iterator cend() const noexcept { return data_ + size_; }
  reverse_iterator rbegin() noexcept { return reverse_iterator(end()); }
  reverse_iterator rend() noexcept { return reverse_iterator(begin()); }
  const_reverse_iterator rbegin() const noexcept { return const_reverse_iterator(end()); }
  const_reverse_iterator rend() const noexcept { return const_reverse_iterator(begin()); }
  const_reverse_iterator crbegin() const noexcept { return rbegin(); }
  const_reverse_iterator crend() const noexcept { return rend(); }

  // --- modifiers
  void assign(size_t n, const T& v) {
    const T copy = v;  // v may alias an element
    size_ = 0;
    reserve(n);
    std::fill_n(data_, n, copy);
    size_ = n;
  }
  template <std::input_iterator It>
  void assign(It first, It last) {
    if constexpr (std::forward_iterator<It>) {
      const size_t n = static_cast<size_t>(std::distance(first, last));
      if (n > capacity_) {
        // The source may be this vector's own storage: build the copy before freeing it.
        SmallVector tmp;
        tmp.Grow(n);
        std::copy(first, last, tmp.data_);
        tmp.size_ = n;
        *this = std::move(tmp);
        return;
      }
      // copy, not memcpy: the ranges may overlap when assigning from a sub-range of this.
      std::copy(first, last, data_);
      size_ = n;
    } else {
      clear();
      for (; first != last; ++first) push_back(*first);
    }
  }
  void assign(std::initializer_list<T> il) { assign(il.begin(), il.end()); }

  void push_back(const T& v) {
    if (size_ == capacity_) {
      const T copy = v;  // v may be an element about to move
      Grow(NextCapacity(size_ + 1));
      data_[size_++] = copy;
      return;
    }
    data_[size_++] = v;
  }
  template <typename... Args>
  T& emplace_back(Args&&... args) {
    push_back(T(std::forward<Args>(args)...));
    return back();
  }
  void pop_back() { --size_; }

  iterator insert(const_iterator pos, const T& v) { return insert(pos, size_t{1}, v); }
  iterator insert(const_iterator pos, size_t count, const T& v) {
    const size_t at = Index(pos);
    const T copy = v;
    OpenGap(at, count);
    std::fill_n(data_ + at, count, copy);
    return data_ + at;
  }
  template <std::input_iterator It>
  iterator insert(const_iterator pos, It first, It last) {
    const size_t at = Index(pos);
    if constexpr (std::forward_iterator<It>) {
      // Copy the source first: it may point into this vector.
      SmallVector src(first, last);
      OpenGap(at, src.size_);
      std::copy(src.begin(), src.end(), data_ + at);
    } else {
      size_t i = at;
      for (; first != last; ++first) insert(data_ + i++, *first);
    }
    return data_ + at;
  }
  iterator insert(const_iterator pos, std::initializer_list<T> il) { return insert(pos, il.begin(), il.end()); }
  template <typename... Args>
  iterator emplace(const_iterator pos, Args&&... args) {
    return insert(pos, T(std::forward<Args>(args)...));
  }

  iterator erase(const_iterator pos) { return erase(pos, pos + 1); }
  iterator erase(const_iterator first, const_iterator last) {
    const size_t a = Index(first), b = Index(last);
    if (a < b) {
      std::copy(data_ + b, data_ + size_, data_ + a);
      size_ -= b - a;
    }
    return data_ + a;
  }

  void swap(SmallVector& o) noexcept {
    SmallVector tmp(std::move(o));
    o = std::move(*this);
    *this = std::move(tmp);
  }

  // --- comparisons (hidden friends, so a std::vector<T> operand converts)
  friend bool operator==(const SmallVector& a, const SmallVector& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }
  friend auto operator<=>(const SmallVector& a, const SmallVector& b) {
    return std::lexicographical_compare_three_way(a.begin(), a.end(), b.begin(), b.end());
  }

 private:
  T* InlineData() noexcept { return reinterpret_cast<T*>(inline_); }
  const T* InlineData() const noexcept { return reinterpret_cast<const T*>(inline_); }
  size_t Index(const_iterator p) const { return static_cast<size_t>(p - data_); }
  static size_t NextCapacity(size_t need) { return std::max(need, 2 * need - need / 2); }

  // Moves the elements to a heap block of capacity n (n > capacity_).
  void Grow(size_t n) {
    T* p = static_cast<T*>(::operator new(n * sizeof(T)));
    if (size_) std::memcpy(p, data_, size_ * sizeof(T));
    FreeHeap();
    data_ = p;
    capacity_ = n;
  }
  void FreeHeap() noexcept {
    if (!is_inline()) {
      ::operator delete(data_);
      data_ = InlineData();
      capacity_ = N;
    }
  }
  // Takes o's elements (stealing its heap block if it has one) and leaves o empty and inline.
  void MoveFrom(SmallVector& o) noexcept {
    if (o.is_inline()) {
      data_ = InlineData();
      capacity_ = N;
      if (o.size_) std::memcpy(data_, o.data_, o.size_ * sizeof(T));
    } else {
      data_ = o.data_;
      capacity_ = o.capacity_;
      o.data_ = o.InlineData();
      o.capacity_ = N;
    }
    size_ = o.size_;
    o.size_ = 0;
  }
  // Shifts [at, size) right by count, growing if needed; leaves [at, at + count) to fill.
  void OpenGap(size_t at, size_t count) {
    if (count == 0) return;
    if (size_ + count > capacity_) Grow(NextCapacity(size_ + count));
    std::copy_backward(data_ + at, data_ + size_, data_ + size_ + count);
    size_ += count;
  }

  T* data_ = InlineData();
  size_t size_ = 0;
  size_t capacity_ = N;
  alignas(T) unsigned char inline_[N * sizeof(T)];
};

// The explicit way back to a std::vector (allocates; for APIs and tests that need one).
template <typename T, size_t N>
std::vector<T> ToVector(const SmallVector<T, N>& v) {
  return std::vector<T>(v.begin(), v.end());
}

}  // namespace strata
