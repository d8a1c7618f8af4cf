// A minimal PNG writer for 8-bit grayscale images (the sample grids): one IHDR, one
// zlib-compressed IDAT, IEND, each chunk with its CRC-32, as the PNG specification lays out.
#pragma once
#include <zlib.h>

#include <cstdint>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace dcgan {

namespace detail {
inline void put32(std::vector<unsigned char>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(static_cast<unsigned char>(v >> s));
}
// Appends chunk `type` with `data`: length, type, data, CRC-32 of type and data.
inline void chunk(std::vector<unsigned char>& out, const char* type, const std::vector<unsigned char>& data) {
  put32(out, uint32_t(data.size()));
  const size_t start = out.size();
  out.insert(out.end(), type, type + 4);
  out.insert(out.end(), data.begin(), data.end());
  put32(out, uint32_t(crc32(0L, out.data() + start, uInt(out.size() - start))));
}
}  // namespace detail

// Writes `pixels` (height rows of width bytes, row-major) to `path`; throws on failure.
inline void write_gray_png(const std::string& path, const std::vector<unsigned char>& pixels, uint32_t width,
                           uint32_t height) {
  if (pixels.size() != size_t(width) * height) throw std::runtime_error("write_gray_png: pixel count mismatch");
  std::vector<unsigned char> raw;  // each row: filter byte 0 (none), then its pixels
  raw.reserve(size_t(width + 1) * height);
  for (uint32_t y = 0; y < height; ++y) {
    raw.push_back(0);
    raw.insert(raw.end(), pixels.begin() + std::ptrdiff_t(size_t(y) * width),
               pixels.begin() + std::ptrdiff_t(size_t(y + 1) * width));
  }
  uLongf packed_size = compressBound(uLong(raw.size()));
  std::vector<unsigned char> packed(packed_size);
  if (compress2(packed.data(), &packed_size, raw.data(), uLong(raw.size()), 9) != Z_OK)
    throw std::runtime_error("write_gray_png: zlib compression failed");
  packed.resize(packed_size);
  std::vector<unsigned char> png = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'}, ihdr;
  detail::put32(ihdr, width);
  detail::put32(ihdr, height);
  ihdr.insert(ihdr.end(), {8, 0, 0, 0, 0});  // 8-bit, grayscale, deflate, adaptive filters, no interlace
  detail::chunk(png, "IHDR", ihdr);
  detail::chunk(png, "IDAT", packed);
  detail::chunk(png, "IEND", {});
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(png.data()), std::streamsize(png.size()));
  if (!f) throw std::runtime_error("write_gray_png: cannot write '" + path + "'");
}

}  // namespace dcgan
