// Host support of the wgmma GEMMs: whether the device runs them, and their TMA descriptors
// (cuTensorMapEncodeTiled, reached through the runtime so that nothing links the driver library).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

#include "gemm_wgmma.cuh"
#include "gemm_wgmma_launch.cuh"
#include "nibble/cuda/check.h"
#include "nibble/error.h"

namespace nibble::cuda::wg {

bool supported() { return tc::compute_capability() == 90; }


CUtensorMap tensor_map_2d(const void* base, int elem_bytes, uint64_t inner, uint64_t outer, uint64_t row_bytes,
                          uint32_t box_inner, uint32_t box_outer, Swizzle swizzle, const char* what) {
  static const PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    NIBBLE_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found));
    if (!fn || found != cudaDriverEntryPointSuccess) throw Error("wgmma GEMM: the driver has no cuTensorMapEncodeTiled");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  const CUtensorMapDataType type = elem_bytes == 1   ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                   : elem_bytes == 2 ? CU_TENSOR_MAP_DATA_TYPE_UINT16
                                                     : CU_TENSOR_MAP_DATA_TYPE_UINT32;
  const cuuint64_t dims[2] = {inner, outer}, strides[1] = {row_bytes};
  const cuuint32_t box[2] = {box_inner, box_outer}, steps[2] = {1, 1};
  CUtensorMap map;
  const CUresult r = encode(&map, type, 2, const_cast<void*>(base), dims, strides, box, steps,
                            CU_TENSOR_MAP_INTERLEAVE_NONE,
                            swizzle == Swizzle::b128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
                            CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS)
    throw Error(std::string("wgmma GEMM: cuTensorMapEncodeTiled failed (error ") + std::to_string(int(r)) + ") for the " +
                what + " [" + std::to_string(outer) + " x " + std::to_string(inner) + "], " +
                std::to_string(elem_bytes) + "-byte elements");
  return map;
}

}  // namespace nibble::cuda::wg
