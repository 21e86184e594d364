/* Run a model with a run-time sequence length, exported by hobbit, at several lengths from one
 * library, without Python.
 *
 * The model: one float32 input [1, seq, N] and one float32 output [1, seq, M], `seq` a run-time
 * dim (the model declares it symbolic; hobbit.compile(..., dynamic_shapes={"seq": (1, 64)})
 * bounds it). The library's last input is the dims vector: the value of seq for this run.
 * Export (in Python):  hobbit.compile("encoder.onnx", dynamic_shapes={"seq": (1, 64)})
 *                          .export("build/encoder", name="encoder")
 * Build:  cc -O2 -I build/encoder sequence.c -L build/encoder -lencoder -Wl,-rpath,build/encoder \
 *            -o sequence
 * Run:    ./sequence IN.raw OUT.raw [IN.raw OUT.raw ...]
 *   for a library whose weights are in a file: ./sequence build/encoder/encoder.weights IN.raw OUT.raw ...
 *
 * Each IN.raw holds the input's raw float32 values in C order, seq rows of N values: the
 * length of each run is the file's size over a row's. OUT.raw receives the output's seq rows
 * of M values. Both tensors have their run-time dim after a dim of size 1, so each is simply
 * its C-order array at this length (the header marks them "C order"): buffers of exactly
 * that size are passed as they are. A length outside ENCODER_SEQ_MIN..ENCODER_SEQ_MAX is
 * refused by the library, which says why. For a model exported under another name, replace
 * the encoder_ and ENCODER_ prefixes. */

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "encoder.h"

#if ENCODER_NUM_INPUTS != 2 || ENCODER_NUM_OUTPUTS != 1 || ENCODER_NUM_SYMBOLS != 1
#error "this example is for a model with one input, one output and one run-time dim (seq)"
#endif

/* The whole file, and its size in bytes. */
static void *read_file(const char *path, size_t *size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return NULL;
    }
    void *data = NULL;
    long end = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (end >= 0 && fseek(f, 0, SEEK_SET) == 0) {
        *size = (size_t)end;
        data = malloc(*size ? *size : 1);
        if (data != NULL && fread(data, 1, *size, f) != *size) {
            free(data);
            data = NULL;
        }
    }
    if (data == NULL)
        fprintf(stderr, "%s: cannot read it\n", path);
    fclose(f);
    return data;
}

static int write_file(const char *path, const void *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    int ok = f != NULL && fwrite(data, 1, size, f) == size;
    if (f != NULL && fclose(f) != 0)
        ok = 0;
    if (!ok)
        perror(path);
    return ok;
}

/* One run: the input in `in_path`, seq rows of `in_row` bytes; the output to `out_path`. */
static int run_one(encoder_ctx *ctx, const char *in_path, const char *out_path, size_t in_row, size_t out_row)
{
    size_t size = 0;
    float *input = read_file(in_path, &size);
    if (input == NULL)
        return 0;
    if (size % in_row != 0) {
        fprintf(stderr, "%s: %zu bytes is not a whole number of rows of %zu bytes\n", in_path, size, in_row);
        free(input);
        return 0;
    }
    int64_t dims[ENCODER_NUM_SYMBOLS] = {(int64_t)(size / in_row)}; /* seq */
    size_t out_bytes = (size_t)dims[0] * out_row;
    float *output = malloc(out_bytes ? out_bytes : 1);
    int ok = 0;
    if (output != NULL) {
        const void *inputs[] = {input, dims};
        void *outputs[] = {output};
        if (encoder_run(ctx, inputs, outputs) != HOBBIT_OK)
            fprintf(stderr, "the run failed: %s\n", encoder_error(ctx));
        else {
            printf("seq %lld: %s -> %s\n", (long long)dims[0], in_path, out_path);
            ok = write_file(out_path, output, out_bytes);
        }
    }
    free(input);
    free(output);
    return ok;
}

int main(int argc, char **argv)
{
#if ENCODER_WEIGHTS_EMBEDDED
    const char *weights = NULL; /* inside the library */
    const char *usage = "IN.raw OUT.raw [IN.raw OUT.raw ...]";
#else
    const char *weights = argc > 1 ? argv[1] : NULL;
    const char *usage = "WEIGHTS IN.raw OUT.raw [IN.raw OUT.raw ...]";
    argv++, argc--;
#endif
    if (argc < 3 || argc % 2 == 0) {
        fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        return 2;
    }
    encoder_ctx *ctx = NULL;
    if (encoder_create(weights, 0, NULL, 0, &ctx) != HOBBIT_OK) {
        fprintf(stderr, "cannot start the model: %s\n", encoder_error(ctx));
        encoder_destroy(ctx);
        return 1;
    }
    /* The tensors' sizes at the bound (seq = ENCODER_SEQ_MAX) give the bytes of one row. */
    size_t in_row = encoder_input_bytes(0) / ENCODER_SEQ_MAX;
    size_t out_row = encoder_output_bytes(0) / ENCODER_SEQ_MAX;
    int status = 0;
    for (int i = 1; i + 1 < argc && status == 0; i += 2)
        status = !run_one(ctx, argv[i], argv[i + 1], in_row, out_row);
    encoder_destroy(ctx);
    return status;
}
