#include <gpumem/core/environment.hpp>
#include <gpumem/core/error.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>

namespace {
// Sets a variable for one test and restores the parsed snapshot afterwards.
class scoped_env {
 public:
  scoped_env(char const* name, char const* value) : name_(name) {
    if (char const* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value, 1);
  }
  ~scoped_env() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
    gpumem::reload_environment();
  }

 private:
  char const* name_;
  std::string old_;
  bool had_ = false;
};

std::string reload_error() {
  try {
    gpumem::reload_environment();
  } catch (gpumem::logic_error const& e) {
    return e.what();
  }
  return {};
}

// `value` in `name` is refused with a message naming both and the valid values (`valid`).
void expect_refused(char const* name, char const* value, char const* valid) {
  scoped_env bad(name, value);
  std::string const message = reload_error();
  EXPECT_NE(message.find(name), std::string::npos) << message;
  EXPECT_NE(message.find(std::string("'") + value + "'"), std::string::npos) << message;
  EXPECT_NE(message.find(valid), std::string::npos) << message;
}
}  // namespace

TEST(environment, defaults_match_numba) {
  ::unsetenv("NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT");
  ::unsetenv("NUMBA_CUDA_MAX_PENDING_DEALLOCS_RATIO");
  gpumem::reload_environment();
  auto const env = gpumem::environment_snapshot();
  EXPECT_EQ(env.max_pending_deallocs_count, 10u);
  EXPECT_DOUBLE_EQ(env.max_pending_deallocs_ratio, 0.2);
}

// Numba reads these with Python's int() and float(): blanks on either side are fine.
TEST(environment, reads_numba_variables) {
  for (auto const& [count_text, ratio_text] : {std::pair<char const*, char const*>{"20", "0.5"},
                                               {" 20 ", "0.5 \n"},
                                               {"+20", "5e-1"},
                                               {"2_0", " .5"},
                                               {"2_0", "0.5_0"},
                                               {"20", "5_0e-0_2"}}) {
    scoped_env count("NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT", count_text);
    scoped_env ratio("NUMBA_CUDA_MAX_PENDING_DEALLOCS_RATIO", ratio_text);
    gpumem::reload_environment();
    auto const env = gpumem::environment_snapshot();
    EXPECT_EQ(env.max_pending_deallocs_count, 20u) << "'" << count_text << "'";
    EXPECT_DOUBLE_EQ(env.max_pending_deallocs_ratio, 0.5) << "'" << ratio_text << "'";
  }
}

TEST(environment, bytes_accept_units) {
  scoped_env capacity("GPUMEM_HOST_DEVICE_CAPACITY", "64MiB");
  gpumem::reload_environment();
  EXPECT_EQ(gpumem::environment_snapshot().host_device_capacity, 64u << 20);
}

TEST(environment, invalid_value_names_variable_value_and_valid_values) {
  expect_refused("NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT", "ten", "non-negative integer");
  for (char const* ratio :
       {"-0.5", "nan", "0x1p-3", "half", "_0.5", "0.5_", "0._5", "0__5", "5_e-1", "5e_-1"})
    expect_refused("NUMBA_CUDA_MAX_PENDING_DEALLOCS_RATIO", ratio, "non-negative number");
  for (char const* count : {"2__0", "_20", "20_", "-1", "0x10"})
    expect_refused("NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT", count, "non-negative integer");
  {
    scoped_env above_one("NUMBA_CUDA_MAX_PENDING_DEALLOCS_RATIO", "1.5");  // Numba allows it
    EXPECT_EQ(reload_error(), "");
    EXPECT_DOUBLE_EQ(gpumem::environment_snapshot().max_pending_deallocs_ratio, 1.5);
  }
  {
    scoped_env bad("GPUMEM_DEVICE", "tpu");
    std::string const message = reload_error();
    EXPECT_NE(message.find("GPUMEM_DEVICE"), std::string::npos) << message;
    EXPECT_NE(message.find("cuda, host"), std::string::npos) << message;
  }
  {
    scoped_env bad("GPUMEM_HOST_DEVICE_CAPACITY", "lots");
    EXPECT_NE(reload_error().find("byte count"), std::string::npos);
  }
  expect_refused("GPUMEM_HOST_DEVICE_CAPACITY", "0", "above 0");
  // A device heap of 0 bytes was accepted here and refused by device_heap later, unnamed.
  for (char const* heap : {"0", "0 MiB", "0.0"})
    expect_refused("GPUMEM_DEVICE_HEAP_SIZE", heap, "above 0");
  expect_refused("NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT", " ", "non-negative integer");
}

TEST(environment, pool_max_cached_size_is_a_byte_count_up_to_4_gib) {
  {
    scoped_env limit("GPUMEM_POOL_MAX_CACHED_SIZE", "4MiB");
    gpumem::reload_environment();
    EXPECT_EQ(gpumem::environment_snapshot().pool_max_cached_size, 4u << 20);
  }
  {
    scoped_env limit("GPUMEM_POOL_MAX_CACHED_SIZE", "4GiB");
    gpumem::reload_environment();
    EXPECT_EQ(gpumem::environment_snapshot().pool_max_cached_size, std::size_t{4} << 30);
  }
  expect_refused("GPUMEM_POOL_MAX_CACHED_SIZE", "5GiB", "up to 4GiB");
  expect_refused("GPUMEM_POOL_MAX_CACHED_SIZE", "lots", "byte count");
  gpumem::reload_environment();
  EXPECT_EQ(gpumem::environment_snapshot().pool_max_cached_size, 256u << 10);
}

TEST(environment, table_lists_every_variable_once) {
  auto const& table = gpumem::environment_table();
  ASSERT_GE(table.size(), 8u);
  for (std::size_t i = 0; i < table.size(); ++i)
    for (std::size_t j = i + 1; j < table.size(); ++j)
      EXPECT_STRNE(table[i].name, table[j].name);
}

TEST(environment, string_heap_sizing_variables) {
  {
    scoped_env factor("GPUMEM_STRING_HEAP_FACTOR", "2.5");
    scoped_env per_row("GPUMEM_STRING_HEAP_BYTES_PER_ROW", "1KiB");
    gpumem::reload_environment();
    EXPECT_EQ(gpumem::environment_snapshot().string_heap_factor, 2.5);
    EXPECT_EQ(gpumem::environment_snapshot().string_heap_bytes_per_row, 1024u);
  }
  {
    scoped_env huge("GPUMEM_STRING_HEAP_FACTOR", "1e300");  // any finite number: the size saturates
    gpumem::reload_environment();
    EXPECT_EQ(gpumem::environment_snapshot().string_heap_factor, 1e300);
  }
  {
    scoped_env blanks("GPUMEM_STRING_HEAP_FACTOR", " 2.5\t");  // blanks, as for the other numbers
    gpumem::reload_environment();
    EXPECT_EQ(gpumem::environment_snapshot().string_heap_factor, 2.5);
  }
  for (char const* text : {"-1", "inf", "nan", "2x", " ", "2 5", "0x10"}) {
    scoped_env bad("GPUMEM_STRING_HEAP_FACTOR", text);
    EXPECT_NE(reload_error().find("GPUMEM_STRING_HEAP_FACTOR"), std::string::npos) << text;
  }
  {
    scoped_env bad("GPUMEM_STRING_HEAP_BYTES_PER_ROW", "many");
    EXPECT_NE(reload_error().find("GPUMEM_STRING_HEAP_BYTES_PER_ROW"), std::string::npos);
  }
  gpumem::reload_environment();
}
