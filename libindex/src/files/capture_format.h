// The capture file layout the writer and the reader share (docs/capture-format.md): the file
// magic, little-endian field access and the two checksums, inline because each runs once per
// record on the recording and the replay paths. Private to the files layer. Plain functions of
// their arguments: any thread.
#ifndef KVINDEX_FILES_CAPTURE_FORMAT_H_
#define KVINDEX_FILES_CAPTURE_FORMAT_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>

// Compiled inline, as in block_hash.cpp (same values as the shared library): most records are a
// few hundred bytes, where the call through the PLT and the library's length dispatch are a
// visible part of the checksum.
#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kvindex::capture_internal {

// File header: magic(8) version(2) header_size(2) file_index(4) created_ns(8) checksum(8).
// The magic starts with 0x89 and holds "\r\n" so that text-mode transfers corrupt it visibly.
inline constexpr std::byte kMagic[8] = {std::byte{0x89}, std::byte{'K'}, std::byte{'V'},
                                        std::byte{'C'},  std::byte{'A'}, std::byte{'P'},
                                        std::byte{'\r'}, std::byte{'\n'}};

// The little-endian fields of the format, at `p`.
inline void PutLe16(std::byte* p, uint16_t v) { std::memcpy(p, &v, 2); }
inline void PutLe32(std::byte* p, uint32_t v) { std::memcpy(p, &v, 4); }
inline void PutLe64(std::byte* p, uint64_t v) { std::memcpy(p, &v, 8); }
inline uint16_t GetLe16(const std::byte* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}
inline uint32_t GetLe32(const std::byte* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t GetLe64(const std::byte* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// The record checksum covers every byte of the record but the checksum field itself: XXH3-64 of
// bytes [16, end) seeded with the first 8 bytes (length, type, flags, header size). `record`
// holds `size` >= 16 bytes.
inline uint64_t RecordChecksum(const std::byte* record, size_t size) {
  return XXH3_64bits_withSeed(record + 16, size - 16, GetLe64(record));
}

// The checksum of a file header: XXH3-64 of its first 24 bytes.
inline uint64_t FileHeaderChecksum(const std::byte* header) { return XXH3_64bits(header, 24); }

// A record header (docs/capture-format.md "Records") for a record of `total` bytes at `p`, the
// checksum left for SealRecord().
inline void PutRecordHeader(std::byte* p, size_t total, uint8_t type, uint32_t source,
                            int64_t recv_ns) {
  PutLe32(p, static_cast<uint32_t>(total));
  p[4] = static_cast<std::byte>(type);
  p[5] = std::byte{0};
  PutLe16(p + 6, 32);
  PutLe64(p + 16, static_cast<uint64_t>(recv_ns));
  PutLe32(p + 24, source);
  PutLe32(p + 28, 0);
}

// Writes the checksum of the record at `p` (its length is in its header).
inline void SealRecord(std::byte* p) { PutLe64(p + 8, RecordChecksum(p, GetLe32(p))); }

// A message body: u32 frame count, then u32 length + bytes per frame.
inline size_t FramesBodySize(std::span<const std::span<const std::byte>> frames) {
  size_t size = 4;
  for (const auto& frame : frames) size += 4 + frame.size();
  return size;
}
inline void PutFramesBody(std::byte* p, std::span<const std::span<const std::byte>> frames) {
  PutLe32(p, static_cast<uint32_t>(frames.size()));
  p += 4;
  for (const auto& frame : frames) {
    PutLe32(p, static_cast<uint32_t>(frame.size()));
    p += 4;
    if (!frame.empty()) std::memcpy(p, frame.data(), frame.size());
    p += frame.size();
  }
}

// strerror(err), for messages.
inline std::string ErrnoText(int err) { return std::strerror(err); }

}  // namespace kvindex::capture_internal

#endif  // KVINDEX_FILES_CAPTURE_FORMAT_H_
