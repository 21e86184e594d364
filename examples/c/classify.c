/* Classify one image with a model exported by hobbit, without Python.
 *
 * Export (in Python):  hobbit.compile("squeezenet1_1.onnx").export("build/squeezenet", name="squeezenet")
 *   or on the command line: hobbit compile squeezenet1_1.onnx --emit lib -o build/squeezenet --name squeezenet
 * Build:  cc -O2 -I build/squeezenet classify.c -L build/squeezenet -lsqueezenet \
 *            -Wl,-rpath,build/squeezenet -o classify
 *   or statically: cc -O2 -I build/squeezenet classify.c build/squeezenet/libsqueezenet.a -lm -o classify
 * Run:    ./classify image.raw [scores.raw]
 *   for a library whose weights are in a file (above 16 MiB, or exported with weights="file"):
 *          ./classify build/squeezenet/squeezenet.weights image.raw [scores.raw]
 *
 * image.raw holds the model's first input as raw float32 values in C order (for an ImageNet
 * model: 1x3x224x224, normalised); scores.raw, when given, receives the first output the same
 * way. For a model exported under another name, replace the squeezenet_ and SQUEEZENET_
 * prefixes. */

#include <stdio.h>
#include <stdlib.h>

#include "squeezenet.h"

#define TOP 5

static void *read_file(const char *path, size_t size)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return NULL;
    }
    void *data = malloc(size);
    size_t got = data ? fread(data, 1, size, f) : 0;
    int extra = fgetc(f) != EOF;
    fclose(f);
    if (got != size || extra) {
        fprintf(stderr, "%s: expected exactly %zu bytes (the model's first input)\n", path, size);
        free(data);
        return NULL;
    }
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

static void print_top(const float *scores, size_t count)
{
    int best[TOP];
    int found = 0;
    for (int rank = 0; rank < TOP && rank < (int)count; rank++) {
        int pick = -1;
        for (size_t i = 0; i < count; i++) {
            int taken = 0;
            for (int r = 0; r < found; r++)
                taken |= best[r] == (int)i;
            if (!taken && (pick < 0 || scores[i] > scores[pick]))
                pick = (int)i;
        }
        best[found++] = pick;
        printf("%d  class %d  score %.6g\n", rank + 1, pick, scores[pick]);
    }
}

int main(int argc, char **argv)
{
#if SQUEEZENET_WEIGHTS_EMBEDDED
    const char *weights = NULL; /* inside the library */
    const char *usage = "INPUT.raw [OUTPUT.raw]";
#else
    const char *weights = argc > 1 ? argv[1] : NULL;
    const char *usage = "WEIGHTS INPUT.raw [OUTPUT.raw]";
    argv++, argc--;
#endif
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        return 2;
    }
    squeezenet_ctx *ctx = NULL;
    if (squeezenet_create(weights, 0, NULL, 0, &ctx) != HOBBIT_OK) {
        fprintf(stderr, "cannot start the model: %s\n", squeezenet_error(ctx));
        squeezenet_destroy(ctx);
        return 1;
    }
    size_t out_bytes = squeezenet_output_bytes(0);
    float *input = read_file(argv[1], squeezenet_input_bytes(0));
    float *scores = malloc(out_bytes);
    int status = 1;
    if (input != NULL && scores != NULL) {
        const void *inputs[] = {input};
        void *outputs[] = {scores};
        if (squeezenet_run(ctx, inputs, outputs) != HOBBIT_OK)
            fprintf(stderr, "the run failed: %s\n", squeezenet_error(ctx));
        else {
            print_top(scores, out_bytes / sizeof(float));
            status = argc == 3 && !write_file(argv[2], scores, out_bytes);
        }
    }
    free(input);
    free(scores);
    squeezenet_destroy(ctx);
    return status;
}
