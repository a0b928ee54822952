// The host side of the device heap: carving the region, and reading back what kernels recorded.
#include <gpumem/core/environment.hpp>
#include <gpumem/core/error.hpp>
#include <gpumem/core/units.hpp>
#include <gpumem/cuda/device_backend.hpp>
#include <gpumem/cuda/device_malloc_heap.hpp>
#include <gpumem/manager/context.hpp>
#include <gpumem/nrt/device_heap.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <sstream>
#include <utility>
#include <vector>

namespace gpumem::nrt {

namespace detail {
std::uint32_t host_shard_hint() noexcept {
  static std::atomic<std::uint32_t> next{0};
  thread_local std::uint32_t const mine = next.fetch_add(1, std::memory_order_relaxed);
  return mine;
}
}  // namespace detail

namespace {

constexpr std::size_t region_alignment = 256;

std::size_t align_up(std::size_t v, std::size_t a) {
  return (v + a - 1) / a * a;
}

unsigned log2_exact(std::size_t v) {
  unsigned s = 0;
  while ((std::size_t{1} << s) < v)
    ++s;
  return s;
}

// Offsets of the metadata arrays inside the region, for `slabs` slabs and `shards` shards (and,
// when `checked`, the freed bits: one per 16 bytes of slab).
struct layout {
  std::size_t counters = 0, slots = 0, bitmap = 0, remaining = 0, slab_info = 0, freed = 0;
  std::size_t slabs = 0, end = 0;
};

layout plan(std::size_t slabs, unsigned shards, std::size_t slab_bytes, bool checked) {
  layout l;
  l.counters = 0;
  l.slots = align_up(sizeof(detail::heap_counters), region_alignment);
  l.bitmap = align_up(l.slots + std::size_t{detail::slab_class_count} * shards * 8, 8);
  l.remaining = align_up(l.bitmap + (slabs + 63) / 64 * 8, 8);
  l.slab_info = l.remaining + slabs * 4;
  l.freed = align_up(l.slab_info + slabs * 4, 8);
  l.slabs = align_up(l.freed + (checked ? slabs * (slab_bytes / 128) : 0), region_alignment);
  l.end = l.slabs + slabs * slab_bytes;
  return l;
}

template <class T>
T read_device(T const* device_ptr) {
  T value{};
  backend().copy(&value, device_ptr, sizeof(T));
  return value;
}

template <class T>
void write_device(T* device_ptr, T const& value) {
  backend().copy(device_ptr, &value, sizeof(T));
}

}  // namespace

device_heap::device_heap(heap_options options) {
  if (options.bytes == 0) options.bytes = environment_snapshot().device_heap_size;
  std::size_t const region = options.kind == heap_kind::cuda_malloc
                                 ? align_up(sizeof(detail::heap_counters), region_alignment)
                                 : options.bytes;
  memory_ = current_context().memory_manager().memalloc(region);
  base_ = memory_.device_pointer();
  bytes_ = region;
  build(options);
}

device_heap::device_heap(void* base, std::size_t bytes, heap_options options) : base_(base) {
  GPUMEM_EXPECTS(base != nullptr, "device_heap: the region must not be null");
  GPUMEM_EXPECTS(reinterpret_cast<std::uintptr_t>(base) % region_alignment == 0,
                 "device_heap: the region must be 256-byte aligned");
  if (options.bytes == 0) options.bytes = bytes;
  GPUMEM_EXPECTS(options.kind == heap_kind::cuda_malloc || options.bytes <= bytes,
                 "device_heap: options.bytes " + std::to_string(options.bytes) +
                     " exceeds the region of " + std::to_string(bytes) + " bytes");
  bytes_ = options.kind == heap_kind::cuda_malloc ? bytes : options.bytes;
  build(options);
}

void device_heap::build(heap_options const& options) {
  auto* const base = static_cast<char*>(base_);
  ref_.kind = options.kind;
  ref_.counters = reinterpret_cast<detail::heap_counters*>(base);
  GPUMEM_EXPECTS(bytes_ >= sizeof(detail::heap_counters),
                 "device_heap: a region of " + std::to_string(bytes_) + " bytes is too small");
  if (options.kind == heap_kind::cuda_malloc) {
    ref_.slab_shift = 0;
    ref_.shard_count = 1;
    bytes_ = std::max(bytes_, options.bytes);
    gpumem::detail::set_device_malloc_heap_size(options.bytes);
    backend().fill(base, 0, sizeof(detail::heap_counters));
    return;
  }
  std::size_t const slab = options.slab_bytes;
  GPUMEM_EXPECTS(slab >= 64 * KiB && (slab & (slab - 1)) == 0 && slab <= 64 * MiB,
                 "device_heap: slab_bytes must be a power of two in [64 KiB, 64 MiB], got " +
                     std::to_string(slab));
  GPUMEM_EXPECTS(options.shards <= 4096,
                 "device_heap: shards must be at most 4096, got " + std::to_string(options.shards));
  // At most no_slab - 1 slabs (the slot word's index has 32 bits): a larger region serves that
  // many. With slabs < 2^32 of at most 64 MiB and at most 4096 shards, no term of plan() comes
  // near SIZE_MAX.
  std::size_t slabs = std::min<std::size_t>(bytes_ / slab, detail::no_slab - 1);
  unsigned shards = options.shards;
  if (shards == 0) {
    // Each shard may hold one slab per class; keep that under an eighth of the heap.
    std::size_t const fit = slabs / (8 * std::size_t{detail::slab_class_count});
    shards = static_cast<unsigned>(std::clamp<std::size_t>(fit, 1, 128));
  }
  bool const checked = options.check_frees || environment_snapshot().debug_memory;
  while (slabs > 0 && plan(slabs, shards, slab, checked).end > bytes_)
    --slabs;
  GPUMEM_EXPECTS(slabs >= 1 && slabs < detail::no_slab,
                 "device_heap: " + format_bytes(bytes_) + " holds no slab of " +
                     format_bytes(slab) + " after its metadata; give it more bytes");
  layout const l = plan(slabs, shards, slab, checked);
  ref_.slab_shift = log2_exact(slab);
  ref_.slab_count = static_cast<std::uint32_t>(slabs);
  ref_.shard_count = shards;
  ref_.bitmap_words = static_cast<std::uint32_t>((slabs + 63) / 64);
  ref_.slabs = base + l.slabs;
  ref_.bitmap = reinterpret_cast<unsigned long long*>(base + l.bitmap);
  ref_.remaining = reinterpret_cast<std::uint32_t*>(base + l.remaining);
  ref_.slab_info = reinterpret_cast<std::uint32_t*>(base + l.slab_info);
  ref_.slots = reinterpret_cast<unsigned long long*>(base + l.slots);
  ref_.freed = checked ? reinterpret_cast<unsigned long long*>(base + l.freed) : nullptr;
  backend().fill(base, 0, l.slabs);
  std::vector<unsigned long long> const empty_slots(std::size_t{detail::slab_class_count} * shards,
                                                    detail::slot_empty);
  backend().copy(ref_.slots, empty_slots.data(), empty_slots.size() * 8);
}

device_heap::~device_heap() = default;

std::size_t device_heap::capacity() const noexcept {
  if (ref_.kind == heap_kind::cuda_malloc) return bytes_;
  return static_cast<std::size_t>(ref_.slab_count) << ref_.slab_shift;
}

std::string device_heap::name() const {
  return std::string(ref_.kind == heap_kind::cuda_malloc ? "cuda malloc heap ("
                                                         : "gpumem device heap (") +
         format_bytes(capacity()) + ")";
}

void device_heap::check() {
  backend().synchronize();
  detail::heap_counters c = read_device(ref_.counters);
  if (c.invalid_frees != 0) {
    write_device(&ref_.counters->invalid_frees, 0ull);
    write_device(&ref_.counters->first_invalid_free, 0ull);
    std::ostringstream out;
    out << name() << ": " << c.invalid_frees
        << " free(s) of pointers that are no block of the heap (outside it, inside a block, a "
           "block freed twice"
        << (ref_.freed == nullptr ? " (large blocks; small ones on checked heaps)" : "")
        << "), first 0x" << std::hex << c.first_invalid_free;
    throw logic_error(out.str());
  }
  if (c.failures != 0) {
    write_device(&ref_.counters->failures, 0ull);
    write_device(&ref_.counters->first_failed_size, 0ull);
    std::ostringstream detail;
    detail << c.failures << " device allocation(s) returned null";
    if (c.first_failed_size > static_cast<unsigned long long>(INT64_MAX))
      detail << " (the first asked for more than INT64_MAX bytes: a size that overflowed)";
    if (ref_.kind == heap_kind::gpumem)
      detail << "; " << ref_.slab_count << " slabs of " << format_bytes(slab_bytes()) << ", "
             << ref_.shard_count << " shard(s)";
    throw out_of_memory(static_cast<std::size_t>(c.first_failed_size), name(),
                        static_cast<std::size_t>(c.used_slabs) * slab_bytes(),
                        static_cast<std::size_t>(c.peak_slabs) * slab_bytes(), detail.str());
  }
}

heap_usage device_heap::usage() {
  backend().synchronize();
  heap_usage u;
  u.capacity_bytes = capacity();
  if (ref_.kind == heap_kind::cuda_malloc) return u;
  detail::heap_counters const c = read_device(ref_.counters);
  u.used_bytes = static_cast<std::size_t>(c.used_slabs) * slab_bytes();
  u.peak_bytes = static_cast<std::size_t>(c.peak_slabs) * slab_bytes();
  return u;
}

void device_heap::trim() {
  if (ref_.kind == heap_kind::cuda_malloc) return;
  backend().synchronize();
  std::size_t const slot_count = std::size_t{detail::slab_class_count} * ref_.shard_count;
  std::vector<unsigned long long> slots(slot_count);
  backend().copy(slots.data(), ref_.slots, slot_count * 8);
  std::vector<unsigned long long> bitmap(ref_.bitmap_words);
  backend().copy(bitmap.data(), ref_.bitmap, bitmap.size() * 8);
  // The slabs to release, with their phase words: on a checked heap their bits are set first (a
  // fill that fails then leaves every slot as it was, and only the slabs filled before it with
  // their blocks never handed out marked freed: later frees of those report double frees).
  std::vector<std::pair<std::uint32_t, std::uint32_t>> releasing;  // (slab, remaining word)
  for (std::size_t i = 0; i < slot_count; ++i) {
    if (!detail::slot_holds_slab(slots[i])) continue;  // empty (installing cannot be seen at rest)
    auto const slab = static_cast<std::uint32_t>(slots[i] >> 32);
    auto const bump = static_cast<std::uint32_t>(slots[i]);
    auto const cls = static_cast<unsigned>(i / ref_.shard_count);
    std::uint32_t const cap = detail::class_capacity(ref_, cls);
    if (bump >= cap) continue;  // cannot be at rest; leave it to its retiring group
    std::uint32_t const word = read_device(&ref_.remaining[slab]);
    std::uint32_t const remaining = word & ~detail::slab_phase;
    // remaining = cap + 1 - freed blocks while current; live = handed out - freed.
    std::uint64_t const freed = std::uint64_t{cap} + 1 - remaining;
    if (freed != bump) continue;
    releasing.emplace_back(slab, word);
    slots[i] = detail::slot_empty;
    bitmap[slab / 64] &= ~(1ull << (slab % 64));
  }
  if (releasing.empty()) return;
  // A checked heap's slab leaves its generation with every block's bit at the phase, those never
  // handed out included (slab_phase): the next taker's flip marks them all not freed.
  if (ref_.freed != nullptr)
    for (auto const& [slab, word] : releasing)
      backend().fill(ref_.freed + std::size_t{slab} * detail::freed_words_per_slab(ref_),
                     (word & detail::slab_phase) != 0 ? 0xFF : 0x00,
                     detail::freed_words_per_slab(ref_) * 8);
  std::size_t const released = releasing.size();
  backend().copy(ref_.slots, slots.data(), slot_count * 8);
  backend().copy(ref_.bitmap, bitmap.data(), bitmap.size() * 8);
  auto const used = read_device(&ref_.counters->used_slabs);
  write_device(&ref_.counters->used_slabs, used - released);
}

}  // namespace gpumem::nrt
