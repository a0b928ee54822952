// gpumem/mr/logging_adaptor.hpp
//
// Writes every allocation and free as one CSV line in RMM's log format, so logs from gpumem and
// from RMM replay with the same tools (log_replay.hpp, tools/replay_log):
//
//   Thread,Time,Action,Pointer,Size,Stream
//   140095306745664,1718031123.512345,allocate,0x7f3c8a000000,1024,0x0
//
// Thread: a numeric id of the calling thread; Time: seconds since the Unix epoch with
// microseconds; Action: allocate, free or "allocate failure"; Pointer and Stream in hexadecimal.
#pragma once

#include <gpumem/mr/memory_resource.hpp>

#include <fstream>
#include <iosfwd>
#include <memory>
#include <mutex>
#include <string>

namespace gpumem {

struct logging_options {
  // Flush after every line (slower; nothing is lost if the process dies).
  bool auto_flush = false;
};

// Adaptor: forwards to `upstream` and logs each call. A failed allocation is logged as
// "allocate failure" (pointer 0x0) and its exception propagates unchanged.
//
// Write errors (a full disk, a stream that throws) never change what the calls do: allocate still
// returns the block (the upstream holds it: dropping it would leak it), deallocate still frees.
// The stream is checked after every write and flush; the first failure is reported once through
// gpumem::log at error level (the log is incomplete from there on) and write_failed() says so.
//
// Ownership: references `upstream` (and the stream given), which must outlive the adaptor; owns
// the file when constructed with a path.
// Thread safety: thread safe; lines are written under a mutex, whole, in the order the calls
// finish.
// Stream semantics: those of the upstream; the stream column records the stream of the call.
class logging_adaptor final : public memory_resource {
 public:
  // Logs to `out` (the header line is written at once).
  logging_adaptor(memory_resource& upstream, std::ostream& out, logging_options options = {});
  // Logs to the file at `path` (created or truncated); throws gpumem::logic_error naming the path
  // when it cannot be opened.
  logging_adaptor(memory_resource& upstream, std::string const& path, logging_options options = {});
  // Flushes the log (a failure is reported, as any write's).
  ~logging_adaptor() override;

  memory_resource& upstream() const noexcept { return *upstream_; }
  // Flushes the stream; a failure is reported as a write's is (above).
  void flush();
  // True once a write or flush of the log failed.
  bool write_failed() const;
  static char const* header() noexcept { return "Thread,Time,Action,Pointer,Size,Stream"; }

  std::string name() const override { return "logging_adaptor over " + upstream_->name(); }
  memory_info get_memory_info() const override { return upstream_->get_memory_info(); }
  resource_properties properties() const noexcept override { return upstream_->properties(); }
  bool selects_own_device() const noexcept override { return upstream_->selects_own_device(); }
  int own_device() const noexcept override { return upstream_->own_device(); }
  device_backend* backend_in_use() const noexcept override { return upstream_->backend_in_use(); }

 private:
  void* do_allocate(std::size_t bytes, stream_handle stream) override;
  void do_deallocate(void* ptr, std::size_t bytes, stream_handle stream) noexcept override;
  void write(char const* action, void const* ptr, std::size_t bytes, stream_handle stream) noexcept;
  void put(std::string const& text) noexcept;
  // Under mutex_: true when the stream has failed and this is the first failure seen.
  bool first_failure_locked() noexcept;

  memory_resource* upstream_;
  std::unique_ptr<std::ofstream> file_;
  std::ostream* out_;
  logging_options options_;
  mutable std::mutex mutex_;
  bool write_failed_ = false;  // under mutex_
};

}  // namespace gpumem
