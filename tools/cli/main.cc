// Stub CLI entry point; replaced by the real CLI.
#include <cstdio>

int main() {
  std::puts("strata");
  return 0;
}
