/* A critical section for the handoff benchmark: appends "start <ns>" to FILE, sleeps MS
 * milliseconds, appends "end <ns>", on the monotonic clock. One exec per section, the same
 * for every tool measured. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static long long now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void stamp(const char* path, const char* what) {
  FILE* f = fopen(path, "a");
  if (!f) exit(1);
  fprintf(f, "%s %lld\n", what, now_ns());
  fclose(f);
}

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  stamp(argv[1], "start");
  long ms = atol(argv[2]);
  struct timespec d = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&d, NULL);
  stamp(argv[1], "end");
  return 0;
}
