// Random test data: gaussian, laplace and student-t samples from a seeded generator.
#include <charconv>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include "nibble/error.h"
#include "nibble/error_stats.h"

namespace nibble {

std::string Distribution::name() const {
  switch (kind) {
    case Kind::Gaussian: return "gaussian";
    case Kind::Laplace: return "laplace";
    case Kind::StudentT: return fmt::format("student-t:{:g}", nu);
  }
  return "?";
}

std::optional<Distribution> parse_distribution(std::string_view spec) {
  if (spec == "gaussian" || spec == "normal") return Distribution{Distribution::Kind::Gaussian};
  if (spec == "laplace") return Distribution{Distribution::Kind::Laplace};
  constexpr std::string_view t = "student-t";
  if (spec.substr(0, t.size()) != t) return std::nullopt;
  std::string_view rest = spec.substr(t.size());
  double nu = 0;
  if (rest.empty() || rest[0] != ':' ||
      std::from_chars(rest.data() + 1, rest.data() + rest.size(), nu).ptr !=
          rest.data() + rest.size() ||
      !(nu > 0) || !std::isfinite(nu))
    throw Error(fmt::format("--dist '{}': expected student-t:NU with NU > 0 degrees of freedom",
                            spec));
  return Distribution{Distribution::Kind::StudentT, nu};
}

std::vector<float> random_values(const Distribution& dist, int64_t n, uint64_t seed) {
  std::vector<float> v(size_t(n > 0 ? n : 0));
  std::mt19937_64 rng(seed);
  switch (dist.kind) {
    case Distribution::Kind::Gaussian: {
      std::normal_distribution<double> d(0.0, 1.0);
      for (auto& x : v) x = float(d(rng));
      break;
    }
    case Distribution::Kind::Laplace: {
      // A standard Laplace sample is an Exp(1) magnitude with a fair random sign.
      std::exponential_distribution<double> mag(1.0);
      std::bernoulli_distribution negative(0.5);
      for (auto& x : v) {
        double m = mag(rng);
        x = float(negative(rng) ? -m : m);
      }
      break;
    }
    case Distribution::Kind::StudentT: {
      std::student_t_distribution<double> d(dist.nu);
      for (auto& x : v) x = float(d(rng));
      break;
    }
  }
  return v;
}

uint64_t fresh_seed() {
  std::random_device rd;
  return (uint64_t(rd()) << 32) ^ uint64_t(rd());
}

}  // namespace nibble
