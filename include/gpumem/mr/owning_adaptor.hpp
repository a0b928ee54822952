// gpumem/mr/owning_adaptor.hpp
//
// Adaptors reference their upstream (the caller keeps the stack alive, as with RMM and CCCL). Where
// one object must own a whole stack — a memory manager holding "debug wrapper around its pool" in
// a unique_ptr — owning_adaptor<A> bundles an adaptor with the upstream it references.
#pragma once

#include <gpumem/core/error.hpp>
#include <gpumem/mr/memory_resource.hpp>

#include <memory>
#include <utility>

namespace gpumem {

// Owns `upstream` and an `Adaptor` constructed over it; behaves as the adaptor.
//
// Equality: two owning_adaptor<Adaptor> are equal when their adaptors are; an owning_adaptor is
// not equal to anything else, its own adaptor included. Equality must be symmetric (CCCL compares
// resources both ways), and the adaptor, which knows nothing of the wrapper, cannot say it equals
// it.
//
// Ownership: owns both; the adaptor is destroyed before its upstream.
// Thread safety and stream semantics: the adaptor's.
template <class Adaptor>
class owning_adaptor final : public memory_resource {
 public:
  template <class... Args>
  explicit owning_adaptor(std::unique_ptr<memory_resource> upstream, Args&&... args)
      : upstream_(checked(std::move(upstream))),
        adaptor_(*upstream_, std::forward<Args>(args)...) {}

  Adaptor& adaptor() noexcept { return adaptor_; }
  Adaptor const& adaptor() const noexcept { return adaptor_; }
  memory_resource& upstream() const noexcept { return *upstream_; }

  std::string name() const override { return adaptor_.name(); }
  memory_info get_memory_info() const override { return adaptor_.get_memory_info(); }
  resource_properties properties() const noexcept override { return adaptor_.properties(); }
  bool selects_own_device() const noexcept override { return adaptor_.selects_own_device(); }
  int own_device() const noexcept override { return adaptor_.own_device(); }
  device_backend* backend_in_use() const noexcept override { return adaptor_.backend_in_use(); }

 private:
  static std::unique_ptr<memory_resource> checked(std::unique_ptr<memory_resource> upstream) {
    GPUMEM_EXPECTS(upstream != nullptr, "owning_adaptor: the upstream must not be null");
    return upstream;
  }
  void* do_allocate(std::size_t bytes, stream_handle stream) override {
    return adaptor_.allocate(bytes, stream);
  }
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept override {
    adaptor_.deallocate(ptr, bytes, stream);
  }
  bool do_is_equal(memory_resource const& other) const noexcept override {
    if (this == &other) return true;
    auto const* o = dynamic_cast<owning_adaptor const*>(&other);
    return o != nullptr && adaptor_.is_equal(o->adaptor_);
  }

  std::unique_ptr<memory_resource> upstream_;  // declared first: destroyed after adaptor_
  Adaptor adaptor_;
};

template <class Adaptor, class... Args>
std::unique_ptr<owning_adaptor<Adaptor>> make_owning_adaptor(
    std::unique_ptr<memory_resource> upstream, Args&&... args) {
  return std::make_unique<owning_adaptor<Adaptor>>(std::move(upstream),
                                                   std::forward<Args>(args)...);
}

}  // namespace gpumem
