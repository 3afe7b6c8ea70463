#pragma once
// Each format family (one .cpp each) appends its FormatInfo entries; registry.cpp orders them.
#include <vector>

#include "nibble/format.h"

namespace nibble::formats {

void add_plain_float_formats(std::vector<FormatInfo>& out);  // fp32, fp16, bf16
void add_fp8_formats(std::vector<FormatInfo>& out);          // fp8-e4m3
void add_nestedfp_formats(std::vector<FormatInfo>& out);     // nestedfp, nestedfp8
void add_int4_formats(std::vector<FormatInfo>& out);         // int4-g128
void add_nf4_formats(std::vector<FormatInfo>& out);          // nf4
void add_mxfp4_formats(std::vector<FormatInfo>& out);        // mxfp4
void add_nvfp4_formats(std::vector<FormatInfo>& out);        // nvfp4, nvfp4-4over6
void add_nvfp4_razer_formats(std::vector<FormatInfo>& out);  // nvfp4-razer, nvfp4-razer-act
void add_group_fp_formats(std::vector<FormatInfo>& out);     // fp4-g128, razer-fp4-g128, razer-fp3-g128

}  // namespace nibble::formats
