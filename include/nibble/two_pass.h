#pragma once
// Two-pass W4A4 RaZeR on plain NVFP4 tensor cores (paper 000, App. D.3).
//
// An nvfp4-razer weight W is split into two plain nvfp4 tensors with W = B_main + B_comp exactly:
// every ordinary element stays in B_main (B_comp holds 0 there); each special-value element
// (code 0b1000) becomes x1 in B_main and x2 in B_comp, both FP4 values with the block's sv sign,
// so Y = X B_main^T + X B_comp^T = X W^T up to float accumulation order.
//
// Which magnitudes are exact: the paper's construction keeps B_comp on B_main's block scales, so
// |sv| = x1 + x2 with x1, x2 FP4 magnitudes: in the register range 2.5..9.5 that is every multiple
// of 0.5 except 8.5 and 9.5. nibble gives B_comp its own E4M3 block scale: in the blocks that use
// 8.5 or 9.5 it is twice B_main's (8.5 = 0.5 + 4*2, 9.5 = 1.5 + 4*2), which is exact because an
// E3M3 scale doubled is still an E4M3 value. So every allowed pair splits exactly; a magnitude
// that cannot be split (none in 2.5..9.5) is rejected with nibble::Error, never approximated.
#include "nibble/format.h"

namespace nibble {

// How one special-value magnitude splits: |sv| = main_value + comp_value * 2^comp_scale_log2.
struct SvSplit {
  float magnitude = 0;
  bool expressible = false;
  float main_value = 0;     // FP4 magnitude written into B_main
  float comp_value = 0;     // FP4 magnitude written into B_comp (0: B_comp stays empty there)
  int comp_scale_log2 = 0;  // B_comp's block scale = B_main's * 2^this (0: the paper's scheme)
};

// Prefers, in order: no B_comp element at all; B_comp on the same scale; the smallest scale
// factor; the largest B_main part.
SvSplit split_special_value(float magnitude);

struct TwoPassWeights {
  PackedTensor main, comp;  // both format "nvfp4", block 16, same global scale as the input
};

// Throws nibble::Error if t is not nvfp4-razer with block 16 and cols % 16 == 0, or if a special
// value it uses cannot be split exactly.
TwoPassWeights split_two_pass(const PackedTensor& razer);

// Fraction of elements of an FP4-coded tensor whose code is not +-0.
double nonzero_fraction(const PackedTensor& fp4_tensor);

}  // namespace nibble
