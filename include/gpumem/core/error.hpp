// gpumem/core/error.hpp
//
// The exception hierarchy of gpumem's host API. Every error the library reports is one of these:
//
//   gpumem::error                     (base; derives from std::runtime_error)
//   ├── gpumem::logic_error           a broken precondition (bad argument, bad state)
//   ├── gpumem::not_supported         the operation is not provided (e.g. memory info of a pool)
//   ├── gpumem::cuda_error            a device operation failed; keeps the numeric code, call,
//   │                                 file:line
//   └── gpumem::out_of_memory         an allocation could not be satisfied; keeps requested bytes,
//                                     the name of the allocator and its current and peak use
//
// Device code never throws: it returns a status or null, and the host converts that into one of
// these. Destructors and deallocation functions are noexcept.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

namespace gpumem {

class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class logic_error : public error {
 public:
  using error::error;
};

class not_supported : public error {
 public:
  using error::error;
};

class cuda_error : public error {
 public:
  cuda_error(int code, std::string code_name, std::string call, char const* file, int line,
             std::string detail = {});
  int code() const noexcept { return code_; }
  std::string const& code_name() const noexcept { return code_name_; }
  std::string const& call() const noexcept { return call_; }
  char const* file() const noexcept { return file_; }
  int line() const noexcept { return line_; }

 private:
  int code_;
  std::string code_name_;
  std::string call_;
  char const* file_;
  int line_;
};

class out_of_memory : public error {
 public:
  // `allocator` names what ran out (a backend, a resource or a memory manager). `current_bytes` and
  // `peak_bytes` are that allocator's use when the request failed. `detail` adds what the allocator
  // knows beyond that (largest free block, fragmentation, ...).
  out_of_memory(std::size_t requested_bytes, std::string allocator, std::size_t current_bytes,
                std::size_t peak_bytes, std::string detail = {});
  std::size_t requested_bytes() const noexcept { return requested_; }
  std::string const& allocator() const noexcept { return allocator_; }
  std::size_t current_bytes() const noexcept { return current_; }
  std::size_t peak_bytes() const noexcept { return peak_; }

 private:
  std::size_t requested_;
  std::string allocator_;
  std::size_t current_;
  std::size_t peak_;
};

namespace detail {
[[noreturn]] void throw_logic_error(std::string const& message, char const* file, int line);
}  // namespace detail

}  // namespace gpumem

// Precondition check that is always on. The message should name the bad value.
#define GPUMEM_EXPECTS(condition, message)                                \
  do {                                                                    \
    if (!(condition)) {                                                   \
      ::gpumem::detail::throw_logic_error((message), __FILE__, __LINE__); \
    }                                                                     \
  } while (0)
