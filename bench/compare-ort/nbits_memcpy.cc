// nbits_memcpy: the machine's copy bandwidth, measured in the same run as the MatMulNBits
// benchmark (nbits_bench.py) so GEMV weight traffic can be put against it.
//   nbits_memcpy [MiB] [reps]   prints {"copy_gbps": bytes copied per second / 1e9 (median)}
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 256;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 7;
  if (mib == 0 || reps <= 0) {
    std::fprintf(stderr, "nbits_memcpy: usage: nbits_memcpy [MiB > 0] [reps > 0]\n");
    return 1;
  }
  const size_t bytes = mib << 20;
  std::vector<char> src(bytes, 1), dst(bytes, 0);  // touched first: page faults stay out of the timing
  std::vector<double> gbps;
  for (int r = 0; r < reps; ++r) {
    src[r] = static_cast<char>(r);
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(dst.data(), src.data(), bytes);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    gbps.push_back(bytes / s / 1e9);
  }
  std::sort(gbps.begin(), gbps.end());
  std::printf("{\"copy_gbps\": %.4f, \"max_gbps\": %.4f, \"dst_check\": %d}\n", gbps[gbps.size() / 2], gbps.back(),
              dst[reps - 1]);
  return 0;
}
