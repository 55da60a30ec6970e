// FunctionRef<R(Args...)>: a non-owning reference to a callable, two pointers wide.
// Unlike std::function, binding a lambda never allocates, which keeps callbacks on the
// run path (XNNPACK operator setup, parallel bodies) heap-free. The callable must outlive
// every call; as a function parameter bound to a temporary lambda it always does.
#pragma once

#include <type_traits>
#include <utility>

namespace strata {

template <typename Sig>
class FunctionRef;

template <typename R, typename... Args>
class FunctionRef<R(Args...)> {
 public:
  template <typename F, typename = std::enable_if_t<!std::is_same_v<std::decay_t<F>, FunctionRef> &&
                                                    std::is_invocable_r_v<R, F&, Args...>>>
  FunctionRef(F&& f) noexcept  // NOLINT(google-explicit-constructor): binds callables implicitly
      : obj_(const_cast<void*>(static_cast<const void*>(&f))),
        call_([](void* o, Args... args) -> R {
          return (*static_cast<std::remove_reference_t<F>*>(o))(std::forward<Args>(args)...);
        }) {}

  R operator()(Args... args) const { return call_(obj_, std::forward<Args>(args)...); }

 private:
  void* obj_;
  R (*call_)(void*, Args...);
};

}  // namespace strata
