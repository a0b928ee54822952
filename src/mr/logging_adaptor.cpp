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
  put(std::string(header()) + '\n');
}

logging_adaptor::logging_adaptor(memory_resource& upstream, std::string const& path,
                                 logging_options options)
    : upstream_(&upstream),
      file_(std::make_unique<std::ofstream>(path, std::ios::out | std::ios::trunc)),
      out_(file_.get()),
      options_(options) {
  GPUMEM_EXPECTS(file_->is_open(), "logging_adaptor: cannot open the log file '" + path + "'");
  put(std::string(header()) + '\n');
}

logging_adaptor::~logging_adaptor() {
  try {
    flush();  // buffered lines reach the file here: a failure must not go unseen
  } catch (...) {
  }
}

bool logging_adaptor::write_failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return write_failed_;
}

bool logging_adaptor::first_failure_locked() noexcept {
  if (write_failed_ || out_->good()) return false;
  write_failed_ = true;
  return true;
}

// Reported outside mutex_ (a log sink may take its time), once: after the first failure the
// stream stays failed and every later line is lost the same way.
void logging_adaptor::flush() {
  bool report = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      out_->flush();
    } catch (...) {  // a stream with exceptions enabled: its state says what happened
    }
    report = first_failure_locked();
  }
  if (report) log(log_level::error, name() + ": flushing the log failed; the log is incomplete");
}

// Writes `text` whole (and flushes with auto_flush); never throws.
void logging_adaptor::put(std::string const& text) noexcept {
  bool report = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      *out_ << text;
      if (options_.auto_flush) out_->flush();
    } catch (...) {  // a stream with exceptions enabled: its state says what happened
    }
    report = first_failure_locked();
  }
  if (report) {
    try {
      log(log_level::error, name() + ": writing the log failed; lines from here on are lost");
    } catch (...) {  // name() allocates
      log(log_level::error, "logging_adaptor: writing the log failed; lines from here on are lost");
    }
  }
}

void logging_adaptor::write(char const* action, void const* ptr, std::size_t bytes,
                            stream_handle stream) noexcept {
  std::string line;
  try {
    line = std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
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
  } catch (...) {
    // Out of host memory: a literal, since building any other message could throw again here.
    log(log_level::error, "logging_adaptor: cannot make a log line (out of host memory)");
    return;
  }
  put(line);
}

// write() never throws: a block the upstream handed out always reaches the caller.
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
  write("free", ptr, bytes, stream);
  upstream_->deallocate(ptr, bytes, stream);
}

}  // namespace gpumem
