#pragma once
// Serialization of a PackedTensor (format.h) into safetensors, following the "Serialized quantized
// models" section of ../shared/FORMATS.md. A quantized linear NAME (e.g.
// "model.layers.0.mlp.up_proj") with rows R, cols C is stored as:
//   NAME.qweight       U8  [R, qweight bytes per row]     packed element codes, serialized layout
//   NAME.scales        FormatInfo::scale_dtype [R, n]     raw per-block scale bytes (only when the
//                                                         format has scales, i.e. scale_dtype != "")
//   NAME.<aux_name>    U8  [R, aux bytes per row]         the aux plane, when the tensor has one
//   NAME.global_scale  F32 [1]                            FP32 per-tensor scale (1 where unused)
//   NAME.sv_pair       F32 [2]                            RaZeR special values {a, b} (0 where unused)
// plus string metadata (safetensors "__metadata__", in the same file):
//   "NAME.format" = registry name, "NAME.block" = block size, "NAME.rows" = R, "NAME.cols" = C.
// Reading checks every piece: presence, dtypes, shapes, and that the byte counts per row equal
// what the format produces for C columns at that block (learned by quantizing one zero row with
// FormatInfo::quantize, so no format's layout is duplicated here). Errors name the tensor and file.
#include <string>

#include "nibble/format.h"
#include "nibble/safetensors.h"

namespace nibble {

// Throws nibble::Error if t does not match its format (info must describe t.format).
void write_packed(SafetensorsWriter& w, const std::string& name, const PackedTensor& t,
                  const FormatInfo& info);
void write_packed(SafetensorsWriter& w, const std::string& name, const PackedTensor& t);  // registry

// True if NAME.qweight exists (NAME is then expected to be a packed tensor).
bool has_packed(const TensorStore& s, const std::string& name);
bool has_packed(const SafetensorsFile& f, const std::string& name);

// The format name recorded for NAME ("NAME.format" metadata); throws if absent.
std::string packed_format(const TensorStore& s, const std::string& name);
std::string packed_format(const SafetensorsFile& f, const std::string& name);

// Reads NAME back; info must be the format recorded for it.
PackedTensor read_packed(const TensorStore& s, const std::string& name, const FormatInfo& info);
PackedTensor read_packed(const SafetensorsFile& f, const std::string& name, const FormatInfo& info);
// Same, looking the recorded format up in the registry (find_format).
PackedTensor read_packed(const TensorStore& s, const std::string& name);
PackedTensor read_packed(const SafetensorsFile& f, const std::string& name);

}  // namespace nibble
