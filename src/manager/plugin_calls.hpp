// Internal to the manager layer: a call into a memory manager plugin's own code (its entry point,
// factory, constructor, interface_version(), name()), which may throw anything. gpumem's own errors
// pass as they are (typed, naming their value: a bad environment variable read by the first
// backend() call, say); anything else becomes a logic_error "<who> threw: <message>", naming the
// plugin.
#pragma once

#include <gpumem/core/error.hpp>

#include <exception>
#include <string>
#include <utility>

namespace gpumem::detail {

template <class F>
auto call_plugin(std::string const& who, F&& f) -> decltype(std::forward<F>(f)()) {
  try {
    return std::forward<F>(f)();
  } catch (error const&) {
    throw;
  } catch (std::exception const& e) {
    throw logic_error(who + " threw: " + e.what());
  } catch (...) {
    throw logic_error(who + " threw an exception that is not a std::exception");
  }
}

}  // namespace gpumem::detail
