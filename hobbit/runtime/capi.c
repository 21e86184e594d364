/* The C API of a library exported by hobbit (hobbit/runtime/export.py).
 *
 * Compiled once per export with the system C compiler, with -DHOBBIT_PREFIX=<name>
 * (every public function is <name>_<fn>) and a generated "hobbit_model.h" on the include
 * path: this model's facts (arena and weights sizes, the weights' crc32, its inputs' and
 * outputs' sizes, its run-time check records, and for a model with run-time dims the
 * symbols' names and bounds), which includes the public <name>.h; and linked with the
 * model's and the thread runtime's object code, whose entry point is hobbit_main
 * (hobbit/backend/cpu/module.py). It needs only libc: open/fstat/mmap for
 * the weights file, aligned_alloc for the arena, snprintf for messages.
 *
 * A context owns one arena, so one context runs one inference at a time; threads that
 * run concurrently each create their own context (the weights file is mapped read-only
 * and shared by the page cache). */

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define HOBBIT_CAT2(a, b) a##_##b
#define HOBBIT_CAT(a, b) HOBBIT_CAT2(a, b)
#define HB(fn) HOBBIT_CAT(HOBBIT_PREFIX, fn)

/* The arena's base alignment: kernels use aligned vector loads on 64-byte boundaries. */
#define ARENA_ALIGN 64

/* One run-time check record of the arena (hobbit/emit/status.py): which node it guards. */
struct hobbit_check {
    size_t offset;
    const char *node;
    const char *op;
};

#include "hobbit_model.h"

int32_t hobbit_main(void **inputs, void **outputs, char *weights, char *arena, int64_t threads);

struct HB(ctx) {
    char *weights;          /* the mapped weights file (or a dummy byte when there are none) */
    size_t weights_mapped;  /* bytes mapped, 0 when nothing is mapped */
    char *arena;
    int owns_arena;
    int threads;            /* threads per inference: 1..HOBBIT_THREADS */
    char message[512];
};

static char no_weights;

#if HOBBIT_WEIGHTS_EMBEDDED
extern const unsigned char hobbit_weights_data[]; /* assembled into the library by export.py */
#endif

static int fail(struct HB(ctx) *ctx, int code, const char *format, ...)
{
    va_list args;
    va_start(args, format);
    vsnprintf(ctx->message, sizeof ctx->message, format, args);
    va_end(args);
    return code;
}

static uint32_t crc32_of(const unsigned char *data, size_t size)
{
    /* zlib's crc32 (reflected polynomial 0xEDB88320), the checksum export.py records. */
    uint32_t table[256];
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        table[n] = c;
    }
    uint32_t crc = 0xFFFFFFFFu;
    for (size_t i = 0; i < size; i++)
        crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
    return crc ^ 0xFFFFFFFFu;
}

static int map_weights(struct HB(ctx) *ctx, const char *path)
{
    if (HOBBIT_WEIGHTS_BYTES == 0) {
        ctx->weights = &no_weights;
        return 0;
    }
#if HOBBIT_WEIGHTS_EMBEDDED
    if (path != NULL)
        return fail(ctx, HOBBIT_E_ARGUMENT, "this library carries its weights: pass NULL as weights_path, not '%s'", path);
    ctx->weights = (char *)hobbit_weights_data;
    uint32_t inside = crc32_of(hobbit_weights_data, HOBBIT_WEIGHTS_BYTES);
    if (inside != HOBBIT_WEIGHTS_CRC32)
        return fail(ctx, HOBBIT_E_WEIGHTS, "the weights inside this library are damaged: their crc32 is %08x, "
                    "it was built with %08x", (unsigned)inside, (unsigned)HOBBIT_WEIGHTS_CRC32);
    return 0;
#else
    if (path == NULL)
        return fail(ctx, HOBBIT_E_ARGUMENT, "the weights file path is NULL (this library's weights are in a file)");
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return fail(ctx, HOBBIT_E_WEIGHTS, "cannot open the weights file '%s': %s", path, strerror(errno));
    struct stat st = {0};
    if (fstat(fd, &st) != 0 || (unsigned long long)st.st_size != HOBBIT_WEIGHTS_BYTES) {
        close(fd);
        return fail(ctx, HOBBIT_E_WEIGHTS, "the weights file '%s' has %lld bytes, this library needs %lld "
                    "(a file from another export?)", path, (long long)st.st_size, (long long)HOBBIT_WEIGHTS_BYTES);
    }
    void *data = mmap(NULL, HOBBIT_WEIGHTS_BYTES, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (data == MAP_FAILED)
        return fail(ctx, HOBBIT_E_WEIGHTS, "cannot map the weights file '%s': %s", path, strerror(errno));
    ctx->weights = data;
    ctx->weights_mapped = HOBBIT_WEIGHTS_BYTES;
    uint32_t crc = crc32_of(data, HOBBIT_WEIGHTS_BYTES);
    if (crc != HOBBIT_WEIGHTS_CRC32)
        return fail(ctx, HOBBIT_E_WEIGHTS, "the weights file '%s' is damaged or from another export: its crc32 "
                    "is %08x, this library was built with %08x", path, (unsigned)crc, (unsigned)HOBBIT_WEIGHTS_CRC32);
    return 0;
#endif
}

static int set_arena(struct HB(ctx) *ctx, void *arena, size_t arena_bytes)
{
    if (arena == NULL) {
        size_t size = (HOBBIT_ARENA_BYTES + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
        ctx->arena = aligned_alloc(ARENA_ALIGN, size ? size : ARENA_ALIGN);
        ctx->owns_arena = 1;
        if (ctx->arena == NULL)
            return fail(ctx, HOBBIT_E_MEMORY, "cannot allocate the arena (%zu bytes)", (size_t)HOBBIT_ARENA_BYTES);
        return 0;
    }
    if (arena_bytes < HOBBIT_ARENA_BYTES)
        return fail(ctx, HOBBIT_E_ARGUMENT, "the arena has %zu bytes, the model needs %zu (see _arena_bytes())",
                    arena_bytes, (size_t)HOBBIT_ARENA_BYTES);
    if ((uintptr_t)arena % ARENA_ALIGN != 0)
        return fail(ctx, HOBBIT_E_ARGUMENT, "the arena must be aligned to %d bytes", ARENA_ALIGN);
    ctx->arena = arena;
    return 0;
}

size_t HB(arena_bytes)(void)
{
    return HOBBIT_ARENA_BYTES;
}

size_t HB(input_bytes)(int index)
{
    return index >= 0 && index < HOBBIT_NUM_INPUTS ? hobbit_input_bytes[index] : 0;
}

size_t HB(output_bytes)(int index)
{
    return index >= 0 && index < HOBBIT_NUM_OUTPUTS ? hobbit_output_bytes[index] : 0;
}

int HB(create)(const char *weights_path, int threads, void *arena, size_t arena_bytes, struct HB(ctx) **out)
{
    struct HB(ctx) *ctx = calloc(1, sizeof *ctx);
    *out = ctx;
    if (ctx == NULL)
        return HOBBIT_E_MEMORY;
    if (threads < 0 || threads > HOBBIT_THREADS)
        return fail(ctx, HOBBIT_E_ARGUMENT, "this library was built for %d thread(s): threads must be 1 to %d, or 0 for "
                    "all of them; got threads=%d (export again for more)", HOBBIT_THREADS, HOBBIT_THREADS, threads);
    ctx->threads = threads ? threads : HOBBIT_THREADS;
    int code = set_arena(ctx, arena, arena_bytes);
    return code ? code : map_weights(ctx, weights_path);
}

/* A model with run-time dims takes the symbols' values as its last input. The code reads and
 * writes only inside the extents those values give, and its buffers are sized for the bounds:
 * a value past its bound would be past the buffers, so none runs. */
static int check_dims(struct HB(ctx) *ctx, const void *const *inputs)
{
#if HOBBIT_NUM_SYMBOLS > 0
    const int64_t *dims = inputs == NULL ? NULL : inputs[HOBBIT_NUM_INPUTS - 1];
    if (dims == NULL)
        return fail(ctx, HOBBIT_E_ARGUMENT, "inputs[%d], the values of the run-time dims, is NULL; nothing was run",
                    HOBBIT_NUM_INPUTS - 1);
    for (int i = 0; i < HOBBIT_NUM_SYMBOLS; i++)
        if (dims[i] < hobbit_dims_min[i] || dims[i] > hobbit_dims_max[i])
            return fail(ctx, HOBBIT_E_ARGUMENT, "run-time dim '%s' (inputs[%d][%d]) is %lld, this library runs %lld to "
                        "%lld; nothing was run", hobbit_symbols[i], HOBBIT_NUM_INPUTS - 1, i, (long long)dims[i],
                        (long long)hobbit_dims_min[i], (long long)hobbit_dims_max[i]);
#else
    (void)ctx;
    (void)inputs;
#endif
    return HOBBIT_OK;
}

int HB(run)(struct HB(ctx) *ctx, const void *const *inputs, void *const *outputs)
{
    if (ctx == NULL || ctx->arena == NULL || ctx->weights == NULL)
        return HOBBIT_E_ARGUMENT;
    ctx->message[0] = '\0';
    int refused = check_dims(ctx, inputs);
    if (refused)
        return refused;
    int32_t status = hobbit_main((void **)inputs, (void **)outputs, ctx->weights, ctx->arena, ctx->threads);
    if (status <= 0 || status > HOBBIT_NUM_CHECKS)
        return status == 0 ? HOBBIT_OK : fail(ctx, HOBBIT_E_INVALID_DATA, "unknown status %d", (int)status);
    const struct hobbit_check *check = &hobbit_checks[status - 1];
    const int64_t *words = (const int64_t *)(ctx->arena + check->offset);
    int64_t kind = words[HOBBIT_WORD_KIND];
    char axis[48] = "";
    if (kind == HOBBIT_KIND_INDEX)
        snprintf(axis, sizeof axis, " along axis %lld", (long long)words[HOBBIT_WORD_AXIS]);
    snprintf(ctx->message, sizeof ctx->message, "node '%s' (%s): %s %lld is out of range [%lld, %lld]%s; "
             "no outputs were returned", check->node, check->op,
             kind >= 1 && kind <= HOBBIT_NUM_KINDS ? hobbit_check_kinds[kind - 1] : "value",
             (long long)words[HOBBIT_WORD_VALUE], (long long)words[HOBBIT_WORD_LO],
             (long long)words[HOBBIT_WORD_HI], axis);
    return HOBBIT_E_INVALID_DATA;
}

const char *HB(error)(const struct HB(ctx) *ctx)
{
    return ctx == NULL ? "out of memory creating the context" : ctx->message;
}

void HB(destroy)(struct HB(ctx) *ctx)
{
    if (ctx == NULL)
        return;
    if (ctx->weights_mapped)
        munmap(ctx->weights, ctx->weights_mapped);
    if (ctx->owns_arena)
        free(ctx->arena);
    free(ctx);
}
