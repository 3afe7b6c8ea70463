#pragma once
// RoPE pair order (DeviceWeight::rope_head_dim): the rows of a q or k head of d rows held so that
// each rotation pair (i, i + d/2) sits side by side. Position i of a head in that order holds the
// head's row (or output column) rope_pair_source(i, d). One definition for the host repack
// (upload_stacked) and the kernels that put the outputs back (split_columns); the GEMV's store
// (gemv_args.h, store_rope_pair) writes a pair's two outputs to j and j + d/2.
namespace nibble::cuda::detail {

constexpr int rope_pair_source(int i, int d) { return i / 2 + (i % 2) * (d / 2); }

}  // namespace nibble::cuda::detail
