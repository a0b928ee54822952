// Contexts and the choice of memory manager: set_memory_manager (version check at once, affects
// new contexts only), close(), GPUMEM_MEMORY_MANAGER with built-in names and plugin libraries built
// by this test directory, and the errors for bad values.
#include <gpumem/core/environment.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/manager/default_memory_manager.hpp>
#include <gpumem/manager/memory_manager_registry.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>

#include "scoped_backend.hpp"
#include "test_plugin_manager.hpp"

namespace gpumem {
namespace {

// Counts constructions and initialisations; reports a settable interface version.
class counting_manager : public test::test_plugin_manager {
 public:
  explicit counting_manager(context& owner) : test::test_plugin_manager(owner) { ++constructed; }
  void initialize() override { ++initialized; }
  int interface_version() const override { return version; }
  std::string name() const override { return "counting"; }
  static inline int constructed = 0;
  static inline int initialized = 0;
  static inline int version = 1;
};

memory_manager_factory counting_factory() {
  return [](context& c) { return std::make_unique<counting_manager>(c); };
}

// Sets an environment variable (or unsets it) and makes gpumem re-read the environment and
// re-create its contexts; restores everything on destruction.
class scoped_manager_env {
 public:
  explicit scoped_manager_env(std::optional<std::string> value) { apply(value); }
  ~scoped_manager_env() { apply(std::nullopt); }

 private:
  static void apply(std::optional<std::string> const& value) {
    if (value)
      ::setenv("GPUMEM_MEMORY_MANAGER", value->c_str(), 1);
    else
      ::unsetenv("GPUMEM_MEMORY_MANAGER");
    reload_environment();
    set_memory_manager({});
    close();
  }
};

class context_test : public ::testing::Test {
 protected:
  void SetUp() override {
    counting_manager::constructed = 0;
    counting_manager::initialized = 0;
    counting_manager::version = 1;
  }
  void TearDown() override {
    set_memory_manager({});
    close();
  }
};

TEST_F(context_test, current_context_is_created_once_with_an_initialized_default_manager) {
  close();
  context& a = current_context();
  context& b = current_context();
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(a.device(), backend().current_device());
  EXPECT_EQ(a.memory_manager().name(), "default");
  EXPECT_EQ(&a.memory_manager().owning_context(), &a);
  EXPECT_EQ(&get_context(a.device()), &a);
  EXPECT_THROW((void)get_context(backend().device_count()), logic_error);
  EXPECT_THROW((void)get_context(-1), logic_error);
}

TEST_F(context_test, find_context_finds_existing_contexts_and_creates_none) {
  close();
  int const device = backend().current_device();
  EXPECT_EQ(find_context(device), nullptr);
  EXPECT_EQ(find_context(-1), nullptr);
  EXPECT_EQ(find_context(backend().device_count()), nullptr);
  EXPECT_EQ(find_context(device), nullptr) << "asking created nothing";
  context& made = get_context(device);
  EXPECT_EQ(find_context(device), &made);
  close(device);
  EXPECT_EQ(find_context(device), nullptr);
}

// A manager whose initialize() looks its context up through current_context() (not
// owning_context()) while that context is being created: an error naming the device, not a second
// creation of the context, whose manager asks again, until the stack overflows.
class context_seeking_manager : public counting_manager {
 public:
  using counting_manager::counting_manager;
  void initialize() override {
    counting_manager::initialize();
    (void)current_context();
  }
};

TEST_F(context_test, a_manager_asking_for_the_context_being_created_is_an_error) {
  set_memory_manager([](context& c) { return std::make_unique<context_seeking_manager>(c); });
  close();
  int const device = backend().current_device();
  try {
    (void)current_context();
    FAIL() << "expected logic_error";
  } catch (logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("device " + std::to_string(device) + " is being created"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(counting_manager::initialized, 1) << "the context was created once, not again inside";
  EXPECT_EQ(find_context(device), nullptr);
  set_memory_manager({});
  EXPECT_EQ(current_context().memory_manager().name(), "default") << "the table is usable again";
}

TEST_F(context_test, set_memory_manager_probes_the_version_once_without_initializing) {
  set_memory_manager(counting_factory());
  EXPECT_EQ(counting_manager::constructed, 1) << "one probe instance";
  EXPECT_EQ(counting_manager::initialized, 0) << "the probe is never initialised";
}

TEST_F(context_test, a_version_mismatch_names_both_versions) {
  counting_manager::version = 2;
  try {
    set_memory_manager(counting_factory());
    FAIL() << "expected logic_error";
  } catch (logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("has version 2 - version 1 required"), std::string::npos)
        << e.what();
  }
  close();
  EXPECT_EQ(current_context().memory_manager().name(), "default") << "the bad factory was not set";
}

TEST_F(context_test, set_memory_manager_affects_contexts_created_afterwards) {
  close();
  context& before = current_context();
  EXPECT_EQ(before.memory_manager().name(), "default");
  set_memory_manager(counting_factory());
  EXPECT_EQ(current_context().memory_manager().name(), "default")
      << "existing contexts keep theirs";
  close();
  context& after = current_context();
  EXPECT_EQ(after.memory_manager().name(), "counting");
  EXPECT_EQ(counting_manager::initialized, 1);
  (void)current_context();
  EXPECT_EQ(counting_manager::initialized, 1) << "one context, one manager";
}

TEST_F(context_test, close_flushes_pending_frees) {
  // A private device: a real GPU's free memory also moves with other processes.
  test::scoped_backend device(8 << 20);
  context& ctx = current_context();
  auto& manager = dynamic_cast<default_memory_manager&>(ctx.memory_manager());
  std::size_t const free_before = backend().get_memory_info().free;
  (void)manager.memalloc(1 << 20);
  ASSERT_EQ(ctx.pending_deallocations().size(), 1u);
  close();
  EXPECT_EQ(backend().get_memory_info().free, free_before);
}

TEST_F(context_test, the_plugin_library_is_loaded_through_the_environment) {
  scoped_manager_env env(std::string(GPUMEM_TEST_PLUGIN_PATH));
  context& ctx = current_context();
  EXPECT_EQ(ctx.memory_manager().name(), "test_plugin");
  memory_pointer p = ctx.memory_manager().memalloc(4096);
  EXPECT_NE(p.device_pointer(), nullptr);
  EXPECT_THROW((void)ctx.memory_manager().get_memory_info(), not_supported);
}

TEST_F(context_test, built_in_names_are_accepted) {
  {
    scoped_manager_env env(std::string("host_only"));
    EXPECT_EQ(current_context().memory_manager().name(), "host_only");
  }
  {
    scoped_manager_env env(std::string("default"));
    EXPECT_EQ(current_context().memory_manager().name(), "default");
  }
  {
    scoped_manager_env env(std::string(""));
    EXPECT_EQ(current_context().memory_manager().name(), "default");
  }
}

// Each bad value of GPUMEM_MEMORY_MANAGER is an error naming the value and the reason.
void expect_bad_value(std::string const& value, std::string const& reason) {
  scoped_manager_env env(value);
  try {
    (void)current_context();
    FAIL() << "expected logic_error for " << value;
  } catch (logic_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("GPUMEM_MEMORY_MANAGER=" + value), std::string::npos) << what;
    EXPECT_NE(what.find(reason), std::string::npos) << what;
  }
}

TEST_F(context_test, an_unknown_name_is_an_error_listing_the_built_ins) {
  expect_bad_value("no_such_manager", "unknown memory manager");
  expect_bad_value("no_such_manager", "default, host_only");
}

TEST_F(context_test, a_name_from_elsewhere_is_named_by_its_origin_not_the_variable) {
  try {
    (void)load_memory_manager("no_such_manager", "set_memory_manager");
    FAIL() << "an unknown name was accepted";
  } catch (logic_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("set_memory_manager('no_such_manager'): unknown memory manager"),
              std::string::npos)
        << what;
    EXPECT_EQ(what.find("GPUMEM_MEMORY_MANAGER="), std::string::npos) << what;
  }
}

TEST_F(context_test, a_name_holding_a_nul_byte_is_refused_not_cut) {
  // "/x/lib.so\0junk" would load /x/lib.so, and every message would quote the cut name.
  try {
    (void)load_memory_manager(std::string(GPUMEM_LIBRARY_PATH) + std::string(1, '\0') + "junk");
    FAIL() << "a name with a NUL byte was accepted";
  } catch (logic_error const& e) {
    EXPECT_NE(std::string(e.what()).find("NUL byte at offset " +
                                         std::to_string(std::strlen(GPUMEM_LIBRARY_PATH))),
              std::string::npos)
        << e.what();
  }
}

TEST_F(context_test, a_nonexistent_library_is_an_error_with_the_dlerror) {
  expect_bad_value("/nonexistent/libgpumem_no_plugin.so", "cannot load the shared library");
  expect_bad_value("/nonexistent/libgpumem_no_plugin.so", "No such file");
}

TEST_F(context_test, a_library_without_the_entry_point_is_an_error) {
  expect_bad_value(GPUMEM_LIBRARY_PATH, "does not export gpumem_memory_manager_factory");
}

TEST_F(context_test, a_plugin_library_with_another_interface_version_is_an_error) {
  expect_bad_value(GPUMEM_TEST_PLUGIN_V2_PATH, "has version 2 - version 1 required");
}

// A plugin's own code that throws (anything) is a logic_error naming the plugin, with the message.
TEST_F(context_test, a_plugin_whose_entry_point_throws_is_an_error) {
  expect_bad_value(GPUMEM_TEST_PLUGIN_THROWS1_PATH, "the entry point fails");
}

TEST_F(context_test, a_plugin_whose_constructor_throws_is_an_error) {
  expect_bad_value(GPUMEM_TEST_PLUGIN_THROWS2_PATH, "the constructor fails");
}

TEST_F(context_test, a_plugin_that_throws_a_non_standard_exception_is_an_error) {
  expect_bad_value(GPUMEM_TEST_PLUGIN_THROWS3_PATH, "not a std::exception");
}

TEST_F(context_test, a_factory_given_to_set_memory_manager_that_throws_is_an_error) {
  try {
    set_memory_manager([](context&) -> std::unique_ptr<memory_manager> {
      throw std::runtime_error("factory fails");
    });
    FAIL() << "expected logic_error";
  } catch (logic_error const& e) {
    std::string const what = e.what();
    EXPECT_NE(what.find("given to set_memory_manager"), std::string::npos) << what;
    EXPECT_NE(what.find("factory fails"), std::string::npos) << what;
  }
}

// gpumem's own errors thrown by a plugin's code or a probed manager pass as they are (67eb489):
// same type and fields, the message not wrapped in a logic_error naming the plugin.
TEST_F(context_test, a_plugin_entry_point_throwing_a_gpumem_error_passes_it_unchanged) {
  scoped_manager_env env(std::string(GPUMEM_TEST_PLUGIN_THROWS4_PATH));
  try {
    (void)current_context();
    FAIL() << "expected cuda_error";
  } catch (cuda_error const& e) {
    EXPECT_EQ(e.code(), 2);
    EXPECT_EQ(e.code_name(), "cudaErrorMemoryAllocation");
    EXPECT_EQ(e.call(), "test plugin entry point");
    std::string const what = e.what();
    EXPECT_NE(what.find("the entry point's device call fails"), std::string::npos) << what;
    EXPECT_EQ(what.find("GPUMEM_MEMORY_MANAGER"), std::string::npos) << what;
  } catch (std::exception const& e) {
    FAIL() << "not a cuda_error: " << e.what();
  }
}

TEST_F(context_test, a_plugin_manager_throwing_a_gpumem_error_on_the_probe_passes_it_unchanged) {
  scoped_manager_env env(std::string(GPUMEM_TEST_PLUGIN_THROWS5_PATH));
  try {
    (void)current_context();
    FAIL() << "expected out_of_memory";
  } catch (out_of_memory const& e) {
    EXPECT_EQ(e.requested_bytes(), 12345u);
    EXPECT_EQ(e.allocator(), "test plugin pool");
    std::string const what = e.what();
    EXPECT_NE(what.find("the constructor's reserve fails"), std::string::npos) << what;
    EXPECT_EQ(what.find("GPUMEM_MEMORY_MANAGER"), std::string::npos) << what;
    EXPECT_EQ(what.find("probing the manager threw"), std::string::npos) << what;
  } catch (std::exception const& e) {
    FAIL() << "not an out_of_memory: " << e.what();
  }
}

TEST_F(context_test, a_factory_given_to_set_memory_manager_throwing_a_gpumem_error_passes_it) {
  std::string const message = "factory precondition";
  try {
    set_memory_manager(
        [&](context&) -> std::unique_ptr<memory_manager> { throw logic_error(message); });
    FAIL() << "expected logic_error";
  } catch (logic_error const& e) {
    EXPECT_EQ(std::string(e.what()), message);  // not wrapped: no "probing the manager threw"
  }
  try {
    set_memory_manager([](context&) -> std::unique_ptr<memory_manager> {
      throw cuda_error(700, "cudaErrorIllegalAddress", "factory", __FILE__, __LINE__);
    });
    FAIL() << "expected cuda_error";
  } catch (cuda_error const& e) {
    EXPECT_EQ(e.code(), 700);
  } catch (std::exception const& e) {
    FAIL() << "not a cuda_error: " << e.what();
  }
}

TEST_F(context_test, registered_managers_are_found_by_name) {
  register_memory_manager("counting_for_test", counting_factory());
  auto names = registered_memory_managers();
  EXPECT_NE(std::find(names.begin(), names.end(), "counting_for_test"), names.end());
  scoped_manager_env env(std::string("counting_for_test"));
  EXPECT_EQ(current_context().memory_manager().name(), "counting");
  EXPECT_THROW(register_memory_manager("a/b", counting_factory()), logic_error);
  EXPECT_THROW(register_memory_manager("empty", {}), logic_error);
}

TEST_F(context_test, the_probe_context_has_no_manager_to_hand_out) {
  // A constructor that reaches for its context's manager fails on the probe, with a message.
  struct greedy : counting_manager {
    explicit greedy(context& c) : counting_manager(c) { (void)c.memory_manager(); }
  };
  EXPECT_THROW(set_memory_manager([](context& c) { return std::make_unique<greedy>(c); }),
               logic_error);
}

}  // namespace
}  // namespace gpumem
