// The extension's threads (module.hpp): gil_release, which lets the threads inside a call that
// released the GIL settle when the interpreter exits, and contexts_mutex with its holders
// context_use and context_change, which keep a context from being destroyed while another Python
// thread uses it.
#include <Python.h>
#include <pthread.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <shared_mutex>
#include <system_error>
#include <thread>

#include "module.hpp"

namespace gpumem::python {
namespace {

// The threads inside a gil_release, and the exit's mark (gil_release's comment).
struct released_calls {
  std::mutex mutex;
  std::condition_variable changed;
  std::size_t inside = 0;  // threads between SaveThread and the end of RestoreThread
  std::size_t parked = 0;  // of those, threads waiting for the process to end
  bool exiting = false;
  unsigned long main_thread = 0;  // the thread that finalises (it takes the GIL back)
};

// Never destroyed: used until the end. A child made by fork() starts both afresh (the parent's
// may be held, or count calls, by threads the child does not have); it leaks the parent's.
released_calls* released_now = new released_calls();
std::shared_mutex* contexts_mutex_now = new std::shared_mutex();

released_calls& released() {
  return *released_now;
}

// pthread_atfork's handler in the child, which has the forking thread alone. That thread is not
// inside a gil_release nor a holder of contexts_mutex: fork is called from Python, with the GIL
// and without a context_use or context_change (neither is held while Python code runs).
void after_fork_in_child() {
  released_now = new released_calls();
  contexts_mutex_now = new std::shared_mutex();
}

// Whether a thread other than the main one is still running Python (a daemon thread: atexit runs
// after the interpreter joined the others).
bool other_threads_alive() {
  try {
    nb::module_ const threading = nb::module_::import_("threading");
    nb::object const main = threading.attr("main_thread")();
    for (nb::handle t : threading.attr("enumerate")())
      if (!t.is(main) && nb::cast<bool>(t.attr("is_alive")())) return true;
    return false;
  } catch (std::exception const&) {  // threading unusable: say yes, so no false leak report
    return true;
  }
}

// Python's atexit (registered at import; runs on the main thread with the GIL, before the
// interpreter finalises). A call that never ends would hold the exit, so it waits 30 s at most.
// Objects that daemon threads still hold (parked threads included) are never destroyed, by
// Python's design; nanobind would list each at exit as a leak, so its report is turned off then,
// and only then: without such threads what it lists is a leak.
void settle_released_calls() {
  released_calls& r = released();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    r.exiting = true;
    r.main_thread = PyThread_get_thread_ident();
  }
  bool threads_left = false;
  PyThreadState* const state = PyEval_SaveThread();
  {
    std::unique_lock<std::mutex> lock(r.mutex);
    r.changed.wait_for(lock, std::chrono::seconds(30), [&] { return r.inside == r.parked; });
    threads_left = r.inside > 0;  // parked, or still inside after the wait
  }
  PyEval_RestoreThread(state);
  if (threads_left || other_threads_alive()) nb::set_leak_warnings(false);
}

}  // namespace

gil_release::gil_release() {
  released_calls& r = released();
  {
    std::lock_guard<std::mutex> lock(r.mutex);
    ++r.inside;
  }
  state_ = PyEval_SaveThread();
}

gil_release::~gil_release() {
  released_calls& r = released();
  {
    std::unique_lock<std::mutex> lock(r.mutex);
    if (r.exiting && PyThread_get_thread_ident() != r.main_thread) {
      if (before_parking_ != nullptr) before_parking_();  // it holds nothing of gpumem's parked
      ++r.parked;
      r.changed.notify_all();
      lock.unlock();
      for (;;)
        std::this_thread::sleep_for(std::chrono::hours(1));  // the process is ending
    }
  }
  PyEval_RestoreThread(state_);
  std::lock_guard<std::mutex> lock(r.mutex);
  --r.inside;
  r.changed.notify_all();
}

std::shared_mutex& contexts_mutex() noexcept {
  return *contexts_mutex_now;
}

namespace {

// Whether the calling thread holds the GIL. Before CPython 3.12 the "current" thread state is the
// interpreter's, the state of whichever thread holds the GIL: PyThreadState_GetDict() is then not
// null on a thread that released it (flush() and reset() release it before their context_use),
// which then "released" the GIL again, swapping out the state of the thread that held it, and
// Python crashed. PyGILState_Check compares with the calling thread's own state; the stable ABI
// the extension is built against from 3.12 on lacks it, and there the current thread state is the
// calling thread's own (PyThreadState_GetDict gives null without one, raising nothing).
bool holds_gil() noexcept {
#if defined(Py_LIMITED_API)
  return PyThreadState_GetDict() != nullptr;
#else
  return PyGILState_Check() != 0;
#endif
}

}  // namespace

context_use::context_use() {
  std::shared_mutex& m = contexts_mutex();
  if (m.try_lock_shared()) return;
  if (holds_gil()) {
    gil_release unlocked;  // the change in progress may need the GIL
    m.lock_shared();
    // Parked at exit (the lock taken inside the gil_release), the thread lets the lock go: the
    // exit's own close() or set_memory_manager() (an atexit handler, a finalizer) takes it.
    unlocked.before_parking([]() noexcept { contexts_mutex().unlock_shared(); });
  } else {
    m.lock_shared();
  }
}

void add_thread_handling(nb::module_& m) {
  (void)m;
  nb::module_::import_("atexit").attr("register")(nb::cpp_function(&settle_released_calls));
  // A child of a process whose other threads were inside flush() or close() would otherwise wait
  // forever for contexts_mutex, or 30 s at its exit for calls it does not have.
  if (int const failed = pthread_atfork(nullptr, nullptr, &after_fork_in_child))
    throw std::system_error(failed, std::generic_category(), "gpumem: pthread_atfork");
}

}  // namespace gpumem::python
