// nbits_cacheread: how fast T threads re-read a buffer that fits in the caches, each thread
// the same slice every pass or the slices rotated every pass (so each thread reads what
// another read last pass). Why the MatMulNBits GEMVs split their weights by CPU
// (src/cpu/matmul_nbits_parallel.h): on a VM whose vCPUs have separate cache domains the
// rotated read runs at about half the rate.
//   g++ -O2 -std=c++17 -pthread bench/compare-ort/nbits_cacheread.cc -o build/nbits-ort/nbits_cacheread
//   nbits_cacheread MiB threads [rotate 0|1] [passes]   e.g. nbits_cacheread 18.5 2 1
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12 AVX-512 intrinsic temporaries

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "../read_pass.h"

int main(int argc, char** argv) {
  const double mib = argc > 1 ? std::atof(argv[1]) : 18.5;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const bool rotate = argc > 3 && std::atoi(argv[3]) != 0;
  const int passes = argc > 4 ? std::atoi(argv[4]) : 2000;
  if (mib <= 0 || threads <= 0 || threads > 64 || passes <= 0 || !__builtin_cpu_supports("avx512f")) {
    std::fprintf(stderr,
                 "nbits_cacheread: usage: nbits_cacheread MiB>0 threads(1-64) [rotate 0|1] [passes>0]; "
                 "needs AVX-512F\n");
    return 1;
  }
  std::vector<float> buf(static_cast<size_t>(mib * 1048576 / sizeof(float)), 1.0f);
  const size_t slice = buf.size() / threads;
  std::atomic<int> go{0}, done{0};
  std::atomic<float> sink{0};
  const auto read = [&](int t, int pass) {
    const size_t s = static_cast<size_t>((t + (rotate ? pass : 0)) % threads);
    sink.store(SumAvx512(buf.data() + s * slice, slice), std::memory_order_relaxed);
    done.fetch_add(1);
  };
  std::vector<std::thread> workers;
  for (int t = 1; t < threads; ++t)
    workers.emplace_back([&, t] {
      for (int p = 1; p <= passes; ++p) {
        while (go.load(std::memory_order_acquire) < p) {
        }
        read(t, p);
      }
    });
  std::vector<double> us;
  for (int p = 1; p <= passes; ++p) {
    const auto t0 = std::chrono::steady_clock::now();
    go.store(p, std::memory_order_release);
    read(0, p);
    while (done.load() < p * threads) {
    }
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  for (auto& w : workers) w.join();
  std::sort(us.begin(), us.end());
  const double bytes = static_cast<double>(slice) * threads * sizeof(float);
  std::printf(
      "{\"mib\": %.2f, \"threads\": %d, \"rotate\": %d, \"min_us\": %.1f, \"p10_us\": %.1f, \"median_us\": %.1f, "
      "\"min_gbps\": %.1f}\n",
      mib, threads, rotate ? 1 : 0, us[0], us[us.size() / 10], us[us.size() / 2], bytes / us[0] / 1e3);
}
