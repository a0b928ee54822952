// gpumem/strings/detail/gather.hpp
//
// The second half of strings::transform (strings/transform.hpp): turning one result per row into
// a strings column, and dropping every reference the results hold. Not API.
//
// Per row the UDF kernel leaves a result slot, kept as three arrays (structure of arrays, so that
// each pass reads only what it needs, coalesced):
//
//   meminfo[row]  the NRT meminfo that keeps the row's bytes alive (null for a view of the input
//                 or of other memory that lives until the gather, and for null/failed rows)
//   data[row]     the row's first byte
//   bytes[row]    >= 0: a valid row of that many bytes; row_null; row_failed
//
// Passes after the UDF kernel (every one a thread per row or per chunk, no block barriers, so the
// same code runs on the host backend):
//
//   totals   thread per chunk of chunk_rows rows: sum of the valid rows' bytes, the output's
//            validity bits for those rows, null and managed counts (one atomic per chunk)
//   (host)   exclusive scan of the chunk sums: each chunk's first offset, and the total
//   offsets  thread per chunk: the offsets of its rows (int32 or int64); the last chunk also
//            writes the end
//   gather   thread per row: copies the row's bytes to chars + offset, then NRT_decref(meminfo)
//            (with no chars it only releases: the failure path)
//
// The release is fused into the copy: a row's bytes are read once and its reference dropped at
// once, so the freeing pass costs no extra read of the slots.
#pragma once

#include <gpumem/column/bitmask.hpp>
#include <gpumem/core/atomic.hpp>
#include <gpumem/core/config.hpp>
#include <gpumem/cuda/launch.hpp>
#include <gpumem/nrt/meminfo.hpp>

#include <cstddef>
#include <cstdint>

namespace gpumem::strings::detail {

inline constexpr std::int64_t row_null = -1;
inline constexpr std::int64_t row_failed = -2;

// Rows per chunk of the scan: a multiple of the bitmask word, so that a chunk owns its mask words.
inline constexpr std::size_t chunk_rows = 64;
static_assert(chunk_rows % bitmask_word_bits == 0, "a chunk must own whole mask words");

GPUMEM_HD constexpr std::size_t chunk_count(std::size_t rows) {
  return rows / chunk_rows + (rows % chunk_rows != 0 ? 1 : 0);
}

// Device arrays of `rows` result slots.
struct row_results {
  NRT_MemInfo** meminfo;
  char const** data;
  std::int64_t* bytes;
  std::size_t rows;
};

// What the kernels count for the host (device memory, zeroed before the UDF kernel).
struct transform_counters {
  unsigned long long failed_rows;      // a result that could not be made (allocation, error)
  unsigned long long first_error;      // strings::errc of the first failed row (0: none yet)
  unsigned long long malformed_rows;   // input rows whose offsets are not a valid range
  unsigned long long first_malformed;  // (input << 48 | row) + 1 of the lowest seen, 0: none
  unsigned long long null_rows;        // output nulls (totals pass)
  unsigned long long managed_rows;     // rows holding a meminfo (totals pass)
};

GPUMEM_HD inline void record_failed_row(transform_counters* c, unsigned error_code) {
  atomic_fetch_add(&c->failed_rows, 1ull, mem_order::relaxed);
  unsigned long long expected = 0;
  atomic_compare_exchange(&c->first_error, expected, static_cast<unsigned long long>(error_code),
                          mem_order::relaxed);
}

GPUMEM_HD inline void record_malformed_row(transform_counters* c, unsigned input, std::size_t row) {
  atomic_fetch_add(&c->malformed_rows, 1ull, mem_order::relaxed);
  unsigned long long const key =
      ((static_cast<unsigned long long>(input) << 48) | static_cast<unsigned long long>(row)) + 1;
  unsigned long long seen = atomic_load(&c->first_malformed, mem_order::relaxed);
  while (seen == 0 || key < seen) {
    if (atomic_compare_exchange(&c->first_malformed, seen, key, mem_order::relaxed)) break;
  }
}

// Thread per chunk: its byte sum, its mask words, its null and managed counts.
struct totals_kernel {
  row_results results;
  std::int64_t* chunk_bytes;
  bitmask_word* mask;
  transform_counters* counters;
  GPUMEM_HD void operator()(thread_index const& t) const {
    std::size_t const chunk = t.global();
    if (chunk >= chunk_count(results.rows)) return;
    std::size_t const first = chunk * chunk_rows;
    std::size_t const end = first + chunk_rows < results.rows ? first + chunk_rows : results.rows;
    std::int64_t sum = 0;
    unsigned long long nulls = 0, managed = 0;
    for (std::size_t word_row = first; word_row < end; word_row += bitmask_word_bits) {
      bitmask_word word = 0;
      std::size_t const word_end =
          word_row + bitmask_word_bits < end ? word_row + bitmask_word_bits : end;
      for (std::size_t row = word_row; row < word_end; ++row) {
        std::int64_t const b = results.bytes[row];
        if (b >= 0) {
          sum += b;
          word |= bitmask_word{1} << (row - word_row);
        } else {
          ++nulls;
        }
        if (results.meminfo[row] != nullptr) ++managed;
      }
      mask[word_row / bitmask_word_bits] = word;
    }
    chunk_bytes[chunk] = sum;
    if (nulls != 0) atomic_fetch_add(&counters->null_rows, nulls, mem_order::relaxed);
    if (managed != 0) atomic_fetch_add(&counters->managed_rows, managed, mem_order::relaxed);
  }
};

// Thread per chunk: offsets[first .. end) from the chunk's first offset; the last chunk also
// writes offsets[rows] (the total).
template <class Offset>
struct offsets_kernel {
  row_results results;
  std::int64_t const* chunk_first;
  Offset* offsets;
  GPUMEM_HD void operator()(thread_index const& t) const {
    std::size_t const chunk = t.global();
    std::size_t const chunks = chunk_count(results.rows);
    if (chunk >= chunks) return;
    std::size_t const first = chunk * chunk_rows;
    std::size_t const end = first + chunk_rows < results.rows ? first + chunk_rows : results.rows;
    std::int64_t at = chunk_first[chunk];
    for (std::size_t row = first; row < end; ++row) {
      offsets[row] = static_cast<Offset>(at);
      std::int64_t const b = results.bytes[row];
      if (b > 0) at += b;
    }
    if (chunk + 1 == chunks) offsets[results.rows] = static_cast<Offset>(at);
  }
};

// Thread per row: copies a valid row into `chars` (when given) and drops the result's reference.
// Launched with nrt::launch on the memory system the results came from (the destructor frees).
template <class Offset>
struct gather_kernel {
  row_results results;
  Offset const* offsets;  // null with chars
  char* chars;            // null: release only
  GPUMEM_HD void operator()(thread_index const& t) const {
    std::size_t const row = t.global();
    if (row >= results.rows) return;
    if (chars != nullptr) {
      std::int64_t const b = results.bytes[row];
      if (b > 0) {
        char* const out = chars + offsets[row];
        char const* const in = results.data[row];
        for (std::int64_t i = 0; i < b; ++i)
          out[i] = in[i];
      }
    }
    NRT_decref(results.meminfo[row]);
  }
};

}  // namespace gpumem::strings::detail
