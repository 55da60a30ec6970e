/* C API consumer: loads digits.onnx, classifies the bundled samples, prints one line per
 * sample and exits 0 when every prediction equals its label.
 * usage: strata_consumer_c EXAMPLES_DIR   (<prefix>/share/strata/examples) */
#include <stdio.h>
#include <string.h>

#include "npy_min.h"
#include "strata/strata.h"

static int check(strata_status* st, const char* what) {
  if (!st) return 0;
  fprintf(stderr, "%s: %s: %s\n", what, strata_status_code_name(strata_status_get_code(st)),
          strata_status_get_message(st));
  strata_status_release(st);
  return -1;
}

int main(int argc, char** argv) {
  if (argc != 2) { fprintf(stderr, "usage: %s EXAMPLES_DIR\n", argv[0]); return 2; }
  char model[4096], samples_path[4096], labels_path[4096];
  snprintf(model, sizeof model, "%s/digits.onnx", argv[1]);
  snprintf(samples_path, sizeof samples_path, "%s/digits_samples.npy", argv[1]);
  snprintf(labels_path, sizeof labels_path, "%s/digits_labels.npy", argv[1]);
  npy_array samples, labels;
  if (npy_load(samples_path, &samples) || npy_load(labels_path, &labels)) return 1;
  if (strcmp(samples.descr, "<f4") || strcmp(labels.descr, "<i8") || labels.count != (size_t)samples.dims[0]) {
    fprintf(stderr, "unexpected sample/label files\n");
    return 1;
  }

  printf("strata %s (API %d), C consumer\n", strata_version(), strata_api_version());
  strata_env* env = NULL;
  strata_session* session = NULL;
  strata_tensor* input = NULL;
  strata_tensor* output = NULL;
  int rc = 1;
  if (check(strata_env_create(&env), "env")) goto done;
  if (check(strata_session_create(env, model, NULL, &session), "session")) goto done;
  const char* input_name = NULL;
  if (check(strata_session_input_info(session, 0, &input_name, NULL, NULL, NULL, 0), "input info")) goto done;
  if (check(strata_tensor_wrap(STRATA_DTYPE_FLOAT32, samples.dims, samples.rank, samples.data,
                               samples.count * sizeof(float), &input), "input")) goto done;
  const strata_tensor* inputs[1] = {input};
  if (check(strata_session_run(session, &input_name, inputs, 1, NULL, &output, 1), "run")) goto done;

  const int64_t* dims = strata_tensor_dims(output);
  const float* scores = (const float*)strata_tensor_data(output);
  int wrong = 0;
  for (int64_t i = 0; i < dims[0]; ++i) {
    int64_t best = 0;
    for (int64_t c = 1; c < dims[1]; ++c)
      if (scores[i * dims[1] + c] > scores[i * dims[1] + best]) best = c;
    int64_t want = ((const int64_t*)labels.data)[i];
    printf("sample %lld: predicted %lld, label %lld%s\n", (long long)i, (long long)best, (long long)want,
           best == want ? "" : "  WRONG");
    wrong += best != want;
  }
  printf("%s\n", wrong ? "FAIL" : "OK");
  rc = wrong ? 1 : 0;
done:
  strata_tensor_destroy(output);
  strata_tensor_destroy(input);
  strata_session_destroy(session);
  strata_env_destroy(env);
  free(samples.data);
  free(labels.data);
  return rc;
}
