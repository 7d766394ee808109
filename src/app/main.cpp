#include <cstdio>

#include "util/error.h"

int main(int argc, char** argv) {
  std::printf("h3\n");
  return 0;
}
