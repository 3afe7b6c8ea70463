// The crossover table (nibble/cuda/crossover.h): JSON round trip, errors naming the file, and the
// runtime's DeviceLinear taking each path where the table says, with the same numbers on each.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <algorithm>
#include <memory>
#include <vector>

#include <unistd.h>

#include "model/cuda/device_linear.h"
#include "nibble/cuda/bench.h"
#include "nibble/cuda/crossover.h"
#include "nibble/error.h"
#include "nibble/half.h"

namespace nibble::cuda::test {
namespace {

std::string temp_file(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("nibble-crossover-" + std::to_string(::getpid()) + name)).string();
}

TEST(Crossover, TableRoundTripAndDefaults) {
  const std::string path = temp_file("-rt.json");
  save_crossover_table(path, {{"nvfp4", 4096, 14336, {33, 129}}, {"nf4", 512, 256, {17, 65}}});
  load_crossover_table(path);
  EXPECT_EQ(crossover_for("nvfp4", 4096, 14336).gemm_from_m, 33);
  EXPECT_EQ(crossover_for("nvfp4", 4096, 14336).dequant_from_m, 129);
  EXPECT_EQ(crossover_for("nf4", 512, 256).dequant_from_m, 65);
  const Crossover d = crossover_for("nvfp4", 4096, 4096);  // no entry: the defaults
  EXPECT_EQ(d.gemm_from_m, 17);
  EXPECT_EQ(d.dequant_from_m, 1025);  // the H100 measurement (crossover.h)
  EXPECT_GT(crossover_for("nestedfp", 4096, 4096).dequant_from_m, 1 << 20);  // no dequantize path
  set_crossover_table({});
  std::remove(path.c_str());
}

TEST(Crossover, BadFilesNameTheFileAndField) {
  const std::string path = temp_file("-bad.json");
  for (const char* text : {"{}", "[{\"format\": \"nvfp4\", \"K\": 64}]",
                           "[{\"format\": 3, \"K\": 64, \"N\": 8, \"gemm_from_m\": 17, \"dequant_from_m\": 256}]",
                           "[{\"format\": \"nvfp4\", \"K\": 64, \"N\": 8, \"gemm_from_m\": 0, \"dequant_from_m\": 256}]",
                           "not json"}) {
    std::ofstream(path) << text;
    try {
      load_crossover_table(path);
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(load_crossover_table(path + ".missing"), Error);
  std::remove(path.c_str());
}

// One nvfp4 layer, paths switched by the table at M = 40 (GEMM) and 100 (dequant + cuBLAS); every
// path must give the same outputs as the GEMV run 16 rows at a time, to fp16 accumulation noise.
TEST(Crossover, DeviceLinearFollowsTheTable) {
  const int N = 256, K = 512;
  const PackedTensor t = random_packed("nvfp4", N, K, std::random_device{}());
  set_crossover_table({{"nvfp4", K, N, {40, 100}}});
  DeviceLinear lin(t, {}, "layer");
  EXPECT_EQ(lin.path_for(16), DeviceLinear::Path::gemv);
  EXPECT_EQ(lin.path_for(39), DeviceLinear::Path::gemv);
  EXPECT_EQ(lin.path_for(40), DeviceLinear::Path::gemm);
  EXPECT_EQ(lin.path_for(99), DeviceLinear::Path::gemm);
  EXPECT_EQ(lin.path_for(100), DeviceLinear::Path::dequant_cublas);
  const int M = 120;
  std::mt19937 g(1);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<uint16_t> xh(size_t(M) * K);
  for (auto& v : xh) v = float_to_half(d(g));
  DeviceArray<uint16_t> x(xh.size()), y(size_t(M) * N), ref(size_t(M) * N);
  NIBBLE_CUDA_CHECK(cudaMemcpy(x.p, xh.data(), xh.size() * 2, cudaMemcpyHostToDevice));
  GemmWorkspace ws;
  CublasFp16 blas;
  const LinearExec ex{nullptr, &ws, &blas};
  for (int m0 = 0; m0 < M; m0 += 16)  // the reference: the GEMV, 16 rows at a time
    linear(x.p + size_t(m0) * K, std::min(16, M - m0), *std::make_unique<DeviceWeight>(upload(t, "ref")),
           ref.p + size_t(m0) * N, nullptr);
  std::vector<uint16_t> want(size_t(M) * N), got(size_t(M) * N);
  NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
  NIBBLE_CUDA_CHECK(cudaMemcpy(want.data(), ref.p, want.size() * 2, cudaMemcpyDeviceToHost));
  for (int rows : {30, 60, 120}) {  // gemv, gemm, dequant + cuBLAS
    NIBBLE_CUDA_CHECK(cudaMemset(y.p, 0xFF, size_t(M) * N * 2));
    lin.run(x.p, rows, y.p, ex);
    NIBBLE_CUDA_CHECK(cudaDeviceSynchronize());
    NIBBLE_CUDA_CHECK(cudaMemcpy(got.data(), y.p, size_t(rows) * N * 2, cudaMemcpyDeviceToHost));
    double worst = 0, scale = 0;
    for (size_t i = 0; i < size_t(rows) * N; ++i) {
      scale = std::max(scale, double(std::fabs(half_to_float(want[i]))));
      const double e = std::fabs(double(half_to_float(got[i])) - half_to_float(want[i]));
      worst = std::isnan(e) ? INFINITY : std::max(worst, e);
    }
    EXPECT_LE(worst, 2e-3 * scale) << rows << " rows";
  }
  set_crossover_table({});
}

}  // namespace
}  // namespace nibble::cuda::test
