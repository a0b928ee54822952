// gpumem/strings/udf_string.hpp, managed_string.hpp and string_list.hpp on the NRT heap, in kernels
// launched with nrt::launch (the cuda backend's device, or the host backend's threads): growth by
// doubling counted through the memory system's statistics, moves, errors, failure on a tiny heap
// (failed()/out_of_memory, never a trap, nothing leaked), and the managed string's lifecycle as in
// the string UDF spec — make (count 1), retain/release, the last decref freeing the block and the
// characters. One functor serves every scenario (one kernel to compile).
#include "core_test_support.hpp"

#include <gpumem/core/config.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/nrt/launch.hpp>
#include <gpumem/nrt/meminfo.hpp>
#include <gpumem/strings/managed_string.hpp>
#include <gpumem/strings/string_list.hpp>
#include <gpumem/strings/udf_string.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace strings = gpumem::strings;
using gpumem::test::strings::check_words;
using gpumem::test::strings::checker;
using gpumem::test::strings::device_array;
using gpumem::test::strings::failures;
using strings::errc;
using strings::managed_string;
using strings::size_type;
using strings::string_list;
using strings::string_view;
using strings::udf_string;

static_assert(std::is_trivially_copyable_v<managed_string>, "a handle, like Numba's struct");
static_assert(!std::is_copy_constructible_v<udf_string> &&
              std::is_nothrow_move_constructible_v<udf_string>);
static_assert(!std::is_copy_constructible_v<string_list>);

namespace {

enum scenario : int {
  append_ascii,      // n ASCII characters one by one
  append_reserved,   // reserve(n), then n characters
  append_multibyte,  // n rounds of ß € 😀
  append_views,      // n times "hello, "
  moves,
  fill_constructor,
  errors,
  release_and_resize,
  grow_until_failure,  // on a tiny heap
  managed_make,        // make, retain into mis[i], release
  managed_free,        // the freeing kernel: decref mis[i]
  managed_failures,
  managed_exhausted,  // make when the heap has no room for the block
  list_growth,
  list_failures,
};

struct heap_scenario {
  int which;
  size_type n;
  checker check;
  unsigned long long* out;  // per thread
  NRT_MemInfo** mis;        // per thread
  void** hog;               // hog_slots pointers
  unsigned hog_slots;

  GPUMEM_HD void operator()(gpumem::thread_index const& t) const {
    unsigned const i = static_cast<unsigned>(t.global());
    switch (which) {
      case append_ascii: {
        udf_string s;
        for (size_type k = 0; k < n; ++k)
          s += static_cast<char32_t>('a' + k % 26);
        GPUMEM_CHECK(check, !s.failed() && s.size_bytes() == n && s.length() == n);
        GPUMEM_CHECK(check, s.capacity() >= n);
        bool same = true;
        for (size_type k = 0; k < n; ++k)
          same = same && s.data()[k] == static_cast<char>('a' + k % 26);
        GPUMEM_CHECK(check, same);
        out[i] = static_cast<unsigned long long>(s.capacity());
        break;
      }
      case append_reserved: {
        udf_string s;
        GPUMEM_CHECK(check, s.reserve(n) && s.capacity() >= n);
        char* const first = s.data();
        for (size_type k = 0; k < n; ++k)
          s.append(U'z');
        GPUMEM_CHECK(check, s.data() == first && s.size_bytes() == n);
        break;
      }
      case append_multibyte: {
        udf_string s;
        for (size_type k = 0; k < n; ++k) {
          s += U'\u00DF';
          s.append(U'\u20AC');
          s += U'\U0001F600';
        }
        GPUMEM_CHECK(check, s.size_bytes() == 9 * n && s.length() == 3 * n);
        size_type k = 0;
        char32_t const expected[3] = {U'\u00DF', U'\u20AC', U'\U0001F600'};
        bool same = true;
        for (char32_t c : s.view())
          same = same && c == expected[k++ % 3];
        GPUMEM_CHECK(check, same && k == 3 * n);
        break;
      }
      case append_views: {
        udf_string s;
        for (size_type k = 0; k < n; ++k)
          s += "hello, ";
        GPUMEM_CHECK(check, s.size_bytes() == 7 * n);
        GPUMEM_CHECK(check, s.view().substr(7 * (n - 1)) == "hello, ");
        break;
      }
      case moves: {
        udf_string a(string_view("abc"));
        char const* const bytes = a.data();
        udf_string b(std::move(a));
        GPUMEM_CHECK(check, a.data() == nullptr && a.empty() && a.capacity() == 0 && !a.failed());
        GPUMEM_CHECK(check, b.data() == bytes && b.view() == "abc");
        udf_string c(string_view("xyz"));
        c = std::move(b);  // frees "xyz"
        GPUMEM_CHECK(check, c.data() == bytes && c.view() == "abc" && b.data() == nullptr);
        udf_string failed;
        failed.set_error(errc::value_error);
        c = std::move(failed);  // the error moves too
        GPUMEM_CHECK(check, c.failed() && c.error() == errc::value_error && !failed.failed());
        a += "reused";  // a moved-from string is an ordinary empty string
        GPUMEM_CHECK(check, a.view() == "reused");
        break;
      }
      case fill_constructor: {
        udf_string const euros(5, U'\u20AC');
        GPUMEM_CHECK(check, euros.size_bytes() == 15 && euros.length() == 5 &&
                                euros.view() ==
                                    "\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC\xE2\x82\xAC"
                                    "\xE2\x82\xAC");
        udf_string const xs(3, U'x');
        GPUMEM_CHECK(check, xs.view() == "xxx");
        udf_string const none(0, U'x');
        udf_string const negative(-3, U'x');
        GPUMEM_CHECK(check, none.empty() && none.data() == nullptr && !none.failed());
        GPUMEM_CHECK(check, negative.empty() && !negative.failed());
        udf_string const huge(INT64_MAX / 2, U'\U0001F600');  // bytes past INT64_MAX
        GPUMEM_CHECK(check, huge.failed() && huge.error() == errc::out_of_memory && huge.empty());
        udf_string const copy(string_view("copied"));
        GPUMEM_CHECK(check, copy.view() == "copied" && copy.capacity() == 16);
        udf_string const empty_copy{string_view()};
        GPUMEM_CHECK(check, empty_copy.data() == nullptr && !empty_copy.failed());
        break;
      }
      case errors: {
        udf_string s(string_view("abc"));
        s.set_error(errc::ok);  // no effect
        GPUMEM_CHECK(check, !s.failed() && s.view() == "abc");
        s.set_error(errc::value_error);
        GPUMEM_CHECK(check, s.failed() && s.error() == errc::value_error && s.empty() &&
                                s.data() == nullptr && s.capacity() == 0);
        s += "more";
        s += U'x';
        s.append("abc", 3);
        GPUMEM_CHECK(check, s.empty() && s.data() == nullptr);
        GPUMEM_CHECK(check, !s.reserve(10) && !s.reserve(0) && !s.resize_bytes(0));
        s.set_error(errc::index_error);  // the first error stays
        GPUMEM_CHECK(check, s.error() == errc::value_error);
        s.clear();
        GPUMEM_CHECK(check, s.failed());
        GPUMEM_CHECK(check, strings::errc_name(errc::value_error)[0] == 'V' &&
                                strings::errc_name(errc::ok)[0] == 'o');
        udf_string other(string_view("abc"));
        other.append(static_cast<char const*>(nullptr), 0);
        other.append("zzz", -1);
        GPUMEM_CHECK(check, other.view() == "abc");
        break;
      }
      case release_and_resize: {
        udf_string s(string_view("hello"));
        size_type const cap = s.capacity();
        s.clear();
        GPUMEM_CHECK(check, s.empty() && s.capacity() == cap);
        s += "hello";
        char* const p = s.release();
        GPUMEM_CHECK(check, s.data() == nullptr && s.empty() && !s.failed() && s.capacity() == 0);
        GPUMEM_CHECK(check, string_view(p, 5) == "hello");
        NRT_Free(p);
        GPUMEM_CHECK(check, s.resize_bytes(20) && s.size_bytes() == 20 && s.capacity() >= 20);
        for (int k = 0; k < 20; ++k)
          s.data()[k] = 'q';
        GPUMEM_CHECK(check,
                     s.resize_bytes(2) && s.view() == "qq" && s.resize_bytes(-1) && s.empty());
        break;
      }
      case grow_until_failure: {
        udf_string s;
        size_type k = 0;
        for (; k < n && !s.failed(); ++k)
          s += U'a';
        GPUMEM_CHECK(check, s.failed() && s.error() == errc::out_of_memory);
        GPUMEM_CHECK(check, s.empty() && s.data() == nullptr && s.capacity() == 0);
        s += "more";
        GPUMEM_CHECK(check, s.empty() && s.failed());
        out[i] = static_cast<unsigned long long>(k);
        break;
      }
      case managed_make: {
        udf_string s;
        s += "row ";
        s += static_cast<char32_t>('0' + i % 10);
        s += U'\u00DF';
        managed_string m = strings::make_managed_string(std::move(s));
        GPUMEM_CHECK(check, static_cast<bool>(m) && !m.is_null());
        GPUMEM_CHECK(check, s.empty() && s.data() == nullptr);  // moved into the block
        GPUMEM_CHECK(check, m.use_count() == 1);
        GPUMEM_CHECK(check,
                     m.meminfo()->data == m.string() &&
                         static_cast<void*>(m.meminfo()) == static_cast<void*>(m.meminfo()) &&
                         reinterpret_cast<char*>(m.string()) ==
                             reinterpret_cast<char*>(m.meminfo()) + sizeof(NRT_MemInfo));
        GPUMEM_CHECK(check, m.view().size_bytes() == 7 && m.view().substr(0, 4) == "row " &&
                                m.view().char_at(5) == U'\u00DF');
        managed_string const copy = m;  // a handle copy: no count change
        GPUMEM_CHECK(check, m.use_count() == 1 && copy.meminfo() == m.meminfo());
        mis[i] = m.retain();  // the output array's reference
        GPUMEM_CHECK(check, mis[i] == m.meminfo() && m.use_count() == 2);
        m.release();
        GPUMEM_CHECK(check, m.is_null() && !m && m.view().empty() && m.use_count() == 0);
        GPUMEM_CHECK(check, copy.use_count() == 1);
        break;
      }
      case managed_free: {
        managed_string m = managed_string::from_meminfo(mis[i]);
        GPUMEM_CHECK(check, m.use_count() == 1 && m.view().size_bytes() == 7 &&
                                m.view().char_at(4) == static_cast<char32_t>('0' + i % 10));
        m.release();  // the last reference: ~udf_string frees the characters, then the block
        mis[i] = nullptr;
        break;
      }
      case managed_failures: {
        udf_string s;
        s.set_error(errc::value_error);
        managed_string m = strings::make_managed_string(std::move(s));
        GPUMEM_CHECK(check, !m && m.is_null() && m.meminfo() == nullptr && m.string() == nullptr);
        GPUMEM_CHECK(check, m.view().empty() && m.retain() == nullptr && m.use_count() == 0);
        m.release();  // no effect
        GPUMEM_CHECK(check, managed_string::from_meminfo(nullptr).is_null());
        managed_string const d;
        GPUMEM_CHECK(check, d.is_null());
        break;
      }
      case managed_exhausted: {
        udf_string s(string_view("doomed"));
        GPUMEM_CHECK(check, !s.failed());
        unsigned taken = 0;  // take every free slab
        while (taken < hog_slots && (hog[taken] = NRT_Allocate(48 * 1024)) != nullptr)
          ++taken;
        GPUMEM_CHECK(check, taken > 0 && taken < hog_slots);
        managed_string m = strings::make_managed_string(std::move(s));
        GPUMEM_CHECK(check, m.is_null());
        GPUMEM_CHECK(check, s.failed() && s.error() == errc::out_of_memory && s.data() == nullptr);
        for (unsigned k = 0; k < taken; ++k)
          NRT_Free(hog[k]);
        out[i] = taken;
        break;
      }
      case list_growth: {
        string_list list;
        GPUMEM_CHECK(check, list.empty() && list.size() == 0 && list.capacity() == 0);
        char const* const text = "0123456789";
        for (size_type k = 0; k < n; ++k)
          list.push_back(string_view(text + k % 10, 1));
        GPUMEM_CHECK(check, !list.failed() && list.size() == n && list.capacity() >= n);
        bool same = true;
        size_type k = 0;
        for (string_view const& v : list)
          same = same && v.data() == text + k % 10 && v.size_bytes() == 1 && k++ < n;
        GPUMEM_CHECK(check, same && k == n && list[n - 1] == string_view(text + (n - 1) % 10, 1));
        string_list moved(std::move(list));
        GPUMEM_CHECK(check, moved.size() == n && list.size() == 0 && list.data() == nullptr);
        list = std::move(moved);
        GPUMEM_CHECK(check, list.size() == n && moved.empty());
        list[0] = string_view("x");
        GPUMEM_CHECK(check, list[0] == "x");
        list.clear();
        GPUMEM_CHECK(check, list.empty() && list.capacity() >= n);
        string_list reserved;
        GPUMEM_CHECK(check, reserved.reserve(100) && reserved.capacity() == 100);
        out[i] = static_cast<unsigned long long>(reserved.capacity());
        break;
      }
      case list_failures: {
        string_list list;
        GPUMEM_CHECK(check, !list.reserve(INT64_MAX / 4));  // bytes past INT64_MAX: no allocation
        GPUMEM_CHECK(check, list.failed() && list.error() == errc::out_of_memory);
        list.push_back("a");
        GPUMEM_CHECK(check, list.size() == 0 && list.data() == nullptr);
        string_list big;
        size_type k = 0;
        for (; k < n && !big.failed(); ++k)
          big.push_back("b");
        GPUMEM_CHECK(check, big.failed() && big.error() == errc::out_of_memory && big.empty());
        big.set_error(errc::value_error);
        GPUMEM_CHECK(check, big.error() == errc::out_of_memory);
        out[i] = static_cast<unsigned long long>(k);
        break;
      }
      default:
        GPUMEM_CHECK(check, false);
    }
  }
};

class strings_heap : public gpumem::test::strings::strings_fixture {
 protected:
  // Runs `which` on `threads` threads with `ms`; returns the failed checks ("" for none).
  std::string run(gpumem::nrt::memsys& ms, int which, size_type n, unsigned threads = 1) {
    words_ = std::make_unique<device_array<unsigned>>(check_words);
    if (out_ == nullptr || threads > slots_) {
      slots_ = threads < 64 ? 64 : threads;
      out_ = std::make_unique<device_array<unsigned long long>>(slots_);
      mis_ = std::make_unique<device_array<NRT_MemInfo*>>(slots_);
      hog_ = std::make_unique<device_array<void*>>(hog_slots);
    }
    unsigned const block = threads < 128 ? threads : 128;
    gpumem::nrt::launch(ms, {(threads + block - 1) / block, block},
                        heap_scenario{which, n, checker{words_->data()}, out_->data(), mis_->data(),
                                      hog_->data(), hog_slots});
    return failures(words_->to_host());
  }
  std::string run(int which, size_type n, unsigned threads = 1) {
    return run(ms(), which, n, threads);
  }
  std::vector<unsigned long long> out() const { return out_->to_host(); }

  static constexpr unsigned hog_slots = 4096;
  unsigned slots_ = 0;
  std::unique_ptr<device_array<unsigned>> words_;
  std::unique_ptr<device_array<unsigned long long>> out_;
  std::unique_ptr<device_array<NRT_MemInfo*>> mis_;
  std::unique_ptr<device_array<void*>> hog_;
};

// The allocations n one-byte appends make, by the growth rule.
unsigned expected_allocations(size_type n, size_type& capacity) {
  unsigned allocations = 0;
  capacity = 0;
  for (size_type size = 1; size <= n; ++size) {
    if (size > capacity) {
      capacity = strings::detail::grown_capacity(capacity, size, udf_string::minimum_capacity);
      ++allocations;
    }
  }
  return allocations;
}

TEST_F(strings_heap, appends_grow_by_doubling) {
  for (size_type n :
       {size_type{1}, size_type{16}, size_type{17}, size_type{1000}, size_type{100000}}) {
    ms().reset_statistics();
    EXPECT_EQ(run(append_ascii, n), "") << "n = " << n;
    size_type capacity = 0;
    unsigned const allocations = expected_allocations(n, capacity);
    gpumem::nrt::memsys_statistics const s = ms().statistics();
    EXPECT_EQ(s.alloc, allocations) << "n = " << n;
    EXPECT_EQ(s.free, allocations) << "n = " << n << ": the destructor frees";
    EXPECT_EQ(out()[0], static_cast<unsigned long long>(capacity));
    // O(log n): 16, 32, ... doubling.
    EXPECT_LE(allocations, 2u + static_cast<unsigned>(std::log2(static_cast<double>(n))));
  }
  // 100000 appends: 16 .. 16384 (11), 32768, 65536, 131072.
  size_type capacity = 0;
  EXPECT_EQ(expected_allocations(100000, capacity), 14u);
  EXPECT_EQ(capacity, 131072);
}

TEST_F(strings_heap, many_threads_append_at_once) {
  unsigned const threads = 512;
  ms().reset_statistics();
  EXPECT_EQ(run(append_ascii, 300, threads), "");
  size_type capacity = 0;
  unsigned const allocations = expected_allocations(300, capacity);
  EXPECT_EQ(ms().statistics().alloc, std::uint64_t{allocations} * threads);
}

TEST_F(strings_heap, reserve_makes_one_allocation) {
  ms().reset_statistics();
  EXPECT_EQ(run(append_reserved, 5000), "");
  EXPECT_EQ(ms().statistics().alloc, 1u);
}

TEST_F(strings_heap, multibyte_and_view_appends) {
  ms().reset_statistics();
  EXPECT_EQ(run(append_multibyte, 3000), "");
  EXPECT_LE(ms().statistics().alloc, 12u);  // 27000 bytes: 16 .. 16384, 32768
  ms().reset_statistics();
  EXPECT_EQ(run(append_views, 10000), "");
  EXPECT_LE(ms().statistics().alloc, 14u);  // 70000 bytes
}

TEST_F(strings_heap, moves_transfer_the_buffer) {
  ms().reset_statistics();
  EXPECT_EQ(run(moves, 0), "");
  EXPECT_EQ(ms().statistics().alloc, 3u);  // "abc", "xyz", "reused"
}

TEST_F(strings_heap, fill_constructor) {
  EXPECT_EQ(run(fill_constructor, 0), "");
  // The fill past INT64_MAX bytes allocated nothing, and the heap recorded it: a UDF that went on
  // from that string is caught by check().
  try {
    ms().check();
    ADD_FAILURE() << "a size past INT64_MAX was not recorded";
  } catch (gpumem::out_of_memory const& e) {
    EXPECT_EQ(e.requested_bytes(), ~std::size_t{0}) << e.what();
    EXPECT_NE(std::string(e.what()).find("more than INT64_MAX"), std::string::npos) << e.what();
  }
}

TEST_F(strings_heap, errors_make_a_string_failed_and_it_stays_failed) {
  EXPECT_EQ(run(errors, 0), "");
}

TEST_F(strings_heap, release_hands_the_buffer_over_and_resize) {
  EXPECT_EQ(run(release_and_resize, 0), "");
}

TEST_F(strings_heap, a_tiny_heap_fails_the_string_without_a_trap) {
  auto tiny = make_memsys(1 * gpumem::MiB);
  EXPECT_EQ(run(*tiny, grow_until_failure, 4 * 1024 * 1024), "");
  size_type const appended = static_cast<size_type>(out()[0]);
  EXPECT_GT(appended, 16 * 1024) << "growth should reach the large blocks before failing";
  EXPECT_LT(appended, 1024 * 1024);
  EXPECT_THROW(tiny->check(), gpumem::out_of_memory) << "the heap records the failed growth";
  // Many threads at once: some fail, none traps, everything is given back.
  EXPECT_EQ(run(*tiny, grow_until_failure, 256 * 1024, 64), "");
  EXPECT_THROW(tiny->check(), gpumem::out_of_memory);
  gpumem::nrt::memsys_statistics const s = tiny->statistics();
  EXPECT_EQ(s.alloc, s.free);
  EXPECT_GT(s.alloc, 0u);
}

TEST_F(strings_heap, managed_string_lifecycle_as_in_the_spec) {
  unsigned const threads = 1024;
  ms().reset_statistics();
  EXPECT_EQ(run(managed_make, 0, threads), "");
  gpumem::nrt::memsys_statistics s = ms().statistics();
  // Each thread: one allocation for the characters, one for the {meminfo, udf_string} block.
  EXPECT_EQ(s.alloc, 2u * threads);
  EXPECT_EQ(s.mi_alloc, threads);
  EXPECT_EQ(s.free, 0u) << "the output array still holds every string";
  EXPECT_EQ(s.mi_free, 0u);
  std::vector<NRT_MemInfo*> const mis = mis_->to_host();
  for (unsigned i = 0; i < threads; ++i)
    ASSERT_NE(mis[i], nullptr) << "thread " << i;
  EXPECT_EQ(run(managed_free, 0, threads), "");
  s = ms().statistics();
  EXPECT_EQ(s.mi_free, threads) << "the last decref runs the destructor";
  EXPECT_EQ(s.free, 2u * threads) << "the destructor frees the characters, NRT the block";
  EXPECT_TRUE(s.balanced());
}

TEST_F(strings_heap, make_managed_string_of_a_failed_string_is_null) {
  ms().reset_statistics();
  EXPECT_EQ(run(managed_failures, 0), "");
  EXPECT_EQ(ms().statistics().alloc, 0u);
  EXPECT_EQ(ms().statistics().mi_alloc, 0u);
}

TEST_F(strings_heap, make_managed_string_on_an_exhausted_heap_is_null_and_leaks_nothing) {
  auto tiny = make_memsys(2 * gpumem::MiB);
  EXPECT_EQ(run(*tiny, managed_exhausted, 0), "");
  EXPECT_THROW(tiny->check(), gpumem::out_of_memory);
  gpumem::nrt::memsys_statistics const s = tiny->statistics();
  EXPECT_EQ(s.alloc, out()[0] + 1) << "the hog's blocks and the characters; no block";
  EXPECT_EQ(s.alloc, s.free);
  EXPECT_EQ(s.mi_alloc, 0u);
  EXPECT_EQ(s.mi_free, 0u);
}

TEST_F(strings_heap, string_list_grows_by_doubling) {
  ms().reset_statistics();
  EXPECT_EQ(run(list_growth, 1000), "");
  // 8, 16, ..., 1024 (8 allocations), and the reserved list's one.
  EXPECT_EQ(ms().statistics().alloc, 9u);
  EXPECT_EQ(out()[0], 100u);
}

TEST_F(strings_heap, string_list_failures) {
  auto tiny = make_memsys(1 * gpumem::MiB);
  EXPECT_EQ(run(*tiny, list_failures, 1 << 20), "");
  EXPECT_GT(out()[0], 1000u);
  EXPECT_LT(out()[0], 1u << 20);
  EXPECT_THROW(tiny->check(), gpumem::out_of_memory);
  EXPECT_TRUE(tiny->statistics().balanced());
}

}  // namespace
