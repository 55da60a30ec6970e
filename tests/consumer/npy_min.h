/* Minimal .npy reader for the consumer examples: little-endian float32 / int64, C order.
 * Deliberately self-contained (plain C) so the consumers need nothing but strata. */
#ifndef STRATA_CONSUMER_NPY_MIN_H_
#define STRATA_CONSUMER_NPY_MIN_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct npy_array {
  char descr[8];   /* "<f4" or "<i8" */
  int64_t dims[8];
  size_t rank;
  size_t count;    /* element count */
  void* data;      /* malloc'ed, count elements */
} npy_array;

/* Returns 0 on success; on failure prints why to stderr and returns -1. */
static int npy_load(const char* path, npy_array* out) {
  memset(out, 0, sizeof(*out));
  FILE* f = fopen(path, "rb");
  if (!f) { fprintf(stderr, "cannot open %s\n", path); return -1; }
  unsigned char pre[10];
  if (fread(pre, 1, 10, f) != 10 || memcmp(pre, "\x93NUMPY", 6) != 0) {
    fprintf(stderr, "%s: not a .npy file\n", path); fclose(f); return -1;
  }
  size_t hlen = pre[8] | (pre[9] << 8);
  if (pre[6] >= 2) { /* v2/v3: 4-byte header length */
    unsigned char more[2];
    if (fread(more, 1, 2, f) != 2) { fclose(f); return -1; }
    hlen |= ((size_t)more[0] << 16) | ((size_t)more[1] << 24);
  }
  if (hlen == 0 || hlen > 65536) { fprintf(stderr, "%s: bad header length\n", path); fclose(f); return -1; }
  char* h = (char*)calloc(hlen + 1, 1);
  if (!h || fread(h, 1, hlen, f) != hlen) { fprintf(stderr, "%s: truncated header\n", path); free(h); fclose(f); return -1; }
  const char* d = strstr(h, "'descr': '");
  const char* s = strstr(h, "'shape': (");
  if (!d || !s || strstr(h, "'fortran_order': True")) {
    fprintf(stderr, "%s: unsupported header %s\n", path, h); free(h); fclose(f); return -1;
  }
  strncpy(out->descr, d + 10, 3);
  size_t elem = strcmp(out->descr, "<f4") == 0 ? 4 : strcmp(out->descr, "<i8") == 0 ? 8 : 0;
  if (!elem) { fprintf(stderr, "%s: dtype %s is not <f4/<i8\n", path, out->descr); free(h); fclose(f); return -1; }
  out->count = 1;
  for (const char* p = s + 10; *p && *p != ')' && out->rank < 8;) {
    char* end;
    long long v = strtoll(p, &end, 10);
    if (end == p) break;
    out->dims[out->rank++] = v;
    out->count *= (size_t)v;
    p = end;
    while (*p == ',' || *p == ' ') ++p;
  }
  free(h);
  out->data = malloc(out->count * elem + 1);
  if (!out->data || fread(out->data, elem, out->count, f) != out->count) {
    fprintf(stderr, "%s: truncated data\n", path); free(out->data); fclose(f); return -1;
  }
  fclose(f);
  return 0;
}

#endif /* STRATA_CONSUMER_NPY_MIN_H_ */
