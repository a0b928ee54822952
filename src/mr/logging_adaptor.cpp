#include "resource_support.hpp"

#include <gpumem/core/error.hpp>
#include <gpumem/mr/logging_adaptor.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <ostream>
#include <thread>

namespace gpumem {

namespace {
std::string time_text() {
  auto const now = std::chrono::system_clock::now().time_since_epoch();
  auto const micros = std::chrono::duration_cast<std::chrono::microseconds>(now).count();
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, "%lld.%06lld", static_cast<long long>(micros / 1000000),
                static_cast<long long>(micros % 1000000));
  return buffer;
}
}  // namespace

logging_adaptor::logging_adaptor(memory_resource& upstream, std::ostream& out,
                                 logging_options options)
    : upstream_(&upstream), out_(&out), options_(options) {
  *out_ << header() << '\n';
  if (options_.auto_flush) out_->flush();
}

logging_adaptor::logging_adaptor(memory_resource& upstream, std::string const& path,
                                 logging_options options)
    : upstream_(&upstream),
      file_(std::make_unique<std::ofstream>(path, std::ios::out | std::ios::trunc)),
      out_(file_.get()),
      options_(options) {
  GPUMEM_EXPECTS(file_->is_open(), "logging_adaptor: cannot open the log file '" + path + "'");
  *out_ << header() << '\n';
  if (options_.auto_flush) out_->flush();
}

void logging_adaptor::flush() {
  std::lock_guard<std::mutex> lock(mutex_);
  out_->flush();
}

void logging_adaptor::write(char const* action, void const* ptr, std::size_t bytes,
                            stream_handle stream) {
  std::string line = std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
  line += ',';
  line += time_text();
  line += ',';
  line += action;
  line += ',';
  line += detail::pointer_text(ptr);
  line += ',';
  line += std::to_string(bytes);
  line += ',';
  line += detail::stream_text(stream);
  line += '\n';
  std::lock_guard<std::mutex> lock(mutex_);
  *out_ << line;
  if (options_.auto_flush) out_->flush();
}

void* logging_adaptor::do_allocate(std::size_t bytes, stream_handle stream) {
  void* p;
  try {
    p = upstream_->allocate(bytes, stream);
  } catch (...) {
    write("allocate failure", nullptr, bytes, stream);
    throw;
  }
  write("allocate", p, bytes, stream);
  return p;
}

void logging_adaptor::do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept {
  // Logged before the upstream sees the free: once it has, another thread may get the same
  // pointer and log its allocation, and the log must show the free first.
  try {
    write("free", ptr, bytes, stream);
  } catch (std::exception const& e) {
    log(log_level::error, std::string("logging_adaptor: cannot write the log: ") + e.what());
  }
  upstream_->deallocate(ptr, bytes, stream);
}

}  // namespace gpumem
