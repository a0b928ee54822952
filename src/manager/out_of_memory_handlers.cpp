// The per-device table of out-of-memory handlers (see out_of_memory_handlers.hpp). Handlers are
// held by shared_ptr so that a call can run without the table's mutex while another thread
// unregisters; a thread-local flag makes the handlers non-reentrant per thread.
#include <gpumem/core/error.hpp>
#include <gpumem/core/logging.hpp>
#include <gpumem/manager/out_of_memory_handlers.hpp>

#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace gpumem {
namespace {

struct handler_table {
  std::mutex mutex;
  std::uint64_t next_id = 1;
  // device -> (id -> handler); ordered by id, so handlers run in registration order.
  std::map<int, std::map<std::uint64_t, std::shared_ptr<out_of_memory_handler const>>> handlers;
};

handler_table& table() {
  // Never destroyed: registrations held by static objects may be released after main returns.
  static auto* t = new handler_table;
  return *t;
}

thread_local bool inside_handler = false;

}  // namespace

out_of_memory_registration::out_of_memory_registration(out_of_memory_registration&& other) noexcept
    : device_(other.device_), id_(other.id_) {
  other.id_ = 0;
}

out_of_memory_registration& out_of_memory_registration::operator=(
    out_of_memory_registration&& other) noexcept {
  if (this != &other) {
    reset();
    device_ = other.device_;
    id_ = other.id_;
    other.id_ = 0;
  }
  return *this;
}

void out_of_memory_registration::reset() noexcept {
  if (id_ == 0) return;
  handler_table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.handlers.find(device_);
  if (it != t.handlers.end()) {
    it->second.erase(id_);
    if (it->second.empty()) t.handlers.erase(it);
  }
  id_ = 0;
}

out_of_memory_registration add_out_of_memory_handler(int device, out_of_memory_handler handler) {
  GPUMEM_EXPECTS(device >= 0,
                 "add_out_of_memory_handler: device " + std::to_string(device) + " is negative");
  GPUMEM_EXPECTS(static_cast<bool>(handler), "add_out_of_memory_handler: the handler is empty");
  handler_table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  std::uint64_t const id = t.next_id++;
  t.handlers[device][id] = std::make_shared<out_of_memory_handler const>(std::move(handler));
  return out_of_memory_registration(device, id);
}

std::size_t out_of_memory_handler_count(int device) {
  handler_table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.handlers.find(device);
  return it == t.handlers.end() ? 0 : it->second.size();
}

namespace detail {

std::size_t run_out_of_memory_handlers(int device, std::size_t bytes) noexcept {
  if (inside_handler) return 0;
  std::vector<std::shared_ptr<out_of_memory_handler const>> to_ask;
  {
    handler_table& t = table();
    std::lock_guard<std::mutex> lock(t.mutex);
    auto it = t.handlers.find(device);
    if (it == t.handlers.end()) return 0;
    for (auto const& entry : it->second)
      to_ask.push_back(entry.second);
  }
  inside_handler = true;
  std::size_t released = 0;
  for (auto const& handler : to_ask) {
    try {
      released += (*handler)(bytes);
    } catch (std::exception const& e) {
      log(log_level::error, std::string("out-of-memory handler failed: ") + e.what());
    } catch (...) {
      log(log_level::error, "out-of-memory handler failed with an unknown exception");
    }
  }
  inside_handler = false;
  return released;
}

}  // namespace detail
}  // namespace gpumem
