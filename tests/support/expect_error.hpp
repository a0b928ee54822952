// Checks that a call throws a gpumem error whose message contains a given text (the tests check
// that errors name the bad value, not only that something was thrown).
#pragma once

#include <gpumem/core/error.hpp>

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace gpumem::test {

template <class Error, class F>
void expect_error(F&& f, std::string const& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an exception containing \"" << needle << "\"";
  } catch (Error const& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message: " << e.what() << "\nexpected to contain: " << needle;
  }
}

template <class F>
void expect_logic_error(F&& f, std::string const& needle) {
  expect_error<logic_error>(std::forward<F>(f), needle);
}

}  // namespace gpumem::test
