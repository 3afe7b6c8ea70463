#include "model/load_tensors.h"

#include <cmath>

#include "nibble/error.h"
#include "nibble/half.h"
#include "nibble/nestedfp.h"

namespace nibble {
namespace {

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "]";
}

}  // namespace

const char* stored_format(const TensorView& t) {
  switch (t.dtype) {
    case DType::F32: return "fp32";
    case DType::BF16: return "bf16";
    case DType::F16: return "fp16";
    default:
      throw Error(t.file + ": tensor " + t.name + " has dtype " + dtype_name(t.dtype) +
                  "; expected F32, BF16 or F16");
  }
}

void check_shape(const TensorView& t, const std::vector<int64_t>& want) {
  if (t.shape != want)
    throw Error(t.file + ": tensor " + t.name + " has shape " + shape_str(t.shape) +
                ", expected " + shape_str(want));
}

std::vector<float> load_vector(const TensorView& t, int64_t n) {
  check_shape(t, {n});
  return t.to_float();
}

PackedTensor pack_matrix(const float* data, int64_t rows, int64_t cols, const std::string& format,
                         const QuantOptions& quant, const std::string& name, bool measure,
                         ModelWeights& w) {
  QuantOptions opt = quant;
  opt.name = name;
  PackedTensor p = quantize(format, data, rows, cols, opt);
  if (measure) {
    std::vector<float> back = dequantize(p);
    double sq_err = 0, sq_ref = 0;
#pragma omp parallel for reduction(+ : sq_err, sq_ref) schedule(static) if (rows * cols >= (1 << 20))
    for (int64_t i = 0; i < rows * cols; ++i) {
      const double e = double(back[size_t(i)]) - data[i];
      sq_err += e * e;
      sq_ref += double(data[i]) * data[i];
    }
#pragma omp critical(nibble_build_weights)
    {
      w.sq_err += sq_err;
      w.sq_ref += sq_ref;
    }
  }
  return p;
}

bool nestedfp_eligible(const std::vector<float>& data) {
  for (float x : data)
    if (!std::isfinite(x) || !nestedfp::eligible(float_to_half(x))) return false;
  return true;
}

}  // namespace nibble
