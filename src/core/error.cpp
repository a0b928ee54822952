#include <gpumem/core/assert.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace gpumem {

namespace {
std::string cuda_error_message(int code, std::string const& code_name, std::string const& call,
                               char const* file, int line, std::string const& detail) {
  std::ostringstream out;
  out << call << " failed with " << code_name << " (" << code << ")";
  if (!detail.empty()) out << ": " << detail;
  out << " at " << (file ? file : "?") << ":" << line;
  return out.str();
}

std::string out_of_memory_message(std::size_t requested, std::string const& allocator,
                                  std::size_t current, std::size_t peak,
                                  std::string const& detail) {
  std::ostringstream out;
  out << "out of memory: " << allocator << " could not allocate " << format_bytes(requested)
      << "; in use " << format_bytes(current) << ", peak " << format_bytes(peak);
  if (!detail.empty()) out << "; " << detail;
  return out.str();
}
}  // namespace

cuda_error::cuda_error(int code, std::string code_name, std::string call, char const* file,
                       int line, std::string detail)
    : error(cuda_error_message(code, code_name, call, file, line, detail)),
      code_(code),
      code_name_(std::move(code_name)),
      call_(std::move(call)),
      file_(file),
      line_(line) {}

out_of_memory::out_of_memory(std::size_t requested_bytes, std::string allocator,
                             std::size_t current_bytes, std::size_t peak_bytes, std::string detail)
    : error(out_of_memory_message(requested_bytes, allocator, current_bytes, peak_bytes, detail)),
      requested_(requested_bytes),
      allocator_(std::move(allocator)),
      current_(current_bytes),
      peak_(peak_bytes) {}

namespace detail {
void throw_logic_error(std::string const& message, char const* file, int line) {
  std::ostringstream out;
  out << message << " (" << file << ":" << line << ")";
  throw logic_error(out.str());
}

void assertion_failed(char const* condition, char const* message, char const* file,
                      int line) noexcept {
  std::fprintf(stderr, "%s:%d: gpumem internal assertion failed: %s: %s\n", file, line, condition,
               message);
  std::fflush(stderr);
  std::abort();
}
}  // namespace detail

}  // namespace gpumem
