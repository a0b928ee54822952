// The fixtures of the typed contract suite (resource_contract_test.cpp,
// resource_sizes_test.cpp): every resource and adaptor of mr/ is a fixture below, and every
// fixture runs every test of both files, on both backends. A new resource is a fixture plus one
// line in `contract_fixtures`.
//
// A fixture owns its stack and exposes:
//   memory_resource& resource();
//   static constexpr bool stream_ordered_free;   // free is enqueued, not waited for
//   static constexpr bool memory_info_supported; // get_memory_info() answers
//   static constexpr char const* name;           // the test name suffix
//   void forget_stream(stream_handle);           // optional: called before a test stream dies
#pragma once

#include "resource_test_support.hpp"

#include <gpumem/core/checked_arithmetic.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/mr/async_resource.hpp>
#include <gpumem/mr/cuda_resource.hpp>
#include <gpumem/mr/failure_callback_adaptor.hpp>
#include <gpumem/mr/limit_adaptor.hpp>
#include <gpumem/mr/logging_adaptor.hpp>
#include <gpumem/mr/managed_resource.hpp>
#include <gpumem/mr/owning_adaptor.hpp>
#include <gpumem/mr/pinned_host_resource.hpp>
#include <gpumem/mr/pool_resource.hpp>
#include <gpumem/mr/statistics_adaptor.hpp>
#include <gpumem/mr/tracking_adaptor.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

namespace gpumem::contract {

using test::allocate_patterned;
using test::expect_distinct_and_intact;
using test::fill_block;
using test::first_mismatch;
using test::patterned_block;
using test::scoped_stream;

// More than any device or host has: every stack must turn it into gpumem::out_of_memory.
inline constexpr std::size_t impossible_bytes = std::size_t{1} << 50;

// --- fixtures
// -------------------------------------------------------------------------------------

struct cuda_fixture {
  static constexpr char const* name = "cuda";
  static constexpr bool stream_ordered_free = false;
  static constexpr bool memory_info_supported = true;
  cuda_resource upstream;
  memory_resource& resource() { return upstream; }
};

struct async_fixture {
  static constexpr char const* name = "async";
  static constexpr bool stream_ordered_free = true;
  static constexpr bool memory_info_supported = true;
  async_resource upstream{async_resource_options{std::size_t{64} << 20}};
  memory_resource& resource() { return upstream; }
};

struct managed_fixture {
  static constexpr char const* name = "managed";
  static constexpr bool stream_ordered_free = false;
  static constexpr bool memory_info_supported = true;
  managed_resource upstream;
  memory_resource& resource() { return upstream; }
};

struct pinned_fixture {
  static constexpr char const* name = "pinned";
  static constexpr bool stream_ordered_free = false;
  static constexpr bool memory_info_supported = false;
  pinned_host_resource upstream;
  memory_resource& resource() { return upstream; }
};

struct statistics_fixture {
  static constexpr char const* name = "statistics";
  static constexpr bool stream_ordered_free = false;
  static constexpr bool memory_info_supported = true;
  cuda_resource upstream;
  statistics_adaptor adaptor{upstream};
  memory_resource& resource() { return adaptor; }
};

struct logging_fixture {
  static constexpr char const* name = "logging";
  static constexpr bool stream_ordered_free = true;
  static constexpr bool memory_info_supported = true;
  async_resource upstream;
  std::ostringstream log;
  logging_adaptor adaptor{upstream, log};
  memory_resource& resource() { return adaptor; }
};

struct limit_fixture {
  static constexpr char const* name = "limit";
  static constexpr bool stream_ordered_free = false;
  static constexpr bool memory_info_supported = true;
  cuda_resource upstream;
  limit_adaptor adaptor{upstream, std::size_t{1} << 30};
  memory_resource& resource() { return adaptor; }
};

struct failure_callback_fixture {
  static constexpr char const* name = "failure_callback";
  static constexpr bool stream_ordered_free = false;
  static constexpr bool memory_info_supported = true;
  cuda_resource upstream;
  // Retries twice, then gives up: the out-of-memory test sees the exception after the retries.
  failure_callback_adaptor adaptor{upstream, [](std::size_t, int attempt) { return attempt < 2; }};
  memory_resource& resource() { return adaptor; }
};

struct tracking_fixture {
  static constexpr char const* name = "tracking";
  static constexpr bool stream_ordered_free = true;
  static constexpr bool memory_info_supported = true;
  async_resource upstream;
  tracking_adaptor adaptor{upstream};
  memory_resource& resource() { return adaptor; }
};

struct tracking_pinned_fixture {
  static constexpr char const* name = "tracking_pinned";
  static constexpr bool stream_ordered_free = false;
  static constexpr bool memory_info_supported = false;
  pinned_host_resource upstream;
  tracking_adaptor adaptor{upstream};
  memory_resource& resource() { return adaptor; }
};

// A deep stack, owned through owning_adaptor: logging(limit(statistics(async))).
struct stack_fixture {
  static constexpr char const* name = "stack";
  static constexpr bool stream_ordered_free = true;
  static constexpr bool memory_info_supported = true;
  std::ostringstream log;
  std::unique_ptr<memory_resource> stack = make_stack(log);
  memory_resource& resource() { return *stack; }

  static std::unique_ptr<memory_resource> make_stack(std::ostream& out) {
    auto stats = make_owning_adaptor<statistics_adaptor>(std::make_unique<async_resource>());
    auto limited = make_owning_adaptor<limit_adaptor>(std::move(stats), std::size_t{2} << 30);
    return make_owning_adaptor<logging_adaptor>(std::move(limited), out);
  }
};

struct pool_fixture {
  static constexpr char const* name = "pool";
  static constexpr bool stream_ordered_free = true;
  static constexpr bool memory_info_supported = true;
  cuda_resource upstream;
  pool_resource pool{upstream, pool_options{}};
  memory_resource& resource() { return pool; }
  void forget_stream(stream_handle stream) { pool.release_stream(stream); }
};
// Grows by mapping physical memory into one reserved range (pool_options::expandable).
struct expandable_pool_fixture {
  static constexpr char const* name = "expandable_pool";
  static constexpr bool stream_ordered_free = true;
  static constexpr bool memory_info_supported = true;
  static pool_options options() {
    pool_options o;
    o.expandable = true;
    return o;
  }
  cuda_resource upstream;
  pool_resource pool{upstream, options()};
  memory_resource& resource() { return pool; }
  void forget_stream(stream_handle stream) { pool.release_stream(stream); }
};

using contract_fixtures =
    ::testing::Types<cuda_fixture, async_fixture, managed_fixture, pinned_fixture,
                     statistics_fixture, logging_fixture, limit_fixture, failure_callback_fixture,
                     tracking_fixture, tracking_pinned_fixture, stack_fixture, pool_fixture,
                     expandable_pool_fixture>;

struct fixture_names {
  template <class T>
  static std::string GetName(int) {
    return T::name;
  }
};

template <class Fixture>
auto forget_stream(Fixture& f, stream_handle s, int) -> decltype(f.forget_stream(s), void()) {
  f.forget_stream(s);
}
template <class Fixture>
void forget_stream(Fixture&, stream_handle, long) {}

template <class Fixture>
class resource_contract : public ::testing::Test {
 protected:
  Fixture fixture_;
  memory_resource& mr() { return fixture_.resource(); }
  // A stream for the test, forgotten by the resource before it is destroyed.
  std::function<void(stream_handle)> forget() {
    return [this](stream_handle s) { forget_stream(fixture_, s, 0); };
  }
};

}  // namespace gpumem::contract
