// How the IPC test hands a memory handle to its child process: the 64 handle bytes as 128 hex
// digits on the command line (the spec's handles are serialisable; this is the simplest form).
#pragma once

#include <gpumem/cuda/device_backend.hpp>

#include <cstdio>
#include <optional>
#include <string>

namespace gpumem::test {

inline std::string to_hex(ipc_memory_handle const& handle) {
  std::string text;
  char digits[3];
  for (std::uint8_t byte : handle) {
    std::snprintf(digits, sizeof digits, "%02x", byte);
    text += digits;
  }
  return text;
}

inline std::optional<ipc_memory_handle> from_hex(std::string const& text) {
  ipc_memory_handle handle{};
  if (text.size() != 2 * handle.size()) return std::nullopt;
  for (std::size_t i = 0; i < handle.size(); ++i) {
    unsigned value = 0;
    if (std::sscanf(text.c_str() + 2 * i, "%2x", &value) != 1) return std::nullopt;
    handle[i] = static_cast<std::uint8_t>(value);
  }
  return handle;
}

// The byte the parent writes at `offset` of the exported allocation; the child checks it.
inline std::uint8_t ipc_pattern(std::size_t offset) {
  return static_cast<std::uint8_t>((offset * 13 + 5) & 0xff);
}

// What the child writes back, at the offset it was given.
constexpr std::uint8_t ipc_reply = 0xa5;

}  // namespace gpumem::test
